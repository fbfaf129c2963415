"""The linear projection: the path root -> HEAD (or -> any node), as its readers see it.

The model sees a straight path through the tree, its disabled nodes left out. It is
read four ways, all here:

- :func:`whole_nodes`: whole nodes (``Store.projection``).
- :func:`messages`: what the model is sent, id, role, name and text only, from the
  store's memory of recent paths (:mod:`mnemosyne._paths`): the hot path of a turn;
  :func:`scenes`: the same, with who was present along the path.
- :func:`turns`: whole nodes each with its siblings, the ``< 2/5 >`` of a chat view.
- :func:`page`: a window of that (the ``limit`` messages before a node), costing the
  window, not the path: how a chat view reads a long story and pages back.

The path is one recursive query over integer keys (``_queries.walk_up``) run on the
driver's cursor; its rows are decoded here by hand.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from . import _dialect as dialect
from . import _queries as q
from ._checks import check_limit
from ._paths import Path, PathCache, Stamp, Walk
from .errors import InvalidOperationError
from .models import Message, Node, NodeAmongSiblings, SceneChange, Scenes, Session
from .state.presence import apply_presence

__all__ = [
    "ProjectionPage",
    "last_speaker",
    "messages",
    "page",
    "path_keys",
    "path_keys_unkept",
    "scenes",
    "stamp",
    "turns",
    "whole_nodes",
]

# q.NODE_COLUMNS as SQL on the alias ``n``; created_at comes back as stored (text on
# SQLite), decoded on first use.
_NODE_SQL = ", ".join(f"n.{column.name}" for column in q.NODE_COLUMNS)
# What a Path needs of each node: (enabled, id, role, name, content, parent_pk, pk,
# the delta if it may change who is present: _message_sql).
_MESSAGE_SQL = (
    "n.enabled, n.id, n.role, n.name, n.content, n.parent_pk, n.pk, CASE WHEN {} THEN n.delta END"
)


@dataclass(frozen=True, slots=True)
class ProjectionPage:
    """A window of the projection at HEAD (:meth:`mnemosyne.Store.projection_page`)."""

    session: Session
    turns: list[NodeAmongSiblings]
    """The window's messages, oldest first, each with its siblings."""
    total: int
    """Messages on the whole path (counted as the window counts them)."""
    earlier: int
    """Messages before the window: 0 when it starts at the root."""


def stamp(session: Session) -> Stamp:
    """What a session's remembered paths are valid for (see :mod:`mnemosyne._paths`)."""
    return session.version, session.updated_at


def _path_rows(conn: Connection, pk: int) -> list[tuple[Any, ...]]:
    """The rows (q.NODE_COLUMNS) of the path from ``pk`` up to its root, root first."""
    return [row[1:] for row in q.walk_up(conn, pk, _NODE_SQL)]


def _walk(conn: Connection) -> Walk:
    """For :class:`~mnemosyne._paths.PathCache`: ``walk(pk, stops)``, the rows ``(depth,
    enabled, id, role, name, content, parent_pk, pk, scene)`` of the path from ``pk`` up
    to a root or to the first of ``stops``, top first."""

    columns = _MESSAGE_SQL.format(dialect.contains_sql(conn, "n.delta", '"present"'))

    def walk(pk: int, stops: Sequence[int]) -> list[tuple[Any, ...]]:
        return q.walk_up(conn, pk, columns, stops)

    return walk


def _path(conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int) -> Path:
    return cache.path(record.memory_key, stamp(record.session), pk, _walk(conn))


def path_keys(
    conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int | None
) -> tuple[int, ...]:
    """The key of every node on the path root -> ``pk``, disabled ones included, root
    first, from ``cache`` as far as it holds them (empty for ``None``)."""
    return () if pk is None else _path(conn, cache, record, pk).keys


def path_keys_unkept(
    conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int | None
) -> tuple[int, ...]:
    """As :func:`path_keys`, but what is not in ``cache`` is walked (keys only) and not
    stored there: for a reader of many sessions (a search of them all), whose paths
    would push out of the cache the paths of the sessions being played."""
    if pk is None:
        return ()
    found = cache.kept(record.memory_key, stamp(record.session), pk)
    if found is not None:
        return found.keys
    return tuple(row[1] for row in q.walk_up(conn, pk, "n.pk"))


def whole_nodes(conn: Connection, record: q.SessionRecord, pk: int | None) -> list[Node]:
    """The projection root -> ``pk`` as whole nodes, disabled nodes left out."""
    if pk is None:
        return []
    made = q.nodes_from_rows(conn, _path_rows(conn, pk), record.id, {})
    return [node for node in made if node.enabled]


def messages(
    conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int | None
) -> list[Message]:
    """What the model sees at ``pk``: the enabled messages of the path root -> ``pk``,
    from ``cache`` as far as it holds them (read in ``conn``'s transaction, the one
    ``record`` was read in)."""
    if pk is None:
        return []
    return list(_path(conn, cache, record, pk).messages)


