"""What a route needs, as typed dependencies: declare a parameter with one of these
aliases and FastAPI hands it over (and documents the headers in OpenAPI).

    def put_head(session_id: str, body: HeadBody, store: StoreDep, version: IfMatch): ...

- :data:`ContextDep`: the server's :class:`~clotho.api.context.ApiContext`.
- :data:`StoreDep`: its store.
- :data:`SessionDep`: the session named by the path's ``session_id`` (an id or a unique
  prefix; 404 when there is none).
- :data:`ReadSession`: the same for a read: 304 when ``If-None-Match`` names its current
  version (before the route reads anything), else the answer gets its version as ETag (a
  route that reads a page at its own version tags the answer again).
- :data:`IfMatch`: the version a write names in ``If-Match`` (``None``: absent or ``*``).
- :data:`IdempotencyKey`: the ``Idempotency-Key`` a write may carry
  (see :mod:`clotho.api.idempotency`).
- :data:`Writer`: writes to a session with both, answering a ``WriteOut``
  (:class:`~clotho.api.idempotency.SessionWriter`).
- :data:`NoParameters`: a read that takes no query parameter (any one is a 422).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import Depends, Header, Query, Request, Response

from mnemosyne import IDEMPOTENCY_KEEP, IDEMPOTENCY_KEY_LENGTH, Session, Store

from ._common import context
from .context import ApiContext, expected_version, not_modified
from .etags import etag
from .idempotency import SessionWriter
from .problems import NotModified
from .schemas import NoQuery

__all__ = [
    "ContextDep",
    "IdempotencyKey",
    "IfMatch",
    "NoParameters",
    "ReadSession",
    "SessionDep",
    "StoreDep",
    "Writer",
    "read_session",
]


ContextDep = Annotated[ApiContext, Depends(context)]


def _store(context: ContextDep) -> Store:
    return context.store


StoreDep = Annotated[Store, Depends(_store)]


def _session(session_id: str, store: StoreDep) -> Session:
    return store.session(session_id)


SessionDep = Annotated[Session, Depends(_session)]


def read_session(request: Request, response: Response, session: SessionDep) -> Session:
    if (cached := not_modified(request, session)) is not None:
        raise NotModified(cached)
    response.headers["ETag"] = etag(session.version)
    return session


ReadSession = Annotated[Session, Depends(read_session)]


def _if_match(
    request: Request,
    if_match: Annotated[
        str | None,
        Header(
            alias="If-Match",
            description='The session version the write was decided on, as its ETag ("12"):'
            " if the session has moved on since, the write is refused (412) and changes"
            " nothing. Absent or `*`: write on top of whatever is current.",
        ),
    ] = None,
) -> int | None:
    return expected_version(request)


IfMatch = Annotated[int | None, Depends(_if_match)]


def _hours(kept: timedelta) -> int:
    return int(kept.total_seconds() // 3600)


def _idempotency_key(
    key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            min_length=1,
            max_length=IDEMPOTENCY_KEY_LENGTH,
            description="Any unique string (a UUID): a write retried with the same key and"
            " the same body gets the first answer again (`Idempotent-Replayed: true`) and is"
            " not applied twice; the same key with another body is refused (422"
            f" `idempotency_key_reused`). Keys are kept {_hours(IDEMPOTENCY_KEEP)} hours, per"
            " session.",
        ),
    ] = None,
) -> str | None:
    return key


IdempotencyKey = Annotated[str | None, Depends(_idempotency_key)]


def _writer(
    request: Request,
    response: Response,
    store: StoreDep,
    version: IfMatch,
    key: IdempotencyKey,
) -> SessionWriter:
    return SessionWriter(store, request, response, version, key)


Writer = Annotated[SessionWriter, Depends(_writer)]


NoParameters = Annotated[NoQuery, Query()]
"""A read that takes no query parameter: any one is a 422 naming it."""
