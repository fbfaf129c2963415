"""What one write transaction on one session holds, in one place.

:class:`~mnemosyne.SessionTransaction` (growth, HEAD, imports, traces) and the
editor (:class:`~mnemosyne.editor.Editor`) are two views of the same transaction:
both work on one :class:`TransactionState`, which the store opens, commits and
reads back. Nothing reaches into the other's attributes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import Connection, bindparam, select, update

from . import _queries as q
from . import _worldstate as ws
from ._schema import nodes, sessions
from .errors import ConflictError, InvalidOperationError
from .models import Session
from .state.schema import StateSchema

__all__ = ["NEAR_HEAD", "TransactionState"]

#: How many of HEAD's nearest ancestors a move of HEAD looks for where its path meets
#: HEAD's (see TransactionState.repoint).
NEAR_HEAD = 16


class _Walked(NamedTuple):
    """A row of the walk up in :meth:`TransactionState.repoint`."""

    depth: int
    pk: int
    parent_pk: int | None
    active_child_pk: int | None
    detached: str | None


@dataclass(eq=False, slots=True)
class TransactionState:
    """One write transaction on one session, as it stands.

    ``head_pk``/``head_id`` are HEAD inside the transaction (written at the commit).
    ``wrote``: whether anything was written (then the commit bumps the version).
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

    def repoint(self, pk: int, node_id: str | None) -> None:
        """Check that node ``pk`` is in the tree (not in a fragment or in the trash;
        ``node_id`` names it in the refusal) and make every node above it point its
        active child along the path to it: what :meth:`point_path_at` does, for the
        moves of HEAD, reading only the part of the path that is not HEAD's.

        Every node above HEAD points along the path to HEAD (the invariant, true
        between operations): where the path to ``pk`` meets the path to HEAD, the rest
        of it above is right already, and it is in the tree. So the walk up from
        ``pk`` stops at HEAD or at one of its nearest ancestors: a turn, a reroll, a
        checkout back a few messages read a few rows, not the whole story. (A node
        whose path meets HEAD's higher up is walked up to its top, as before.)
        """
        head = self.head_pk
        near = (
            q.walk_up(self.conn, head, "n.pk, n.active_child_pk", limit=NEAR_HEAD)
            if head is not None
            else []
        )
        active = {key: child for _, key, child in near}
        if pk in active:
            return
        walked = q.walk_up(
            self.conn, pk, "n.pk, n.parent_pk, n.active_child_pk, n.detached", list(active)
        )
        rows = [_Walked._make(row) for row in walked]  # the top first
        top = rows[0]
        if top.parent_pk is None and top.detached is not None:
            where = "a fragment" if top.detached == "fragment" else "the trash"
            hint = "graft it first" if top.detached == "fragment" else "restore it first"
            raise InvalidOperationError(f"node {node_id or pk} is in {where}: {hint}")
        changes = [
            {"parent": parent.pk, "child": child.pk}
            for parent, child in itertools.pairwise(rows)
            if parent.active_child_pk != child.pk
        ]
        if top.parent_pk is not None and active[top.parent_pk] != top.pk:  # where paths meet
            changes.append({"parent": top.parent_pk, "child": top.pk})
        self.set_active_children(changes)

    def point_path_at(self, pk: int, before_change: Callable[..., None] | None = None) -> None:
        """Make every ancestor of ``pk`` point its active child along the path to it.

        ``before_change`` is called with the pks about to change (the journal keeps
        their rows as they were).
        """
        path = q.path_keys(self.conn, pk)
        changes = [
            {"parent": parent.pk, "child": child.pk}
            for child, parent in itertools.pairwise(path)
            if parent.active_child_pk != child.pk
        ]
        if changes and before_change is not None:
            before_change(*(change["parent"] for change in changes))
        self.set_active_children(changes)

    def set_active_children(self, changes: list[dict[str, int]]) -> None:
        """Set each ``{"parent", "child"}`` pair's active child, in one statement."""
        if changes:
            self.conn.execute(
                update(nodes)
                .where(nodes.c.pk == bindparam("parent"))
                .values(active_child_pk=bindparam("child")),
                changes,
            )

    def commit(self) -> Session:
        """Write HEAD and bump the version once, if anything was written; the session
        as the transaction leaves it (also kept as ``session``)."""
        if not self.wrote:
            return self.session
        now = self.updated_at or datetime.now(UTC)
        version = self.session.version + 1
        result = self.conn.execute(
            update(sessions)
            .where(sessions.c.pk == self.record.pk, sessions.c.version == self.session.version)
            .values(head_pk=self.head_pk, version=version, updated_at=now)
        )
        if result.rowcount != 1:  # the row lock makes this unreachable; belt and braces
            current = q.session_record(self.conn, self.record.id).session
            raise ConflictError(self.record.id, self.session.version, current.version)
        self.session = replace(self.session, head_id=self.head_id, version=version, updated_at=now)
        return self.session