def last_speaker(
    conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int | None
) -> str | None:
    """The name on the newest named reply of the path root -> ``pk`` (from its end)."""
    if pk is None:
        return None
    for message in reversed(_path(conn, cache, record, pk).messages):
        if message.role == "assistant" and message.name:
            return message.name
    return None


def scenes(conn: Connection, cache: PathCache, record: q.SessionRecord, pk: int | None) -> Scenes:
    """:func:`messages` and who was present along the path: the deltas of its enabled
    nodes that change ``present`` (kept with the path in ``cache``, read in the same
    walk) folded from everyone at its top, one pass over those nodes alone."""
    if pk is None:
        return Scenes([], [])
    path = _path(conn, cache, record, pk)
    changes: list[SceneChange] = []
    present: list[str] | None = None
    for index, text in path.scenes:
        operations = json.loads(text)
        moved, after = False, present
        try:
            for operation in operations if isinstance(operations, list) else ():
                if isinstance(operation, dict) and operation.get("path") == "present":
                    after = apply_presence(operation.get("op", ""), operation.get("value"), after)
                    moved = True
        except ValueError:  # not as stored: the store replays it the same way (refused)
            moved = False
        if moved:
            present = after
            changes.append(SceneChange(index, after))
    return Scenes(list(path.messages), changes)


def turns(
    conn: Connection, record: q.SessionRecord, pk: int | None, *, disabled: bool = False
) -> list[NodeAmongSiblings]:
    """The projection root -> ``pk``, each node with its siblings; ``disabled``: the
    path's disabled nodes too."""
    if pk is None:
        return []
    views = _rows_among_siblings(conn, record, _path_rows(conn, pk))
    return [view for view in views if view.node.enabled or disabled]


def page(
    conn: Connection,
    cache: PathCache,
    record: q.SessionRecord,
    *,
    before: str | None = None,
    limit: int = 200,
    disabled: bool = False,
) -> ProjectionPage:
    """The ``limit`` messages of the projection at HEAD just before node ``before``
    (default: its last ones), each with its siblings (see
    :meth:`mnemosyne.Store.projection_page`): the path's keys from ``cache``, then
    only the window's nodes read.

    Raises:
        InvalidOperationError: ``limit`` below 1; ``before`` is not on the path.
        UnknownNodeError: no node ``before``.
    """
    check_limit(limit)
    if record.head_pk is None:
        if before is not None:
            q.resolve_node(conn, record, before)
            raise InvalidOperationError(
                f"node {before} is not on the path to HEAD: session {record.id} is empty"
            )
        return ProjectionPage(record.session, [], 0, 0)
    path = _path(conn, cache, record, record.head_pk)
    end = len(path.keys)
    if before is not None:
        pk, node_id = q.resolve_node(conn, record, before)
        end = _position(path.keys, pk)
        if end < 0:
            raise InvalidOperationError(
                f"node {node_id} is not on the path root -> HEAD (it is on another "
                "branch, in a fragment or in the trash)"
            )
    if disabled:
        first = max(end - limit, 0)
        keys = list(path.keys[first:end])
        total = len(path.keys)
    else:
        stop = bisect_left(path.enabled, end)
        first = max(stop - limit, 0)
        keys = [path.keys[i] for i in path.enabled[first:stop]]
        total = len(path.enabled)
    return ProjectionPage(record.session, _among_siblings(conn, record, keys), total, first)


def _position(keys: tuple[int, ...], pk: int) -> int:
    """Where ``pk`` is in ``keys`` (-1: not there), looked for from the end: a page
    is usually near it."""
    end, size = len(keys), 1024
    while end > 0:
        start = max(end - size, 0)
        if pk in keys[start:end]:
            return keys.index(pk, start, end)
        end, size = start, size * 4
    return -1


def _among_siblings(
    conn: Connection, record: q.SessionRecord, pks: Sequence[int]
) -> list[NodeAmongSiblings]:
    """The nodes ``pks`` (placed nodes of the session), in that order, each with its
    siblings' ids in order and its index among them: a few queries, whatever the
    length of the path they are on."""
    return _rows_among_siblings(conn, record, q.node_rows(conn, record, pks))


def _rows_among_siblings(
    conn: Connection, record: q.SessionRecord, rows: Sequence[Sequence[Any]]
) -> list[NodeAmongSiblings]:
    """Rows of q.NODE_COLUMNS as NodeAmongSiblings, in that order (a few queries)."""
    keys = [q.node_keys(row) for row in rows]
    siblings = q.sibling_lists(conn, record, (parent_pk for _, _, parent_pk, _ in keys))
    ids = {pk: node_id for pk, node_id, _, _ in keys}
    wanted = {ref for _, _, parent, child in keys for ref in (parent, child) if ref is not None}
    wanted.update(pk for pks in siblings.values() for pk in pks)
    ids.update(q.public_ids(conn, wanted - ids.keys()))
    views = []
    for row, (pk, _, parent_pk, _) in zip(rows, keys, strict=True):
        among = siblings[parent_pk]
        node = q.node_from_row(row, record.id, ids)
        views.append(NodeAmongSiblings(node, [ids[k] for k in among], among.index(pk)))
    return views
