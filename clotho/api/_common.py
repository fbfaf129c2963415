"""Small helpers the route modules share."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from fastapi import Request
from fastapi.responses import Response

from mnemosyne import Session

from .context import ApiContext
from .etags import etag
from .problems import ApiError

__all__ = [
    "attachment",
    "context",
    "json_bytes",
    "json_chunks",
    "line_chunks",
    "next_page",
    "page_after",
    "raw_json",
    "read_body",
    "tagged",
]


def context(request: Request) -> ApiContext:
    """The server's :class:`ApiContext` (also a route's ``ContextDep``)."""
    found: ApiContext = request.app.state.clotho
    return found


def next_page(request: Request, route: str, params: dict[str, Any], **path: str) -> str:
    """The path and query of a list's next page (its ``next``): the route named
    ``route`` with its ``path`` parameters, and ``params`` as its query."""
    return f"{request.app.url_path_for(route, **path)}?{urlencode(params)}"


def page_after(
    request: Request, route: str, after: str | None, limit: int, **path: str
) -> str | None:
    """The ``next`` of a list read by ``after`` cursors: the page after ``after`` (``None``:
    this page was the last)."""
    if after is None:
        return None
    return next_page(request, route, {"after": after, "limit": limit}, **path)


def tagged(response: Response, session: Session) -> None:
    """Give a checked answer (a document FastAPI validates against the route's
    ``response_model``) the session's version as ETag."""
    response.headers["ETag"] = etag(session.version)


def json_bytes(data: Any) -> bytes:
    """``data`` as compact UTF-8 JSON, written by orjson (the reads' hottest part: a window
    of 200 messages encodes ~6 times faster than with the standard library). What orjson
    refuses (an integer beyond 64 bits, which a stored document may hold) is written by
    the standard library instead."""
    try:
        return orjson.dumps(data)
    except orjson.JSONEncodeError:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _pieces(parts: Iterable[str], size: int) -> Iterator[bytes]:
    held: list[str] = []
    length = 0
    for part in parts:
        held.append(part)
        length += len(part)
        if length >= size:
            yield "".join(held).encode()
            held, length = [], 0
    if held:
        yield "".join(held).encode()


def json_chunks(data: Any, size: int = 64 * 1024) -> Iterator[bytes]:
    """``data`` as :func:`json_bytes` writes it, in pieces of about ``size`` bytes: a
    large document (a whole tree) is sent as it is encoded, never one string whole."""
    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    return _pieces(encoder.iterencode(data), size)


def line_chunks(
    lines: Sequence[str], size: int = 64 * 1024, *, newline: str = "\n", final: bool = True
) -> Iterator[bytes]:
    """Lines (JSONL) each ended by ``newline`` (the last one only if ``final``), in
    pieces of about ``size`` bytes."""
    last = len(lines) - 1
    ends = (newline if i < last or final else "" for i in range(len(lines)))
    return _pieces((line + end for line, end in zip(lines, ends, strict=True)), size)


def raw_json(body: bytes, session: Session) -> Response:
    """JSON already encoded, with the session's version as ETag."""
    return Response(body, media_type="application/json", headers={"ETag": etag(session.version)})


async def read_body(request: Request) -> bytes:
    """An uploaded file (the request's body), refused past the size limit."""
    limit = context(request).settings.max_upload_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "too_large", f"the file is {declared} bytes, more than {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "too_large", f"the file is more than the {limit} bytes allowed")
        chunks.append(chunk)
    data = b"".join(chunks)
    if not data:
        raise ApiError(422, "empty_upload", "the request has no body: send the file as the body")
    return data


def attachment(name: str, suffix: str) -> str:
    """A ``Content-Disposition`` downloading a file ``name.suffix``: an ASCII name for old
    clients and the whole name (RFC 6266's ``filename*``, UTF-8) for the rest, so a
    title or book name in any script makes a valid header (a bare non-Latin name in
    ``filename`` cannot be sent at all)."""
    plain = "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name)
    return (
        f'attachment; filename="{plain}.{suffix}"; '
        f"filename*=UTF-8''{quote(name + '.' + suffix, safe='')}"
    )
