"""What one write transaction on one session holds, in one place.

:class:`~mnemosyne.SessionTransaction` (growth, HEAD, imports, traces) and the
editor (:class:`~mnemosyne.editor.Editor`) are two views of the same transaction:
both work on one :class:`TransactionState`, which the store opens, commits and
reads back. Nothing reaches into the other's attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select, update

from . import _queries as q
from . import _worldstate as ws
from . import events
from ._schema import nodes, sessions
from .errors import ConflictError
from .models import Session
from .state.schema import StateSchema

__all__ = ["TransactionState"]


@dataclass(eq=False, slots=True)
class TransactionState:
    """One write transaction on one session, as it stands.

    ``head_pk``/``head_id`` are HEAD inside the transaction (written at the commit).
    ``wrote``: whether anything was written (then the commit bumps the version).
    ``event``: what the writes noted for the session's event, appended at the commit.
    ``kept_paths``: whether every write kept the paths above existing nodes as they
    were (then the store's in-memory paths stay valid: see :mod:`mnemosyne._paths`).
    A write calls :meth:`changed` (it may have changed paths: the editor's operations)
    or :meth:`grew` (known not to: new nodes, HEAD and active-child pointers, traces,
    documents, keyframes).
    """

    conn: Connection
    record: q.SessionRecord
    schema: StateSchema
    every: int
    head_pk: int | None
    head_id: str | None
    session: Session
    """The session as read at the start; after :meth:`commit`, as it was left."""
    wrote: bool = False
    kept_paths: bool = True
    updated_at: datetime | None = None
    """A time to commit as ``updated_at`` instead of now (an import keeps its own)."""
    metadata: dict[str, Any] | None = None
    """The session's metadata to commit in place of what it has (``None``: unchanged)."""
    event: events.PendingEvent = field(default_factory=events.PendingEvent)
    """What the write noted for its event (:mod:`mnemosyne.events`), stored at the commit."""
    has_branches: bool | None = None
    """Whether the session has a branch (``None``: not read yet, or names changed since):
    read once by the first node added, so that a session without branches pays no
    lookup per node (see :meth:`mnemosyne.editor.Editor.grown`)."""

    @classmethod
    def open(cls, conn: Connection, record: q.SessionRecord, every: int) -> TransactionState:
        """The state of a transaction that has just read (and locked) ``record``."""
        return cls(
            conn=conn,
            record=record,
            schema=ws.parse_schema(record.schema_json),
            every=every,
            head_pk=record.head_pk,
            head_id=record.session.head_id,
            session=record.session,
        )

    def changed(self) -> None:
        """Mark a write that may have changed the paths above existing nodes."""
        self.wrote = True
        self.kept_paths = False

    def grew(self) -> None:
        """Mark a write that changed no existing path."""
        self.wrote = True

    def set_head(self, pk: int | None, node_id: str | None = None) -> None:
        """HEAD to node ``pk`` (its id read unless given; ``None``: no HEAD)."""
        if pk is not None and node_id is None:
            node_id = self.conn.execute(select(nodes.c.id).where(nodes.c.pk == pk)).scalar_one()
        self.head_pk, self.head_id = pk, node_id if pk is not None else None

    def commit(self) -> Session:
        """Write HEAD and bump the version once, if anything was written; the session
        as the transaction leaves it (also kept as ``session``)."""
        if not self.wrote:
            return self.session
        now = self.updated_at or datetime.now(UTC)
        version = self.session.version + 1
        values: dict[str, Any] = {"head_pk": self.head_pk, "version": version, "updated_at": now}
        if self.metadata is not None:
            values["metadata"] = q.encode_json(self.metadata)
        result = self.conn.execute(
            update(sessions)
            .where(sessions.c.pk == self.record.pk, sessions.c.version == self.session.version)
            .values(**values)
        )
        if result.rowcount != 1:  # the row lock makes this unreachable; belt and braces
            current = q.session_record(self.conn, self.record.id).session
            raise ConflictError(self.record.id, self.session.version, current.version)
        self.session = replace(
            self.session,
            head_id=self.head_id,
            version=version,
            updated_at=now,
            metadata=self.session.metadata if self.metadata is None else self.metadata,
        )
        if self.metadata is not None:
            self.event.note("session")
        events.record(
            self.conn,
            self.record.pk,
            self.record.id,
            version,
            datetime.now(UTC),
            self.event,
            head_id=self.head_id,
            head_moved=self.head_id != self.record.session.head_id,
        )
        return self.session
