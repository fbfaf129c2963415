"""Read queries on an open connection, shared by reads and write transactions.

Rows refer to each other by integer ``pk``; what leaves this module speaks public
``id``s only. The hot path (the projection) walks integers in one recursive CTE and
decodes its rows by hand: timestamps with ``datetime.fromisoformat``, JSON columns
with a shortcut for the empty ones.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Connection, Row, Text, select, type_coerce

from . import _dialect as dialect
from . import nodenames
from ._schema import ID_LENGTH, nodes, refs, sessions
from .errors import (
    AmbiguousIdError,
    ForeignNodeError,
    InvalidOperationError,
    UnknownNodeError,
    UnknownSessionError,
)
from .models import Node, Session, parse_utc

#: A row read by its columns' names (``row.pk``), whatever they are.
NamedRow = Row[*tuple[Any, ...]]
T = TypeVar("T")

MIN_PREFIX = nodenames.MIN_PREFIX
#: Far deeper than any story; stops a recursive query if a cycle were ever stored.
MAX_DEPTH = 10_000_000
_HEX = frozenset(string.hexdigits.lower())

# --- decoding ------------------------------------------------------------------------


def timestamp(value: Any) -> datetime:
    """A stored time as an aware UTC datetime (SQLite: ISO text; PostgreSQL: datetime)."""
    if isinstance(value, str):
        return parse_utc(value)
    stored: datetime = value  # PostgreSQL's driver hands a datetime
    return stored if stored.tzinfo is not None else stored.replace(tzinfo=UTC)


def time_text(value: Any) -> str:
    """A stored time as the undo journal keeps it: UTC text with no zone, comparable and
    JSON-ready (SQLite's stored text as it is). :func:`text_time` reads it back."""
    if isinstance(value, str):
        return value
    stamp: datetime = value
    return stamp.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")


def text_time(text: str) -> datetime:
    """A time of :func:`time_text` as an aware UTC datetime, to store again."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def encode_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode_object(text: str | None) -> dict[str, Any]:
    if not text or text == "{}":
        return {}
    decoded: dict[str, Any] = json.loads(text)
    return decoded


def type_coerce_text(column: Any) -> Any:
    """``column`` read as stored (times as text on SQLite), under its own name."""
    return type_coerce(column, Text).label(column.name)


# The columns a Node is made of, in the order node_from_row reads them.
NODE_COLUMNS = (
    nodes.c.pk,
    nodes.c.id,
    nodes.c.parent_pk,
    nodes.c.active_child_pk,
    nodes.c.role,
    nodes.c.name,
    nodes.c.content,
    nodes.c.enabled,
    type_coerce(nodes.c.created_at, Text).label("created_at"),
    nodes.c.metadata,
    nodes.c.delta,
)


def node_from_row(row: Sequence[Any], session_id: str, ids: dict[int, str]) -> Node:
    """A Node from NODE_COLUMNS (columns after them ignored); ``ids`` maps the pks it
    refers to onto public ids."""
    _, node_id, parent_pk, child_pk, role, name, content, enabled, created_at, meta, delta = row[
        :11
    ]
    return Node(
        node_id,
        session_id,
        None if parent_pk is None else ids[parent_pk],
        role,
        name,
        content,
        bool(enabled),
        created_at,  # decoded on first use (see Node)
        meta,
        delta,
        None if child_pk is None else ids[child_pk],
    )


def node_keys(row: Sequence[Any]) -> tuple[int, str, int | None, int | None]:
    """The keys of a row of NODE_COLUMNS: ``(pk, id, parent_pk, active_child_pk)``."""
    pk, node_id, parent_pk, child_pk = row[:4]
    return pk, node_id, parent_pk, child_pk


def nodes_from_rows(
    conn: Connection, rows: Sequence[Sequence[Any]], session_id: str, ids: dict[int, str]
) -> list[Node]:
    """Nodes from rows, looking up the public ids of pks neither given nor in ``rows``."""
    keys = [node_keys(row) for row in rows]
    for pk, node_id, _, _ in keys:
        ids[pk] = node_id
    missing = {
        ref
        for _, _, parent_pk, child_pk in keys
        for ref in (parent_pk, child_pk)
        if ref is not None and ref not in ids
    }
    if missing:
        ids.update(public_ids(conn, missing))
    return [node_from_row(row, session_id, ids) for row in rows]


def public_ids(conn: Connection, pks: Iterable[int]) -> dict[int, str]:
    wanted = list(pks)
    out: dict[int, str] = {}
    for i in range(0, len(wanted), 500):
        query = select(nodes.c.pk, nodes.c.id).where(nodes.c.pk.in_(wanted[i : i + 500]))
        out.update((pk, node_id) for pk, node_id in conn.execute(query))
    return out


# --- sessions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as stored: its keys and the public view."""

    pk: int
    head_pk: int | None
    session: Session
    schema_json: str | None = None

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def memory_key(self) -> tuple[int, str]:
        """The session's key in a process's memory (paths, tree orders): its pk and id
        (SQLite may give a purged session's pk to the next one)."""
        return self.pk, self.session.id


_head = nodes.alias("head")
SESSION_COLUMNS = (
    sessions.c.pk,
    sessions.c.head_pk,
    sessions.c.id,
    sessions.c.title,
    _head.c.id.label("head_id"),
    sessions.c.version,
    type_coerce(sessions.c.created_at, Text).label("created_at"),
    type_coerce(sessions.c.updated_at, Text).label("updated_at"),
    sessions.c.campaign,
    sessions.c.metadata,
    sessions.c.state_schema,
    type_coerce(sessions.c.trashed_at, Text).label("trashed_at"),
)
_SESSIONS = sessions.outerjoin(_head, _head.c.pk == sessions.c.head_pk)


def record_from_row(row: NamedRow) -> SessionRecord:
    """A SessionRecord from a row of SESSION_COLUMNS."""
    session = Session(
        row.id,
        row.title,
        row.head_id,
        row.version,
        timestamp(row.created_at),
        timestamp(row.updated_at),
        row.campaign,
        decode_object(row.metadata),
        timestamp(row.trashed_at) if row.trashed_at is not None else None,
    )
    return SessionRecord(row.pk, row.head_pk, session, row.state_schema)


def _prefix(kind: str, ref: str) -> str:
    value = ref.strip().lower()
    if not value or not set(value) <= _HEX or len(value) > ID_LENGTH:
        raise InvalidOperationError(
            f"{ref!r} is not a {kind} id: give the id or a prefix of at least "
            f"{MIN_PREFIX} hex characters"
        )
    if len(value) < MIN_PREFIX:
        raise InvalidOperationError(
            f"{kind} id prefix {ref!r} is too short: give at least {MIN_PREFIX} characters"
        )
    return value


def _starts_with(column: Any, prefix: str) -> Any:
    # An index-friendly "starts with" for lowercase hex ids ('g' sorts after 'f').
    if len(prefix) == ID_LENGTH:
        return column == prefix
    return (column >= prefix) & (column < prefix + "g")


def session_record(conn: Connection, ref: str, *, for_update: bool = False) -> SessionRecord:
    """A session by id or unique prefix; ``for_update`` locks its row (PostgreSQL)."""
    prefix = _prefix("session", ref)
    query = select(*SESSION_COLUMNS).select_from(_SESSIONS)
    query = query.where(_starts_with(sessions.c.id, prefix)).limit(6)
    if for_update:
        query = query.with_for_update(of=sessions)
    found = [row for row in conn.execute(query) if row.id.startswith(prefix)]
    if not found:
        raise UnknownSessionError(ref)
    if len(found) > 1:
        raise AmbiguousIdError("session", ref, [row.id for row in found])
    return record_from_row(found[0])


def session_records(conn: Connection, pks: Collection[int]) -> dict[int, SessionRecord]:
    """Sessions by pk, in one query (a pk with no session is left out)."""
    if not pks:
        return {}
    query = select(*SESSION_COLUMNS).select_from(_SESSIONS).where(sessions.c.pk.in_(pks))
    return {row.pk: record_from_row(row) for row in conn.execute(query)}


def in_trash(trashed: bool) -> Any:
    """The sessions in the trash (``trashed``) or out of it."""
    return sessions.c.trashed_at.is_not(None) if trashed else sessions.c.trashed_at.is_(None)


def sessions_query(trashed: bool) -> Any:
    """The sessions (in the trash or out of it) as records' rows, most recently changed
    first, ties newest first."""
    return (
        select(*SESSION_COLUMNS)
        .select_from(_SESSIONS)
        .where(in_trash(trashed))
        .order_by(sessions.c.updated_at.desc(), sessions.c.pk.desc())
    )


def list_sessions(conn: Connection, *, trashed: bool = False) -> list[Session]:
    return [record_from_row(row).session for row in conn.execute(sessions_query(trashed))]


# --- nodes ------------------------------------------------------------------------------


def resolve_node(
    conn: Connection,
    record: SessionRecord,
    ref: str,
    head: tuple[int | None, str | None] | None = None,
) -> tuple[int, str]:
    """The (pk, id) of a node of the session by its name (:mod:`mnemosyne.nodenames`):
    an id or unique prefix, ``HEAD`` or ``@``, a tag or branch (``first-meeting``),
    each with steps up (``HEAD~2``, ``1a2b3c^``, ``first-meeting~1``). HEAD is ``head``
    (its pk and id: a transaction's, which may have moved it), by default the record's.

    Raises:
        InvalidOperationError (no node name), UnknownNodeError (none such, or the path
        is shorter than the steps), AmbiguousIdError, ForeignNodeError (it is another
        session's).
    """
    name = nodenames.parse(ref)
    if name.ref is not None:
        pk, node_id = _node_by_ref(conn, record, name.ref, name.text)
    elif name.prefix is None:
        head_pk, head_id = head or (record.head_pk, record.session.head_id)
        if head_pk is None or head_id is None:
            raise UnknownNodeError(
                name.text, record.id, why=f"session {record.id} is empty: it has no HEAD yet"
            )
        pk, node_id = head_pk, head_id
    else:
        pk, node_id = _node_by_prefix(conn, record, name.prefix, name.text)
    if name.up == 0:
        return pk, node_id
    rows = walk_up(conn, pk, "n.pk, n.id, n.detached", limit=min(name.up, MAX_DEPTH))
    depth, top_pk, top_id, detached = rows[0]  # root first
    if depth < name.up:
        start = f"node {node_id}" if name.prefix or name.ref else "HEAD"
        top = "the root" if detached is None else "the top of its fragment"
        raise UnknownNodeError(
            name.text,
            record.id,
            why=f"the path from {top} to {start} has {depth + 1} nodes "
            f"({name.start}~{depth} is {top_id[:8]})",
        )
    return top_pk, top_id


def _node_by_ref(conn: Connection, record: SessionRecord, name: str, ref: str) -> tuple[int, str]:
    """The node a tag or branch of the session names (:mod:`mnemosyne.refs`)."""
    row = conn.execute(
        select(nodes.c.pk, nodes.c.id)
        .join(refs, refs.c.node_pk == nodes.c.pk)
        .where(refs.c.session_pk == record.pk, refs.c.name == name)
    ).first()
    if row is None:
        raise UnknownNodeError(
            ref, record.id, why=f"session {record.id} has no tag or branch named {name!r}"
        )
    return row.pk, row.id


def _node_by_prefix(
    conn: Connection, record: SessionRecord, prefix: str, ref: str
) -> tuple[int, str]:
    query = select(nodes.c.pk, nodes.c.id, nodes.c.session_pk).where(
        _starts_with(nodes.c.id, prefix)
    )
    found = [row for row in conn.execute(query.limit(50)) if row.id.startswith(prefix)]
    mine = [row for row in found if row.session_pk == record.pk]
    if len(mine) > 1:
        raise AmbiguousIdError("node", ref, [row.id for row in mine])
    if mine:
        return mine[0].pk, mine[0].id
    if len(found) == 1:
        other = found[0]
        owner = conn.execute(
            select(sessions.c.id).where(sessions.c.pk == other.session_pk)
        ).scalar()
        raise ForeignNodeError(other.id, owner or "?", record.id)
    raise UnknownNodeError(ref, record.id)


def get_node(conn: Connection, record: SessionRecord, pk: int) -> Node:
    row = conn.execute(
        select(*NODE_COLUMNS).where(nodes.c.pk == pk, nodes.c.session_pk == record.pk)
    ).one()
    return nodes_from_rows(conn, [row], record.id, {})[0]


def children(conn: Connection, record: SessionRecord, parent_pk: int | None) -> list[Node]:
    """Children of ``parent_pk`` in order (``None``: the session's roots)."""
    rows = conn.execute(
        select(*NODE_COLUMNS)
        .where(nodes.c.session_pk == record.pk, _is(nodes.c.parent_pk, parent_pk))
        .order_by(nodes.c.pk)
    ).all()
    return nodes_from_rows(conn, rows, record.id, {})


def sibling_keys(conn: Connection, record: SessionRecord, parent_pk: int | None) -> list[int]:
    query = (
        select(nodes.c.pk)
        .where(nodes.c.session_pk == record.pk, _is(nodes.c.parent_pk, parent_pk))
        .order_by(nodes.c.pk)
    )
    return list(conn.execute(query).scalars())


def parent_key(conn: Connection, pk: int) -> int | None:
    parent: int | None = conn.execute(
        select(nodes.c.parent_pk).where(nodes.c.pk == pk)
    ).scalar_one()
    return parent


def sibling_lists(
    conn: Connection, record: SessionRecord, parent_pks: Iterable[int | None]
) -> dict[int | None, list[int]]:
    """For each parent (``None``: the roots), its children's pks in order.

    Sorted here, not by the query: with ``ORDER BY pk`` SQLite walks the session's
    whole (session, pk) index instead of looking each parent up in the children's."""
    wanted = list(dict.fromkeys(parent_pks))
    out: dict[int | None, list[int]] = {p: [] for p in wanted}
    real = [p for p in wanted if p is not None]
    conditions = [nodes.c.parent_pk.in_(real[i : i + 500]) for i in range(0, len(real), 500)]
    if None in out:
        conditions.append(_is(nodes.c.parent_pk, None))
    for condition in conditions:
        query = select(nodes.c.parent_pk, nodes.c.pk).where(
            nodes.c.session_pk == record.pk, condition
        )
        for parent_pk, pk in conn.execute(query):
            out[parent_pk].append(pk)
    for keys in out.values():
        keys.sort()
    return out


def _placed_nodes(conn: Connection, record: SessionRecord) -> list[tuple[Node, Any]]:
    """Every node of the session with its ``detached`` mark, in sibling order."""
    rows = conn.execute(
        select(*NODE_COLUMNS, nodes.c.detached)
        .where(nodes.c.session_pk == record.pk)
        .order_by(nodes.c.pk)
    ).all()
    made = nodes_from_rows(conn, rows, record.id, {})
    return [(node, row.detached) for node, row in zip(made, rows, strict=True)]


def all_nodes(conn: Connection, record: SessionRecord) -> list[Node]:
    """Every node of the session's tree (not fragments or trash), parents before
    children, siblings in order."""
    placed = _placed_nodes(conn, record)
    tops = [node for node, mark in placed if node.parent_id is None and mark is None]
    return preorder([node for node, _ in placed], tops)


def detached_subtrees(conn: Connection, record: SessionRecord, kind: str) -> list[list[Node]]:
    """The fragments (or the trash) of a session: each a list of nodes, top first."""
    placed = _placed_nodes(conn, record)
    every = [node for node, _ in placed]
    return [preorder(every, [node]) for node, mark in placed if mark == kind]


def depth_first(roots: Iterable[T], below: Callable[[T], Sequence[T]]) -> list[T]:
    """``roots`` and what is ``below`` each, parents before children, depth first,
    siblings in the order given."""
    out: list[T] = []
    stack = list(reversed(list(roots)))
    while stack:
        item = stack.pop()
        out.append(item)
        stack.extend(reversed(below(item)))
    return out


def preorder(rows: Iterable[Node], roots: Sequence[Node] | None = None) -> list[Node]:
    """Depth-first order (siblings in the given order) of nodes given in sibling order,
    from ``roots`` (default: the nodes without a parent)."""
    by_parent: dict[str | None, list[Node]] = {}
    for node in rows:
        by_parent.setdefault(node.parent_id, []).append(node)
    start = roots if roots is not None else by_parent.get(None, [])
    return depth_first(start, lambda node: by_parent.get(node.id, []))


def node_rows(conn: Connection, record: SessionRecord, pks: Sequence[int]) -> list[NamedRow]:
    """The rows (:data:`NODE_COLUMNS`) of the session's nodes ``pks``, in that order."""
    found: dict[int, NamedRow] = {}
    for i in range(0, len(pks), 500):
        query = select(*NODE_COLUMNS).where(
            nodes.c.session_pk == record.pk, nodes.c.pk.in_(pks[i : i + 500])
        )
        found.update((row.pk, row) for row in conn.execute(query))
    return [found[pk] for pk in pks]


def _is(column: Any, value: int | None) -> Any:
    """``column`` is ``value``; for ``None``, the session's roots (not detached tops)."""
    if value is None:
        return column.is_(None) & nodes.c.detached.is_(None)
    return column == value


# --- paths ---------------------------------------------------------------------------------


_WALK_UP = """WITH RECURSIVE path(pk, parent_pk, depth) AS (
    SELECT pk, parent_pk, 0 FROM nodes WHERE pk = {param}
    UNION ALL
    SELECT n.pk, n.parent_pk, path.depth + 1 FROM nodes n JOIN path ON n.pk = path.parent_pk
    WHERE path.depth < {limit}{stop}
)
SELECT path.depth, {columns} FROM path JOIN nodes n ON n.pk = path.pk"""


@lru_cache(maxsize=64)
def _walk_up_sql(param: str, columns: str, stops: int = 0, limit: int = MAX_DEPTH) -> str:
    stop = f" AND n.pk NOT IN ({', '.join([param] * stops)})" if stops else ""
    return _WALK_UP.format(param=param, limit=int(limit), stop=stop, columns=columns)


def walk_up(
    conn: Connection,
    pk: int,
    columns: str,
    stops: Sequence[int] = (),
    *,
    limit: int = MAX_DEPTH,
) -> list[tuple[Any, ...]]:
    """Rows of ``columns`` for the path from ``pk`` up to its root, root first; each
    row starts with its depth (0: ``pk``).

    With ``stops``, the walk ends below the first of them it meets (the top row's
    parent is then that stop): the path above it is known already. With ``limit``,
    it ends ``limit`` levels above ``pk`` at the most.

    The projection is the hot path of everything (each turn, each log, each page),
    so it is one recursive CTE over integer keys, run on the driver's cursor inside
    the connection's transaction: SQLAlchemy's row objects would cost more than the
    query itself.
    """
    sql = _walk_up_sql(dialect.param(conn), columns, len(stops), limit)
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, (pk, *stops))
        # the driver's list, typed Sequence by SQLAlchemy's DBAPI protocol: sorted()
        # copies the references only
        return sorted(cursor.fetchall(), key=_depth, reverse=True)
    finally:
        cursor.close()


