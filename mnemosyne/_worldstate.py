"""World state in the database: computing the state at a node, keyframes.

The state *after* a node is its parent's state with its delta applied (a disabled
node's delta is skipped). Keyframes cache whole states: one at every root, and one
wherever the nearest keyframe above is ``every`` levels up, so a state is a
keyframe plus fewer than ``every`` deltas. They are only a cache: a read walks up to
the nearest keyframe there is (or to the root), so deleting keyframes loses nothing;
writes put missing ones back on their way.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, delete, insert, literal, select

from . import _dialect as dialect
from ._queries import MAX_DEPTH, NamedRow, walk_up
from ._schema import keyframes, nodes
from .state.delta import State, apply_delta, touches, value_at
from .state.schema import StateSchema, schema_from_json

DEFAULT_KEYFRAME_EVERY = 16
#: Built-ins added after keyframes were first written, with the value an older
#: keyframe means: lore_timers (revision 0005), the author's note, who is present.
_LATER_BUILT_INS: dict[str, Any] = {"lore_timers": {}, "author_note": None, "present": None}

_WALK_TO_KEYFRAME = """WITH RECURSIVE up(pk, parent_pk, depth, stop) AS (
    SELECT n.pk, n.parent_pk, 0, EXISTS (SELECT 1 FROM keyframes k WHERE k.node_pk = n.pk)
    FROM nodes n WHERE n.pk = {param}
    UNION ALL
    SELECT n.pk, n.parent_pk, up.depth + 1,
           EXISTS (SELECT 1 FROM keyframes k WHERE k.node_pk = n.pk)
    FROM nodes n JOIN up ON n.pk = up.parent_pk
    WHERE NOT up.stop AND up.depth < {limit}
)
SELECT up.depth, n.id, n.enabled, n.delta, k.state
FROM up JOIN nodes n ON n.pk = up.pk LEFT JOIN keyframes k ON k.node_pk = up.pk"""


@lru_cache(maxsize=4)
def _walk_sql(param: str) -> str:
    return _WALK_TO_KEYFRAME.format(param=param, limit=MAX_DEPTH)


@lru_cache(maxsize=64)
def parse_schema(text: str | None) -> StateSchema:
    """A session's stored schema, parsed once per process."""
    return schema_from_json(text)


