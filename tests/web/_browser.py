"""Headless Chromium (Debian's package) driven by Playwright, for the web page's tests and
``bench/web_tree.py``. Playwright is told where the browser is: it never downloads one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

# What the machine's closed network needs: no background connections, no sandbox (root).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str | None:
    """``CLOTHO_CHROMIUM``, else Debian's ``chromium`` on the PATH; ``None``: none."""
    given = os.environ.get("CLOTHO_CHROMIUM")
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def missing() -> str | None:
    """Why a browser test cannot run here, or ``None``."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the browser tests need playwright (pip install -e '.[test]')"
    if chromium_path() is None:
        return "the browser tests need Chromium: apt-get install chromium (or set CLOTHO_CHROMIUM)"
    return None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()
