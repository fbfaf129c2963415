"""clotho serve: the HTTP API (and, through it, the web page)."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from ._app import Cli, app, command
from .style import paint


@command(app, "serve")
def serve(
    cli: Cli,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The address to listen on (beyond loopback: needs a strong CLOTHO_API_TOKEN; "
            "on 0.0.0.0 or ::, allowed hosts too).",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="The port.")] = 8000,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            max=64,
            help="Server processes on the one database (use PostgreSQL for more than one).",
        ),
    ] = 1,
    allowed_hosts: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="A name (Host header) to answer besides loopback's and --host; repeat for "
            "more (env CLOTHO_ALLOWED_HOSTS, comma-separated; *.example.com for subdomains).",
            show_default=False,
        ),
    ] = None,
    cors_origins: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            metavar="ORIGIN",
            help="An origin (https://app.example.com) whose pages may call the API from a "
            "browser; repeat for more (env CLOTHO_CORS_ORIGINS; default: none).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start the web page and the HTTP API (OpenAPI documentation at /docs); Ctrl+C stops it."""
    import uvicorn

    from clotho.api.auth import TOKEN_FILE, check_host, resolve_token, served_hosts

    from .logs import server_log_config

    settings = cli.settings.model_copy(
        update={
            "allowed_hosts": [*cli.settings.allowed_hosts, *(allowed_hosts or ())],
            "cors_origins": [*cli.settings.cors_origins, *(cors_origins or ())],
        }
    )
    check_host(host, settings)
    hosts = served_hosts(host, settings)
    token, generated = resolve_token(settings)
    cli.store  # noqa: B018 - open (and migrate a SQLite file) once, before the workers
    cli.close()
    where = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    lines = [f"Clotho on {paint(where, 'bold')}: the web page, and the API ({where}/docs)"]
    if generated:
        lines.append(f"A token was generated for this API: {paint(token, 'bold')}")
        lines.append(f"  open the page with it: {paint(f'{where}/#token={token}', 'bold')}")
        lines.append(
            f"  (kept in {settings.data_dir / TOKEN_FILE}; set CLOTHO_API_TOKEN to choose one)"
        )
    elif not settings.api_token:
        lines.append(f"Token: the one in {settings.data_dir / TOKEN_FILE}")
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()
    if workers == 1:
        from clotho.api import create_app

        uvicorn.run(
            create_app(settings, token=token, hosts=hosts),
            host=host,
            port=port,
            log_level="warning",
            log_config=server_log_config(),
        )
        return
    # Each worker builds its app from the environment: hand it everything given here.
    given = {
        "CLOTHO_DATABASE_URL": settings.resolved_database_url,
        "CLOTHO_DATA_DIR": str(settings.data_dir),
        "CLOTHO_API_TOKEN": token,
        "CLOTHO_MODEL": settings.model,
        "CLOTHO_API_BASE": settings.api_base,
        "CLOTHO_ALLOWED_HOSTS": ",".join(hosts),
        "CLOTHO_CORS_ORIGINS": ",".join(settings.cors_origins),
    }
    os.environ.update({key: value for key, value in given.items() if value})
    uvicorn.run(
        "clotho.api:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        log_config=server_log_config(),
    )
