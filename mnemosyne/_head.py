"""HEAD: where a session's story stands, every way it moves, and the active-child
pointers that keep the path to it.

HEAD is the node the story has reached; the model sees the path root -> HEAD. It is
stored as ``sessions.head_pk`` (a node of the same session, the database checks),
read as :attr:`mnemosyne.Session.head_id`, and held by a write transaction as
:attr:`TransactionState.head_pk`/``head_id`` (written once, at its commit). This
module reads it (:func:`node_or_head`) and moves it:

- :func:`checkout`: to a node of the tree (``checkout``, growing the tree).
- :func:`sibling_leaf`: where a switch to the next/previous alternative lands.
- :func:`after_edit`: back into the tree when an edit took it out.

and keeps the invariant reads rely on: every ancestor of HEAD points its active
child along the path to HEAD (:func:`repoint` for a move, :func:`point_path_at` for
an edit or undo, which may have changed the path itself). Switching back to an
alternative lands on the leaf left there (:func:`descend`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, NamedTuple

from sqlalchemy import Connection, bindparam, literal, select, update

from . import _queries as q
from ._schema import nodes
from .errors import InvalidOperationError

if TYPE_CHECKING:
    from ._transaction import TransactionState

__all__ = [
    "NEAR_HEAD",
    "Direction",
    "after_edit",
    "checkout",
    "descend",
    "node_or_head",
    "point_path_at",
    "repoint",
    "sibling_leaf",
]

Direction = Literal["next", "prev"]

#: How many of HEAD's nearest ancestors a move of HEAD looks for where its path meets
#: HEAD's (see repoint).
NEAR_HEAD = 16

#: Said by an edit's result when it moved HEAD back into the tree.
MOVED_BACK = "HEAD was taken out of the tree; it moved to the nearest node still in it"


class _Walked(NamedTuple):
    """A row of the walk up in :func:`repoint`."""

    depth: int
    pk: int
    parent_pk: int | None
    active_child_pk: int | None
    detached: str | None


def node_or_head(conn: Connection, record: q.SessionRecord, ref: str | None) -> int | None:
    """The pk of node ``ref`` of the session, or HEAD's when ``ref`` is ``None`` (``None``:
    an empty session): what every read "at a node, HEAD by default" starts from.

    Raises:
        UnknownNodeError, AmbiguousIdError, ForeignNodeError: ``ref`` names no node of
            the session.
    """
    if ref is None:
        return record.head_pk
    pk, _ = q.resolve_node(conn, record, ref)
    return pk


def checkout(state: TransactionState, pk: int, node_id: str | None = None) -> None:
    """HEAD to node ``pk`` of the tree, every node above it pointing along the path
    to it (``node_id`` names it in a refusal; read when not given).

    Raises:
        InvalidOperationError: the node is in a fragment or in the trash.
    """
    repoint(state, pk, node_id)
    state.set_head(pk, node_id)
    state.grew()


def sibling_leaf(
    state: TransactionState, direction: Direction, at: tuple[int, str] | None = None
) -> int:
    """Where a switch from node ``at`` (its pk and id; default HEAD) to its
    next/previous sibling lands: that sibling, then down its active-child pointers
    to a leaf.

    Raises:
        InvalidOperationError: a direction other than next/prev, the session is empty,
            or there is no sibling that way.
    """
    if direction not in ("next", "prev"):
        raise InvalidOperationError(f"direction must be 'next' or 'prev', not {direction!r}")
    if at is not None:
        pk, node_id = at
    elif state.head_pk is not None and state.head_id is not None:
        pk, node_id = state.head_pk, state.head_id
    else:
        raise InvalidOperationError(f"session {state.record.id} is empty: nothing to switch")
    siblings = q.sibling_keys(state.conn, state.record, q.parent_key(state.conn, pk))
    index = siblings.index(pk)
    target = index + (1 if direction == "next" else -1)
    if not 0 <= target < len(siblings):
        end = "last" if direction == "next" else "first"
        raise InvalidOperationError(
            f"node {node_id} is the {end} of its {len(siblings)} alternative(s): "
            f"there is no {direction} one"
        )
    return descend(state.conn, siblings[target])


def after_edit(
    state: TransactionState, before_change: Callable[..., None] | None = None
) -> tuple[int | None, str]:
    """HEAD after an edit: where it was if that is still in the tree, else the nearest
    node that is (:func:`nearest_in_tree`); the path to it repointed (``before_change``
    as :func:`point_path_at` takes it). Returns it and a note for the edit's result
    (empty unless HEAD moved). HEAD itself is left to the caller to set."""
    head = state.head_pk
    note = ""
    if head is not None and q.top_detached(state.conn, head) is not None:
        head = nearest_in_tree(state, head)
        note = MOVED_BACK
    if head is not None:
        point_path_at(state, head, before_change)
    return head, note


def nearest_in_tree(state: TransactionState, pk: int) -> int | None:
    """For a node taken out of the tree: the node its subtree hung under, if that is
    still in the tree; else the leaf of the last root; else None."""
    conn = state.conn
    top = q.path_keys(conn, pk)[-1].pk
    home: int | None = conn.execute(
        select(nodes.c.detached_from_pk).where(nodes.c.pk == top)
    ).scalar_one()
    if home is not None and q.top_detached(conn, home) is None:
        return home
    roots = q.sibling_keys(conn, state.record, None)
    return descend(conn, roots[-1]) if roots else None


def repoint(state: TransactionState, pk: int, node_id: str | None) -> None:
    """Check that node ``pk`` is in the tree (not in a fragment or in the trash;
    ``node_id`` names it in the refusal) and make every node above it point its
    active child along the path to it: what :func:`point_path_at` does, for the
    moves of HEAD, reading only the part of the path that is not HEAD's.

    Every node above HEAD points along the path to HEAD (the invariant, true
    between operations): where the path to ``pk`` meets the path to HEAD, the rest
    of it above is right already, and it is in the tree. So the walk up from
    ``pk`` stops at HEAD or at one of its nearest ancestors: a turn, a reroll, a
    checkout back a few messages read a few rows, not the whole story. (A node
    whose path meets HEAD's higher up is walked up to its top, as before.)
    """
    head = state.head_pk
    near = (
        q.walk_up(state.conn, head, "n.pk, n.active_child_pk", limit=NEAR_HEAD)
        if head is not None
        else []
    )
    active = {key: child for _, key, child in near}
    if pk in active:
        return
    walked = q.walk_up(
        state.conn, pk, "n.pk, n.parent_pk, n.active_child_pk, n.detached", list(active)
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
    _set_active_children(state.conn, changes)


def point_path_at(
    state: TransactionState, pk: int, before_change: Callable[..., None] | None = None
) -> None:
    """Make every ancestor of ``pk`` point its active child along the path to it.

    ``before_change`` is called with the pks about to change (the journal keeps
    their rows as they were).
    """
    path = q.path_keys(state.conn, pk)
    changes = [
        {"parent": parent.pk, "child": child.pk}
        for child, parent in itertools.pairwise(path)
        if parent.active_child_pk != child.pk
    ]
    if changes and before_change is not None:
        before_change(*(change["parent"] for change in changes))
    _set_active_children(state.conn, changes)


def _set_active_children(conn: Connection, changes: list[dict[str, int]]) -> None:
    """Set each ``{"parent", "child"}`` pair's active child, in one statement."""
    if changes:
        conn.execute(
            update(nodes)
            .where(nodes.c.pk == bindparam("parent"))
            .values(active_child_pk=bindparam("child")),
            changes,
        )


def descend(conn: Connection, pk: int) -> int:
    """Follow the active-child pointers down from ``pk`` to a leaf; its pk."""
    start = select(nodes.c.pk, nodes.c.active_child_pk, literal(0).label("depth")).where(
        nodes.c.pk == pk
    )
    down = start.cte("down", recursive=True)
    step = select(nodes.c.pk, nodes.c.active_child_pk, (down.c.depth + 1).label("depth")).where(
        nodes.c.pk == down.c.active_child_pk,
        nodes.c.parent_pk == down.c.pk,
        down.c.depth < q.MAX_DEPTH,
    )
    down = down.union_all(step)
    query = select(down.c.pk).order_by(down.c.depth.desc()).limit(1)
    leaf: int = conn.execute(query).scalar_one()
    return leaf
