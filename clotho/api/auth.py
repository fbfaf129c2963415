"""Bearer-token auth: a token from the settings, or one generated at first start."""

from __future__ import annotations

import ipaddress
import os
import secrets
from pathlib import Path
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from clotho.errors import UsageError
from clotho.settings import Settings

from .problems import ApiError

__all__ = ["TOKEN_FILE", "check_host", "require_token", "resolve_token", "token_matches"]

TOKEN_FILE = "api-token"
bearer = HTTPBearer(
    auto_error=False,
    description="The token of `clotho serve` (CLOTHO_API_TOKEN, or the one it printed).",
)


def resolve_token(settings: Settings) -> tuple[str, bool]:
    """The API's token and whether it was just generated.

    ``CLOTHO_API_TOKEN`` if set; else the token kept in ``data_dir/api-token``, written
    (readable by the user only) the first time.
    """
    if settings.api_token:
        return settings.api_token, False
    path = Path(settings.data_dir) / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({error.strerror or error})") from None
    if token:
        return token, False
    token = secrets.token_urlsafe(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(token + "\n")
    except OSError as error:
        raise UsageError(f"{path}: cannot be written ({error.strerror or error})") from None
    return token, True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, settings: Settings) -> None:
    """Refuse to listen beyond loopback unless a token is set in the settings."""
    if not is_loopback(host) and not settings.api_token:
        raise UsageError(
            f"refusing to listen on {host} (beyond this machine) without a token: "
            "set CLOTHO_API_TOKEN (a long random secret) first"
        )


async def require_token(
    request: Request,
    given: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """The dependency of every /api route but health."""
    expected = request.app.state.clotho.token
    if given is None:
        raise ApiError(
            401, "unauthorized", "this API needs a token: send 'Authorization: Bearer <token>'"
        )
    if not token_matches(given.credentials.encode(), expected):
        raise ApiError(401, "unauthorized", "the bearer token is not this server's")


def token_matches(given: bytes, expected: str | None) -> bool:
    """Whether ``given`` (the credentials of ``Authorization: Bearer``) is the token."""
    return expected is not None and secrets.compare_digest(given, expected.encode())
