"""Session documents (lorebooks, character cards): JSON texts kept with a session.

A document is read back (a session's lore, every turn), so it is only kept if it reads
within :data:`mnemosyne.jsontext.DOCUMENT`'s limits.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, insert, select, update

from . import jsontext
from ._schema import documents
from .errors import InvalidOperationError, JsonTextError, NotFoundError
from .models import Document

KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
MAX_NAME = 200


def _check(kind: str, name: str) -> None:
    if not isinstance(kind, str) or not KIND.match(kind):
        raise InvalidOperationError(f"document kind {kind!r}: lowercase letters, digits and '_'")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise InvalidOperationError(
            f"document name {name!r}: non-empty text of at most {MAX_NAME} characters"
        )


def put(conn: Connection, session_pk: int, kind: str, name: str, content: str) -> Document:
    _check(kind, name)
    if not isinstance(content, str):
        raise InvalidOperationError(f"document {kind} {name!r}: content must be JSON text")
    try:
        jsontext.loads(content, jsontext.DOCUMENT)
    except JsonTextError as error:
        raise InvalidOperationError(f"document {kind} {name!r}: {error}") from error
    digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
    now = datetime.now(UTC)
    where = (
        documents.c.session_pk == session_pk,
        documents.c.kind == kind,
        documents.c.name == name,
    )
    found = conn.execute(select(documents.c.pk, documents.c.created_at).where(*where)).first()
    if found is None:
        conn.execute(
            insert(documents).values(
                session_pk=session_pk,
                kind=kind,
                name=name,
                content=content,
                hash=digest,
                created_at=now,
            )
        )
    else:
        conn.execute(update(documents).where(*where).values(content=content, hash=digest))
        now = found.created_at
    return Document(kind, name, content, digest, now)


def remove(conn: Connection, session_pk: int, kind: str, name: str) -> None:
    result = conn.execute(
        delete(documents).where(
            documents.c.session_pk == session_pk, documents.c.kind == kind, documents.c.name == name
        )
    )
    if result.rowcount == 0:
        raise NotFoundError(f"this session has no {kind} named {name!r}")


def listed(conn: Connection, session_pk: int, kind: str | None) -> list[Document]:
    query = select(
        documents.c.kind,
        documents.c.name,
        documents.c.content,
        documents.c.hash,
        documents.c.created_at,
    ).where(documents.c.session_pk == session_pk)
    if kind is not None:
        query = query.where(documents.c.kind == kind)
    rows = conn.execute(query.order_by(documents.c.pk)).all()
    return [Document(*row) for row in rows]
