"""The fuzz tests' long runs are skipped unless asked for (see ``tests/_long.py``)."""

from __future__ import annotations

import pytest

from tests._long import skip_unless_long


def pytest_runtest_setup(item: pytest.Item) -> None:
    skip_unless_long(item)


# The API's test client (the app over the test's store, with the token), as tests/api has it.
from tests.api.conftest import client, make_client  # noqa: E402, F401
