"""The crash tests' long runs are skipped unless asked for (see ``tests/_long.py``)."""

from __future__ import annotations

import pytest

from tests._long import skip_unless_long


def pytest_runtest_setup(item: pytest.Item) -> None:
    skip_unless_long(item)