def _depth(row: Sequence[Any]) -> int:
    depth: int = row[0]  # every walk's first column
    return depth


class PathKeys(NamedTuple):
    """A node's keys on a walked path."""

    pk: int
    parent_pk: int | None
    active_child_pk: int | None


def path_keys(conn: Connection, pk: int) -> list[PathKeys]:
    """The keys along the path from ``pk`` up, ``pk`` first."""
    rows = walk_up(conn, pk, "n.pk, n.parent_pk, n.active_child_pk")
    return [PathKeys(key, parent, child) for _, key, parent, child in reversed(rows)]


_TOP = """WITH RECURSIVE up(pk, parent_pk, depth) AS (
    SELECT pk, parent_pk, 0 FROM nodes WHERE pk = {param}
    UNION ALL
    SELECT n.pk, n.parent_pk, up.depth + 1 FROM nodes n JOIN up ON n.pk = up.parent_pk
    WHERE up.depth < {limit}
)
SELECT up.depth, n.detached FROM up JOIN nodes n ON n.pk = up.pk WHERE up.parent_pk IS NULL"""


def placement(conn: Connection, pk: int) -> tuple[int, str | None] | None:
    """Where a node is, in one walk up: its depth below the top of its subtree, and
    how that top is detached (``None``: it is a root of the tree). ``None`` if there
    is no such node."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(_TOP.format(param=dialect.param(conn), limit=MAX_DEPTH), (pk,))
        row = cursor.fetchone()
    finally:
        cursor.close()
    if row is None:
        return None
    depth, detached = row
    return depth, detached


def top_detached(conn: Connection, pk: int) -> str | None:
    """How the top of ``pk``'s subtree is detached (``None``: it is a root of the tree)."""
    place = placement(conn, pk)
    if place is None:
        return None
    _, detached = place
    return detached
