"""The FastAPI application: its routes, auth, limits and error documents."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clotho.settings import Settings
from clotho.web import mount as mount_page
from mnemosyne import Store

from . import (
    cascade,
    cast,
    events,
    exchange,
    lorebooks,
    profiles,
    prompt_preview,
    reads,
    replay,
    search,
    sessions,
    stories,
    tags,
    tracediff,
    turns,
    writes,
)
from ._common import context
from .auth import TrustedHosts, allowed_origins, require_token, resolve_token, served_hosts
from .context import ApiContext
from .openapi import declare
from .problems import ApiError, install, problem_response
from .schemas import HealthOut
from .warm import Warmup

__all__ = ["app_from_env", "create_app"]

DESCRIPTION = """\
Clotho's HTTP API: everything the `clotho` command line does, for front-ends.

* Every route under `/api` but `/api/health` needs `Authorization: Bearer <token>` (the
  token of `clotho serve`: `CLOTHO_API_TOKEN`, or the one it printed at first start).
* Responses about a session carry its version as `ETag`; a write may send
  `If-Match: "<version>"` and is refused with **412** (and the current version) if the
  session has moved on since. Reads answer `If-None-Match` with 304.
* Errors are `application/problem+json` (RFC 9457): one schema, `Problem`, with a `code`
  (each listed in docs/api.md) and a `detail` naming what was wrong; every route declares
  each status it can answer.
* Turns stream as server-sent events (`POST /api/sessions/{id}/turns`).
* Node and session ids may be abbreviated to a unique prefix of at least 6 characters.
* A request whose `Host` the server does not serve (loopback's names, its address,
  `CLOTHO_ALLOWED_HOSTS`) is refused with **421** before anything else.
"""


class BodyLimit:
    """Refuse (413) request bodies larger than the upload limit, declared or streamed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            refusal = ApiError(
                413, "too_large", f"the body is {int(declared)} bytes, more than {self.limit}"
            )
            await problem_response(refusal, scope.get("path"))(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise ApiError(413, "too_large", f"the body is more than {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


#: Where the vendored Swagger UI of ``/docs`` is served (the page's static files).
SWAGGER = "/static/vendor"

#: What a page of an origin in ``CLOTHO_CORS_ORIGINS`` may send (every method the routes
#: take: tests/api/test_contract.py checks it), and read of the answers.
CORS_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
#: (Every header the OpenAPI document declares: tests/api/test_contract.py checks it.)
CORS_HEADERS = (
    "Authorization",
    "Content-Type",
    "If-Match",
    "If-None-Match",
    "Idempotency-Key",
    "Last-Event-ID",
)
CORS_EXPOSED = (
    "ETag",
    "Location",
    "WWW-Authenticate",
    "Idempotent-Replayed",
    "Content-Disposition",
    "X-Clotho-Messages",
    "X-Clotho-Dropped",
)


def create_app(
    settings: Settings | None = None,
    *,
    store: Store | None = None,
    token: str | None = None,
    hosts: Sequence[str] | None = None,
    warm: bool | None = None,
) -> FastAPI:
    """The API over ``store`` (default: the settings' database, opened here and closed
    at shutdown). ``token``: the bearer token (default: :func:`resolve_token`).
    ``hosts``: the ``Host`` names it answers, any other refused before anything else
    sees the request (default: those of a server on loopback, :func:`served_hosts`).
    Browsers may call it from other origins only if ``settings.cors_origins`` lists
    them: with none, it sends no CORS header at all. ``warm``: load what the first turn
    needs in the background at start-up (default: when the app opens its own store, as a
    server does; see :mod:`clotho.api.warm`)."""
    from clotho import __version__

    settings = settings or Settings()
    own_store = store is None
    if token is None:
        token, _ = resolve_token(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = store or Store.open(settings.resolved_database_url)
        app.state.clotho = ApiContext(settings, opened, token)
        if own_store if warm is None else warm:
            app.state.warmup.start(app.state.clotho)
        try:
            yield
        finally:
            loading_model = app.state.warmup.cancel()  # a stop while warming: at once
            await events.close_hub(app.state)  # the live streams end, their listener stops
            await app.state.clotho.aclose(model_clients=not loading_model)
            if own_store:
                opened.close()

    app = FastAPI(
        title="Clotho",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served below from the vendored Swagger UI: no CDN
        redoc_url=None,
    )
    app.state.warmup = Warmup()
    if store is not None:  # usable before the lifespan runs (tests without a server)
        app.state.clotho = ApiContext(settings, store, token)
    install(app)
    api = APIRouter(prefix="/api", dependencies=[Depends(require_token)])
    for module in (
        sessions,
        reads,
        writes,
        turns,
        cascade,
        replay,
        cast,
        exchange,
        lorebooks,
        stories,
        profiles,
        prompt_preview,
        search,
        tracediff,
        events,
        tags,
    ):
        api.include_router(module.router)
    app.include_router(api)

    @app.get("/api/health", tags=["server"], summary="Is the server up", response_model=HealthOut)
    def health(request: Request) -> dict[str, str]:
        """Needs no token. ``warm``: ``warming`` while the server loads what the first
        turn needs (a turn then waits for it), ``ready`` after."""
        return {
            "status": "ok",
            "version": __version__,
            "database": context(request).store.dialect,
            "warm": request.app.state.warmup.state,
        }

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> HTMLResponse:
        """Swagger UI over /openapi.json, from the page's vendored files (it works
        offline; see clotho/web/static/vendor/README.md). The app is the request's:
        FastAPI keeps its endpoints in a cache of thousands, which would keep an app
        this function closed over alive (a test process makes hundreds)."""
        return get_swagger_ui_html(
            openapi_url=request.app.openapi_url or "/openapi.json",
            title="Clotho API",
            swagger_js_url=f"{SWAGGER}/swagger-ui-bundle.js",
            swagger_css_url=f"{SWAGGER}/swagger-ui.css",
            swagger_favicon_url=f"{SWAGGER}/swagger-ui-favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # its default asks a server
        )

    mount_page(app)
    declare(app)
    # Each layer added goes outside the ones before: the Host check is the outermost.
    app.add_middleware(BodyLimit, limit=settings.max_upload_bytes)
    origins = allowed_origins(settings)
    if origins:  # outside the 413s, so that they carry CORS too
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=CORS_METHODS,
            allow_headers=CORS_HEADERS,
            expose_headers=CORS_EXPOSED,
        )
    served = served_hosts("127.0.0.1", settings) if hosts is None else list(hosts)
    app.add_middleware(TrustedHosts, allowed_hosts=served)
    return app


def app_from_env() -> FastAPI:
    """The app of a server worker: everything from ``CLOTHO_*`` variables (``clotho serve``
    sets them, the token and the served host names included, before it starts the
    workers)."""
    if not os.environ.get("CLOTHO_API_TOKEN"):
        raise RuntimeError("CLOTHO_API_TOKEN is not set: start the server with `clotho serve`")
    return create_app(Settings())
