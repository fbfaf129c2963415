"""Idempotency keys: a write's answer kept with the key its client sent, per session.

A client that does not know whether its write happened (the connection dropped before
the answer came) sends it again with the same key: the store hands back the answer the
first one got instead of applying it twice. The key, a hash of the request and the
answer are written in the same transaction as the write itself (see
:meth:`mnemosyne.SessionTransaction.remember`), so a key is stored if and only if its
write is, across restarts and processes.

Keys are kept :data:`KEEP` long: older ones are ignored and deleted by the next write
that stores a key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, delete, insert, select

from ._schema import IDEMPOTENCY_KEY_LENGTH, idempotency_keys
from .errors import IdempotencyKeyReusedError, InvalidOperationError
from .models import Session

__all__ = ["KEEP", "Pending", "check_key", "expire", "find", "save"]

#: How long a key is kept (and honoured).
KEEP = timedelta(hours=24)


@dataclass(frozen=True, slots=True)
class Pending:
    """A key to store when its transaction commits: ``answer`` makes the answer's text
    from the session as the transaction leaves it."""

    key: str
    request_hash: str
    answer: Callable[[Session], str]


def check_key(key: object) -> str:
    """``key`` if it is a usable idempotency key (1 to 200 printable ASCII characters).

    Raises:
        InvalidOperationError: it is not.
    """
    if (
        not isinstance(key, str)
        or not 0 < len(key) <= IDEMPOTENCY_KEY_LENGTH
        or not (key.isascii() and key.isprintable())
    ):
        raise InvalidOperationError(
            f"an idempotency key is 1 to {IDEMPOTENCY_KEY_LENGTH} printable ASCII"
            f" characters, not {key!r}"
        )
    return key


def find(conn: Connection, session_pk: int, key: str, request_hash: str) -> str | None:
    """The answer's text stored under ``key`` for this session, if any and not expired.

    Raises:
        IdempotencyKeyReusedError: the key was stored for another request.
    """
    row = conn.execute(
        select(idempotency_keys.c.request_hash, idempotency_keys.c.answer).where(
            idempotency_keys.c.session_pk == session_pk,
            idempotency_keys.c.key == key,
            idempotency_keys.c.created_at > _now() - KEEP,
        )
    ).first()
    if row is None:
        return None
    if row.request_hash != request_hash:
        raise IdempotencyKeyReusedError(key)
    answer: str = row.answer
    return answer


def expire(conn: Connection) -> None:
    """Delete the keys of every session older than :data:`KEEP` (a write storing keys
    does it once, before it stores them)."""
    conn.execute(delete(idempotency_keys).where(idempotency_keys.c.created_at <= _now() - KEEP))


def save(conn: Connection, session_pk: int, pending: Pending, session: Session) -> None:
    """Store a pending key with its answer (made from ``session``, as committed).

    A key already stored for this session (a retry that raced the first request) makes
    the insert fail, and with it the whole transaction: the write is not applied twice.
    """
    conn.execute(
        insert(idempotency_keys).values(
            session_pk=session_pk,
            key=pending.key,
            request_hash=pending.request_hash,
            answer=pending.answer(session),
            created_at=_now(),
        )
    )


def _now() -> datetime:
    return datetime.now(UTC)
