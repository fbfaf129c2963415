"""The long runs (``@pytest.mark.long``): many SIGKILLs, many fuzz examples.

They are left out of the default suite (skipped with the reason) and run with
``CLOTHO_LONG=1`` or when ``-m`` names the marker (``pytest -m long tests/crash``).
The conftest of each folder holding long tests calls :func:`skip_unless_long`.
"""

from __future__ import annotations

import os

import pytest

ENV = "CLOTHO_LONG"


def long_enabled(config: pytest.Config) -> bool:
    """Whether this run asked for the long tests."""
    if os.environ.get(ENV, "").lower() in ("1", "true", "yes"):
        return True
    expression = config.getoption("markexpr", default="") or ""
    return "long" in expression and "not long" not in expression


def skip_unless_long(item: pytest.Item) -> None:
    """Skip a ``long`` test unless the run asked for them."""
    if item.get_closest_marker("long") is not None and not long_enabled(item.config):
        pytest.skip(f"a long run: set {ENV}=1 or pass -m long")
