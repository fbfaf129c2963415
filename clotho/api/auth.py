"""Who may talk to the API: the bearer token (from the settings, or one generated at
first start), the Host names the server answers, and the browser origins it lets in.

A token guards every ``/api`` route but health; it does not guard the page, its files,
``/api/health`` or the OpenAPI document, and a token typed by a careless user is soon
guessed. So beyond loopback a weak token is refused at start (:func:`check_host`), and
every request whose ``Host`` is not one the server serves is refused before anything
else sees it (:class:`TrustedHosts`): a page of another site whose name was made to
resolve to this machine (DNS rebinding) gets nothing. Browsers call the API from other
origins only if the settings list them (:func:`allowed_origins`, CORS).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette._utils import parse_host_header  # what TrustedHostMiddleware parses with
from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from clotho.errors import UsageError
from clotho.settings import Settings

from .problems import ApiError, problem_response

__all__ = [
    "LOOPBACK_NAMES",
    "MIN_TOKEN_DISTINCT",
    "MIN_TOKEN_LENGTH",
    "TOKEN_FILE",
    "TrustedHosts",
    "allowed_origins",
    "check_host",
    "require_token",
    "resolve_token",
    "served_hosts",
    "token_matches",
    "token_weakness",
]

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


#: The names of this machine's loopback, as a ``Host`` header holds them (no port).
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: A token good enough to serve beyond loopback: this long, with this many different
#: characters (a floor against careless tokens, not a proof of randomness: 32 hex
#: digits from ``openssl rand -hex 16`` have fewer than 8 different ones about once in
#: 30 million draws).
MIN_TOKEN_LENGTH = 32
MIN_TOKEN_DISTINCT = 8
_LABEL = r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?"
_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*\.?")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to listen on, or a name) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_unspecified(host: str) -> bool:
    """Whether listening on ``host`` means every address of the machine (0.0.0.0, ::)."""
    if host == "":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def token_weakness(token: str) -> str | None:
    """What makes ``token`` too weak to serve beyond loopback, or ``None``."""
    length, distinct = len(token), len(set(token))
    if length < MIN_TOKEN_LENGTH:
        return f"it is {length} character{'' if length == 1 else 's'} long"
    if distinct < MIN_TOKEN_DISTINCT:
        return f"it has only {distinct} different characters"
    return None


def check_host(host: str, settings: Settings) -> None:
    """Refuse to listen on ``host`` when that would be careless: beyond loopback, with
    no token, a weak one (:func:`token_weakness`), or on every address (0.0.0.0, ::)
    with no allowed host names; and refuse malformed allowed hosts or CORS origins."""
    served_hosts(host, settings)
    allowed_origins(settings)
    if is_loopback(host):
        return
    if not settings.api_token:
        raise UsageError(
            f"refusing to listen on {host} (beyond this machine) without a token: "
            "set CLOTHO_API_TOKEN (a long random secret) first"
        )
    weakness = token_weakness(settings.api_token)
    if weakness is not None:
        raise UsageError(
            f"refusing to listen on {host} (beyond this machine) with a weak "
            f"CLOTHO_API_TOKEN ({weakness}): it needs at least {MIN_TOKEN_LENGTH} "
            f"characters, {MIN_TOKEN_DISTINCT} of them different (make one with "
            "`openssl rand -hex 32`)"
        )
    if is_unspecified(host) and not settings.allowed_hosts:
        raise UsageError(
            f"refusing to listen on {host or 'every address'} without the names clients "
            "use to reach this machine: set CLOTHO_ALLOWED_HOSTS (or --allowed-host NAME), "
            "for example to its address or domain name"
        )


def served_hosts(host: str, settings: Settings) -> list[str]:
    """The ``Host`` names a server listening on ``host`` answers: loopback's, ``host``
    itself (unless it is every address), and ``settings.allowed_hosts``, each lowercase,
    IPv6 addresses in brackets, without a port (ports are not compared: a page that
    reaches this server by a name of its own sends that name, whatever the port)."""
    names = list(LOOPBACK_NAMES)
    if not is_loopback(host) and not is_unspecified(host):
        names.append(_host_name(host, "--host"))
    names += [_host_name(given, "CLOTHO_ALLOWED_HOSTS") for given in settings.allowed_hosts]
    return list(dict.fromkeys(names))


def _host_name(given: str, where: str) -> str:
    """``given`` (a name, an address, ``*.domain`` or ``*``) as a ``Host`` header holds it."""
    name = given.strip().lower()
    if name == "*":
        return name
    try:
        address = ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        address = None
    if address is not None:
        return f"[{address.compressed}]" if address.version == 6 else address.compressed
    if not _NAME.fullmatch(name):
        raise UsageError(
            f"{where}: {given!r} is not a host name (give names or addresses such as "
            "clotho.example.com, 192.168.1.5 or *.example.com, with no scheme or port)"
        )
    return name.rstrip(".")


def allowed_origins(settings: Settings) -> list[str]:
    """The CORS origins of the settings, checked: each ``scheme://host[:port]``, or ``*``."""
    origins = []
    for given in settings.cors_origins:
        parts = urlsplit(given)
        if given != "*" and (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise UsageError(
                f"CLOTHO_CORS_ORIGINS: {given!r} is not an origin (give scheme://host[:port], "
                "such as https://app.example.com, or *)"
            )
        origins.append(given if given == "*" else f"{parts.scheme}://{parts.netloc}".lower())
    return origins


class TrustedHosts(TrustedHostMiddleware):
    """Starlette's :class:`TrustedHostMiddleware` (its patterns: exact names,
    ``*.example.com``, ``*``; its parsing of ``Host``), answering as the rest of the API
    does, with a problem document naming the host, where Starlette's own answers a
    plain-text 400 that names nothing: a ``Host`` the server does not serve is **421**
    (Misdirected Request, code ``unknown_host``), a missing or malformed one 400
    (``invalid_host``).

    It is the outermost layer of the app, so nothing behind it (the answers made before
    routing included) sees a request it refuses."""

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        super().__init__(app, allowed_hosts=allowed_hosts, www_redirect=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.allow_any or scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(Headers(scope=scope).getlist("host"))
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":  # closed before it is accepted: a 403
            await send({"type": "websocket.close", "code": 1008})
        else:
            await problem_response(refusal, scope.get("path"))(scope, receive, send)

    def refusal(self, given: list[str]) -> ApiError | None:
        """Why a request with these ``Host`` headers is refused, or ``None``."""
        if len(given) != 1:
            many = "more than one Host header" if given else "no Host header"
            return ApiError(400, "invalid_host", f"the request has {many}")
        parsed = parse_host_header(given[0])
        if parsed is None:
            return ApiError(
                400, "invalid_host", f"the Host header {given[0]!r} is malformed", host=given[0]
            )
        if not self.serves(parsed.host):
            return ApiError(
                421,
                "unknown_host",
                f"this server does not answer for the host {given[0]!r} (its operator may "
                "add the name to CLOTHO_ALLOWED_HOSTS)",
                host=given[0],
            )
        return None

    def serves(self, name: str) -> bool:
        """Whether ``name`` (a ``Host`` header's host, without its port) is served."""
        name = name.lower().removesuffix(".")  # clotho.example. is clotho.example
        if name.startswith("["):  # the same address however it is written
            with contextlib.suppress(ValueError):
                name = f"[{ipaddress.IPv6Address(name[1:-1]).compressed}]"
        return any(
            name == pattern or (pattern.startswith("*.") and name.endswith(pattern[1:]))
            for pattern in self.allowed_hosts
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
