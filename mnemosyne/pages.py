"""Lists read a page at a time, by cursor: the sessions, a session's tree, its undo
journal.

Each page names where the next one starts (``after``: a cursor the next read passes
back), so a client reads a long list in windows whose cost is the window's rows, and
pages concatenated are the whole list as long as nothing changed in between (a write
bumps the session's version: a client compares it to know). A cursor that no longer
names a place in the list (its node pruned, deleted or purged; its journal entry gone)
is refused with :class:`~mnemosyne.errors.StaleCursorError`: read again from the start.

(The projection pages backwards from HEAD: :meth:`mnemosyne.Store.projection_page`.)
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Generic, TypeVar

from sqlalchemy import Connection, and_, func, or_, select

from . import _queries as q
from ._checks import check_limit
from ._schema import nodes, sessions
from .editor import JournalEntry
from .editor import history as journal_history
from .errors import InvalidOperationError, StaleCursorError, UnknownNodeError
from .models import Node, Session

__all__ = ["Page", "TreeOrders", "history_page", "sessions_page", "tree_page"]

T = TypeVar("T")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SESSION_CURSOR = re.compile(r"([0-9]{1,18})-([0-9]{1,18})")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list."""

    items: list[T]
    """The page's items, in the list's order."""
    total: int
    """How many items the whole list has."""
    after: str | None
    """The cursor of the next page (pass it as ``after``); ``None``: this is the last."""
    session: Session | None = None
    """The session the list is of (``None`` for the list of sessions)."""


# -- sessions ---------------------------------------------------------------------------


def _session_cursor(session: Session, pk: int) -> str:
    """The cursor just after ``session`` in the list: its change time (microseconds
    since 1970) and its key, so it holds whatever happens to the session since."""
    micros = (session.updated_at - _EPOCH) // timedelta(microseconds=1)
    return f"{micros}-{pk}"


def _decode_session_cursor(cursor: str) -> tuple[datetime, int]:
    found = _SESSION_CURSOR.fullmatch(cursor)
    try:
        if found is None:
            raise ValueError(cursor)
        return _EPOCH + timedelta(microseconds=int(found[1])), int(found[2])
    except (ValueError, OverflowError):
        raise InvalidOperationError(
            f"{cursor!r} is not a cursor of the sessions list: pass back the `after` "
            "(or follow the `next`) of the page before"
        ) from None


def sessions_page(
    conn: Connection, *, trashed: bool = False, limit: int = 50, after: str | None = None
) -> Page[Session]:
    """The sessions (``trashed``: those in the trash) most recently changed first, ties
    by creation (newest first), ``limit`` of them after the cursor ``after``.

    A session changed while a client pages moves to the top: the pages after it do
    not show it again (the first page does).
    """
    check_limit(limit)
    query = q.sessions_query(trashed)
    if after is not None:
        at, pk = _decode_session_cursor(after)
        query = query.where(
            or_(
                sessions.c.updated_at < at,
                and_(sessions.c.updated_at == at, sessions.c.pk < pk),
            )
        )
    records = [q.record_from_row(row) for row in conn.execute(query.limit(limit + 1))]
    total = conn.execute(
        select(func.count()).select_from(sessions).where(q.in_trash(trashed))
    ).scalar_one()
    more = len(records) > limit
    records = records[:limit]
    following = _session_cursor(records[-1].session, records[-1].pk) if more else None
    return Page([r.session for r in records], total, following)


# -- the tree -------------------------------------------------------------------------------


def _tree_order(conn: Connection, record: q.SessionRecord) -> list[int]:
    """The keys of the session's tree (fragments and trash left out) in the tree's
    order: parents before children, depth first, siblings in creation order. Reads
    two integers a node, from the children index, not the nodes."""
    children: dict[int | None, list[int]] = {}
    edges = conn.execute(
        select(nodes.c.parent_pk, nodes.c.pk)
        .where(nodes.c.session_pk == record.pk, nodes.c.parent_pk.is_not(None))
        .order_by(nodes.c.parent_pk, nodes.c.pk)
    )
    for parent_pk, pk in edges:
        children.setdefault(parent_pk, []).append(pk)
    roots = conn.execute(
        select(nodes.c.pk)
        .where(
            nodes.c.session_pk == record.pk,
            nodes.c.parent_pk.is_(None),
            nodes.c.detached.is_(None),
        )
        .order_by(nodes.c.pk)
    ).scalars()
    return q.depth_first(roots, lambda pk: children.get(pk, []))