def encode_state(state: State) -> str:
    return json.dumps(state, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Reached:
    """The state after a node, and how many deltas past a keyframe it took."""

    state: State
    distance: int | None  # None: no keyframe above, replayed from the root


def state_after(conn: Connection, schema: StateSchema, pk: int) -> Reached:
    """The state after node ``pk``: the nearest keyframe above plus the deltas below it."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(_walk_sql(dialect.param(conn)), (pk,))
        # sorted(): SQLAlchemy's DBAPI protocol types the driver's list as a Sequence
        rows = sorted(cursor.fetchall(), key=lambda row: row[0], reverse=True)  # by depth
    finally:
        cursor.close()
    _, _, _, _, keyframe = rows[0]  # the top: a keyframe's node, or a root
    if keyframe is not None:
        state, below, distance = json.loads(keyframe), rows[1:], len(rows) - 1
        for name, default in _LATER_BUILT_INS.items():  # keyframes written before them
            state.setdefault(name, copy.copy(default))  # never the shared {} itself
    else:
        state, below, distance = schema.initial_state(), rows, None
    for _, node_id, enabled, delta, _ in below:
        if enabled and delta:
            state = apply_delta(schema, state, json.loads(delta), node_id=node_id)
    return Reached(state, distance)


def keyframe_due(parent: Reached | None, every: int) -> bool:
    """Whether a new child of a node reached as ``parent`` gets a keyframe."""
    return parent is None or parent.distance is None or parent.distance + 1 >= every


def put_keyframe(conn: Connection, pk: int, state: State) -> None:
    conn.execute(insert(keyframes).values(node_pk=pk, state=encode_state(state)))


def replace_keyframe(conn: Connection, pk: int, state: State) -> None:
    conn.execute(delete(keyframes).where(keyframes.c.node_pk == pk))
    put_keyframe(conn, pk, state)


def state_in_place(conn: Connection, schema: StateSchema, pk: int) -> State:
    """The state after ``pk`` computed from its parent (not from a keyframe of its own,
    which may describe where it hung before), its delta checked."""
    parent_pk, node_id, enabled, delta = conn.execute(
        select(nodes.c.parent_pk, nodes.c.id, nodes.c.enabled, nodes.c.delta).where(
            nodes.c.pk == pk
        )
    ).one()
    base = state_after(conn, schema, parent_pk).state if parent_pk is not None else None
    if base is None:
        base = schema.initial_state()
    operations = json.loads(delta) if enabled and delta else None
    return apply_delta(schema, base, operations, node_id=node_id)


def settle(
    conn: Connection, schema: StateSchema, pk: int, every: int, before: State | None
) -> None:
    """After an edit that may have changed the state after ``pk`` (its base, or its
    own delta): if that state is what it was (``before``), every state below is too,
    and only ``pk``'s keyframe is refreshed; otherwise the subtree is rebuilt, every
    delta checked on its new base.

    Raises:
        InvalidDeltaError: a delta no longer applies (the node is named).
    """
    after = state_in_place(conn, schema, pk)
    if before is not None and after == before:
        replace_keyframe(conn, pk, after)
        return
    rebuild_below(conn, schema, pk, every)


def subtree_rows(conn: Connection, pk: int, *columns: Any) -> list[NamedRow]:
    """``columns`` of ``pk`` and of everything below it (rows read by the columns'
    names), parents before children: one recursive CTE down the tree, joined once to
    the columns."""
    start = select(nodes.c.pk, literal(0).label("depth")).where(nodes.c.pk == pk)
    down = start.cte("down", recursive=True)
    step = select(nodes.c.pk, (down.c.depth + 1).label("depth")).where(
        nodes.c.parent_pk == down.c.pk, down.c.depth < MAX_DEPTH
    )
    down = down.union_all(step)
    query = select(*columns, down.c.depth.label("down_depth"), down.c.pk.label("down_pk"))
    query = query.join_from(down, nodes, nodes.c.pk == down.c.pk)
    return sorted(conn.execute(query).all(), key=lambda row: (row.down_depth, row.down_pk))


def subtree_keys(conn: Connection, pk: int) -> list[tuple[int, int | None]]:
    """(pk, parent_pk) of ``pk`` and everything below it, parents before children."""
    rows = subtree_rows(conn, pk, nodes.c.pk, nodes.c.parent_pk)
    return [(row.pk, row.parent_pk) for row in rows]


def invalidate_below(conn: Connection, pk: int) -> int:
    """Drop the keyframes of ``pk`` and of everything below it; how many there were."""
    return _drop_keyframes(conn, [key for key, _ in subtree_keys(conn, pk)])


def _drop_keyframes(conn: Connection, keys: list[int]) -> int:
    dropped = 0
    for i in range(0, len(keys), 500):
        result = conn.execute(delete(keyframes).where(keyframes.c.node_pk.in_(keys[i : i + 500])))
        dropped += result.rowcount or 0
    return dropped


def rebuild_below(conn: Connection, schema: StateSchema, pk: int, every: int) -> int:
    """Recompute the states of ``pk``'s subtree, checking every delta on its new base,
    and replace its keyframes with fresh ones: at ``pk`` and where they are due.
    Returns how many were written.

    Raises:
        InvalidDeltaError: a delta of the subtree does not apply any more (naming
            the node); the caller's transaction should then be rolled back.
    """
    rows = subtree_rows(
        conn, pk, nodes.c.pk, nodes.c.id, nodes.c.parent_pk, nodes.c.enabled, nodes.c.delta
    )
    _drop_keyframes(conn, [row.pk for row in rows])
    parent_pk = rows[0].parent_pk  # rows[0] is pk's
    top = state_after(conn, schema, parent_pk) if parent_pk is not None else None
    children: dict[int | None, list[NamedRow]] = {}
    for row in rows:
        children.setdefault(row.parent_pk, []).append(row)
    written: list[dict[str, Any]] = []
    stack: list[tuple[NamedRow, Reached | None]] = [(rows[0], top)]
    while stack:
        row, parent = stack.pop()
        base = parent.state if parent is not None else schema.initial_state()
        delta = json.loads(row.delta) if row.delta and row.enabled else None
        state = apply_delta(schema, base, delta, node_id=row.id)
        if row.pk == pk or keyframe_due(parent, every):  # the top always gets one
            written.append({"node_pk": row.pk, "state": encode_state(state)})
            reached = Reached(state, 0)
        else:
            assert parent is not None and parent.distance is not None
            reached = Reached(state, parent.distance + 1)
        stack.extend((child, reached) for child in children.get(row.pk, []))
    if written:
        conn.execute(insert(keyframes), written)
    return len(written)


# --- reading along a path ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Touch:
    """A node on a path that wrote a variable, and the value after it."""

    node_id: str
    operations: list[dict[str, Any]]
    value: Any


def last_writer(conn: Connection, pk: int, path: str, chunk: int = 256) -> str | None:
    """The id of the nearest enabled node at or above ``pk`` whose delta writes
    ``path``, or ``None``: the path is read upwards a chunk at a time, and nothing is
    replayed, so a variable written recently costs a few rows however long the story."""
    at: int | None = pk
    while at is not None:
        rows = walk_up(conn, at, "n.id, n.enabled, n.delta, n.parent_pk", limit=chunk)
        for _, node_id, enabled, delta, _ in reversed(rows):
            if enabled and delta and any(touches(op, path) for op in json.loads(delta)):
                return str(node_id)
        at = None
        if rows:
            _, _, _, _, at = rows[0]  # the parent of the chunk's top
    return None


def touches_along(
    conn: Connection, schema: StateSchema, pk: int, path: str
) -> tuple[Any, list[Touch]]:
    """Replay the path root -> ``pk``; the value at the start and every node that
    wrote ``path`` (enabled nodes only), oldest first."""
    state = schema.initial_state()
    start = value_at(state, path)
    found: list[Touch] = []
    for _, node_id, enabled, delta in walk_up(conn, pk, "n.id, n.enabled, n.delta"):
        if not enabled or not delta:
            continue
        operations = json.loads(delta)
        state = apply_delta(schema, state, operations, node_id=node_id)
        mine = [op for op in operations if touches(op, path)]
        if mine:
            found.append(Touch(node_id, mine, value_at(state, path)))
    return start, found
