"""The web page: a chat view and a tree view over the public HTTP API.

Plain ES modules and one vendored library (d3, see ``static/vendor/README.md``): no
build step. The API process serves them: the page at ``/``, its files under
``/static``. The page itself holds no secret; it asks for the API's token (or takes it
from the address ``clotho serve`` prints, ``/#token=...``) and keeps it in the browser.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, Response
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC", "mount"]

STATIC = Path(__file__).parent / "static"

# Model text is shown as text, never as markup; the page loads nothing from elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def mount(app: FastAPI) -> None:
    """Serve the page at ``/`` and its files under ``/static``."""
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> Response:
        return FileResponse(STATIC / "index.html", headers=SECURITY_HEADERS)
