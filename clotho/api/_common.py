"""Small helpers the route modules share."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from mnemosyne import Session

from .context import ApiContext, etag
from .problems import ApiError

__all__ = ["context", "document", "json_bytes", "raw_json", "read_body"]


def context(request: Request) -> ApiContext:
    return request.app.state.clotho


def document(data: Any, session: Session | None = None, status: int = 200) -> JSONResponse:
    """``data`` as JSON, with the session's version as ETag."""
    headers = {"ETag": etag(session.version)} if session is not None else None
    return JSONResponse(data, status_code=status, headers=headers)


def json_bytes(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def raw_json(body: bytes, session: Session, status: int = 200) -> Response:
    return Response(
        body,
        status_code=status,
        media_type="application/json",
        headers={"ETag": etag(session.version)},
    )


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
