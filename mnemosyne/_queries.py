"""Read queries on an open connection, shared by reads and write transactions."""

from __future__ import annotations

import string
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Row, func, literal, select

from ._schema import ID_LENGTH, nodes, sessions
from .errors import (
    AmbiguousIdError,
    ForeignNodeError,
    InvalidOperationError,
    UnknownNodeError,
    UnknownSessionError,
)
from .models import Node, Session

MIN_PREFIX = 6
#: Far deeper than any story; stops a recursive query if a cycle were ever stored.
MAX_DEPTH = 10_000_000
_HEX = frozenset(string.hexdigits.lower())

NODE_COLUMNS = (
    nodes.c.id,
    nodes.c.session_id,
    nodes.c.parent_id,
    nodes.c.role,
    nodes.c.name,
    nodes.c.content,
    nodes.c.enabled,
    nodes.c.created_at,
    nodes.c.metadata,
    nodes.c.delta,
    nodes.c.active_child_id,
)
SESSION_COLUMNS = (
    sessions.c.id,
    sessions.c.title,
    sessions.c.head_id,
    sessions.c.version,
    sessions.c.created_at,
    sessions.c.updated_at,
    sessions.c.campaign,
    sessions.c.metadata,
)


def utc(value: datetime) -> datetime:
    """SQLite hands back naive datetimes; every time we store is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def node_from_row(row: Row[Any] | Sequence[Any]) -> Node:
    return Node(
        row[0],
        row[1],
        row[2],
        row[3],
        row[4],
        row[5],
        bool(row[6]),
        utc(row[7]),
        row[8] if row[8] is not None else {},
        row[9] if row[9] is not None else [],
        row[10],
    )


def session_from_row(row: Row[Any] | Sequence[Any]) -> Session:
    return Session(
        row[0],
        row[1],
        row[2],
        row[3],
        utc(row[4]),
        utc(row[5]),
        row[6],
        row[7] if row[7] is not None else {},
    )


# --- ids ---------------------------------------------------------------------


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


def _range(column: Any, prefix: str) -> Any:
    # An index-friendly "starts with" for lowercase hex ids ('g' sorts after 'f').
    if len(prefix) == ID_LENGTH:
        return column == prefix
    return (column >= prefix) & (column < prefix + "g")


def resolve_session_id(conn: Connection, ref: str) -> str:
    prefix = _prefix("session", ref)
    found = list(
        conn.execute(select(sessions.c.id).where(_range(sessions.c.id, prefix)).limit(6)).scalars()
    )
    found = [f for f in found if f.startswith(prefix)]
    if not found:
        raise UnknownSessionError(ref)
    if len(found) > 1:
        raise AmbiguousIdError("session", ref, found)
    return found[0]


def resolve_node_id(conn: Connection, session_id: str, ref: str) -> str:
    prefix = _prefix("node", ref)
    query = select(nodes.c.id).where(nodes.c.session_id == session_id, _range(nodes.c.id, prefix))
    found = [f for f in conn.execute(query.limit(6)).scalars() if f.startswith(prefix)]
    if len(found) > 1:
        raise AmbiguousIdError("node", ref, found)
    if found:
        return found[0]
    # Not here: say so precisely if it is a node of another session.
    elsewhere = conn.execute(
        select(nodes.c.id, nodes.c.session_id).where(_range(nodes.c.id, prefix)).limit(2)
    ).all()
    elsewhere = [r for r in elsewhere if r[0].startswith(prefix)]
    if len(elsewhere) == 1:
        raise ForeignNodeError(elsewhere[0][0], elsewhere[0][1], session_id)
    raise UnknownNodeError(ref, session_id)


# --- sessions and nodes ------------------------------------------------------------


def get_session(conn: Connection, session_id: str, *, for_update: bool = False) -> Session:
    query = select(*SESSION_COLUMNS).where(sessions.c.id == session_id)
    if for_update:
        query = query.with_for_update()
    row = conn.execute(query).first()
    if row is None:
        raise UnknownSessionError(session_id)
    return session_from_row(row)


def list_sessions(conn: Connection) -> list[Session]:
    query = select(*SESSION_COLUMNS).order_by(sessions.c.updated_at.desc(), sessions.c.id)
    return [session_from_row(r) for r in conn.execute(query)]


def get_node(conn: Connection, session_id: str, node_id: str) -> Node:
    row = conn.execute(select(*NODE_COLUMNS).where(nodes.c.id == node_id)).first()
    if row is None:
        raise UnknownNodeError(node_id, session_id)
    node = node_from_row(row)
    if node.session_id != session_id:
        raise ForeignNodeError(node_id, node.session_id, session_id)
    return node


def children(conn: Connection, session_id: str, parent_id: str | None) -> list[Node]:
    """Children of ``parent_id`` in order (``None``: the session's roots)."""
    parent = nodes.c.parent_id.is_(None) if parent_id is None else nodes.c.parent_id == parent_id
    query = (
        select(*NODE_COLUMNS).where(nodes.c.session_id == session_id, parent).order_by(nodes.c.seq)
    )
    return [node_from_row(r) for r in conn.execute(query)]


def sibling_ids(conn: Connection, session_id: str, parent_id: str | None) -> list[str]:
    parent = nodes.c.parent_id.is_(None) if parent_id is None else nodes.c.parent_id == parent_id
    query = select(nodes.c.id).where(nodes.c.session_id == session_id, parent).order_by(nodes.c.seq)
    return list(conn.execute(query).scalars())


def sibling_lists(
    conn: Connection, session_id: str, parent_ids: Iterable[str | None]
) -> dict[str | None, list[str]]:
    """For each parent (``None``: the roots), its children's ids in order."""
    wanted = list(dict.fromkeys(parent_ids))
    out: dict[str | None, list[str]] = {p: [] for p in wanted}
    real = [p for p in wanted if p is not None]
    conditions = [nodes.c.parent_id.in_(real[i : i + 500]) for i in range(0, len(real), 500)]
    if None in out:
        conditions.append(nodes.c.parent_id.is_(None))
    for condition in conditions:
        query = (
            select(nodes.c.parent_id, nodes.c.id)
            .where(nodes.c.session_id == session_id, condition)
            .order_by(nodes.c.seq)
        )
        for parent_id, node_id in conn.execute(query):
            out[parent_id].append(node_id)
    return out


def all_nodes(conn: Connection, session_id: str) -> list[Node]:
    """Every node of the session, parents before children, siblings in order."""
    query = select(*NODE_COLUMNS).where(nodes.c.session_id == session_id).order_by(nodes.c.seq)
    rows = [node_from_row(r) for r in conn.execute(query)]
    return preorder(rows)


def preorder(rows: Iterable[Node]) -> list[Node]:
    """Depth-first order (siblings in the given order) of nodes given in sibling order."""
    by_parent: dict[str | None, list[Node]] = {}
    for node in rows:
        by_parent.setdefault(node.parent_id, []).append(node)
    out: list[Node] = []
    stack = list(reversed(by_parent.get(None, [])))
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(reversed(by_parent.get(node.id, [])))
    return out


# --- paths ---------------------------------------------------------------------------


def path_up(
    conn: Connection, session_id: str, node_id: str, *, columns: Sequence[Any]
) -> list[Row[Any]]:
    """The rows of the path from ``node_id`` up to its root, ``node_id`` first.

    One recursive CTE; ``columns`` are the node columns to carry along.
    """
    names = [c.name for c in columns]
    start = select(*columns, literal(0).label("depth")).where(
        nodes.c.id == node_id, nodes.c.session_id == session_id
    )
    path = start.cte("path", recursive=True)
    step = select(*[nodes.c[n] for n in names], (path.c.depth + 1).label("depth")).where(
        nodes.c.id == path.c.parent_id, path.c.depth < MAX_DEPTH
    )
    path = path.union_all(step)
    return list(conn.execute(select(path).order_by(path.c.depth)))


def projection(conn: Connection, session_id: str, node_id: str | None) -> list[Node]:
    """The linear projection root -> ``node_id``, disabled nodes left out."""
    if node_id is None:
        return []
    rows = path_up(conn, session_id, node_id, columns=NODE_COLUMNS)
    return [node_from_row(r) for r in reversed(rows) if r[6]]


def head_projection(conn: Connection, session_id: str) -> tuple[Session, list[Node]]:
    session = get_session(conn, session_id)
    return session, projection(conn, session_id, session.head_id)


def descend(conn: Connection, node_id: str) -> str:
    """Follow the active-child pointers down from ``node_id`` to a leaf; its id."""
    start = select(nodes.c.id, nodes.c.active_child_id, literal(0).label("depth")).where(
        nodes.c.id == node_id
    )
    down = start.cte("down", recursive=True)
    step = select(nodes.c.id, nodes.c.active_child_id, (down.c.depth + 1).label("depth")).where(
        nodes.c.id == down.c.active_child_id,
        nodes.c.parent_id == down.c.id,
        down.c.depth < MAX_DEPTH,
    )
    down = down.union_all(step)
    query = select(down.c.id).order_by(down.c.depth.desc()).limit(1)
    return conn.execute(query).scalar_one()


def count_nodes(conn: Connection, session_id: str) -> int:
    query = select(func.count()).select_from(nodes).where(nodes.c.session_id == session_id)
    return conn.execute(query).scalar_one()