class TreeOrders:
    """The tree orders of the last ``sessions`` sessions read, each as it stood at one
    version (any write bumps it: an order kept is the tree's exactly), so that a client
    reading a tree's pages one after another reads its keys once. Thread-safe."""

    def __init__(self, sessions: int = 8) -> None:
        self.max_sessions = sessions
        self._kept: OrderedDict[tuple[int, str], tuple[int, list[int]]] = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0
        """Orders read from the database (for tests and benchmarks)."""

    def order(self, conn: Connection, record: q.SessionRecord) -> list[int]:
        """The tree order of ``record``'s session at its version (read in ``conn``, the
        transaction ``record`` was read in, when it is not kept)."""
        # Keyed by id too: SQLite may give a purged session's key to a new one.
        key, version = record.memory_key, record.session.version
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and kept[0] == version:
                self._kept.move_to_end(key)
                return kept[1]
        order = _tree_order(conn, record)
        with self._lock:
            self.misses += 1
            self._kept[key] = (version, order)
            self._kept.move_to_end(key)
            while len(self._kept) > self.max_sessions:
                self._kept.popitem(last=False)
        return order


def tree_page(
    conn: Connection,
    record: q.SessionRecord,
    *,
    limit: int = 500,
    after: str | None = None,
    orders: TreeOrders | None = None,
) -> Page[Node]:
    """``limit`` nodes of the session's tree in its order (parents before children,
    depth first, siblings in order; fragments and trash are listed apart), after node
    ``after``. ``orders``: where the tree's order is kept between pages.

    Raises:
        StaleCursorError: ``after`` is not in the tree (pruned, deleted or purged since).
    """
    check_limit(limit)
    order = _tree_order(conn, record) if orders is None else orders.order(conn, record)
    start = 0
    if after is not None:
        try:
            pk, node_id = q.resolve_node(conn, record, after)
        except UnknownNodeError as error:
            raise StaleCursorError(
                f"no node {after} in session {record.id}: the tree changed since that "
                "page (or the cursor is not one); read it again from the start"
            ) from error
        try:
            start = order.index(pk) + 1
        except ValueError:
            raise StaleCursorError(
                f"node {node_id} is no longer in the tree (it was pruned or deleted since "
                "that page): read the tree again from the start"
            ) from None
    keys = order[start : start + limit]
    made = q.nodes_from_rows(conn, q.node_rows(conn, record, keys), record.id, {})
    more = start + limit < len(order)
    return Page(made, len(order), made[-1].id if more else None, record.session)


# -- the journal ------------------------------------------------------------------------------


def history_page(
    conn: Connection, record: q.SessionRecord, *, limit: int = 50, after: str | None = None
) -> Page[JournalEntry]:
    """``limit`` entries of the undo journal, oldest first, after the one at position
    ``after`` (a cursor: the position as text). The journal
    keeps a bounded number of entries (:data:`mnemosyne.editor.MAX_ENTRIES`), so it is
    read whole and sliced.

    Raises:
        StaleCursorError: no entry at ``after`` (the journal was cleared or trimmed).
    """
    check_limit(limit)
    entries = journal_history(conn, record.pk)
    start = 0
    if after is not None:
        if not (after.isascii() and after.isdigit() and len(after) <= 18):
            raise InvalidOperationError(
                f"{after!r} is not a cursor of the journal: pass back the `after` (or "
                "follow the `next`) of the page before"
            )
        positions = [entry.position for entry in entries]
        if int(after) not in positions:
            raise StaleCursorError(
                f"the journal of session {record.id} has no entry {after} any more (a turn "
                "or a purge cleared it, or old entries were dropped): read it again from "
                "the start"
            )
        start = positions.index(int(after)) + 1
    window = entries[start : start + limit]
    more = start + limit < len(entries)
    return Page(window, len(entries), str(window[-1].position) if more else None, record.session)
