"""Names on nodes (tags and branches) in the database: the rows of ``refs`` read and
written on an open connection, inside a session's transaction. What they mean, and the
way in, is :mod:`mnemosyne.refs`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from sqlalchemy import Connection, bindparam, delete, insert, select, text, update

from . import _queries as q
from ._schema import nodes, refs
from .errors import InvalidOperationError, UnknownNodeError
from .nodenames import check_ref_name

__all__ = [
    "Place",
    "RefKind",
    "RefMark",
    "RefRow",
    "RefView",
    "add",
    "any_branch",
    "branches_at",
    "change",
    "follow_head",
    "marks",
    "places",
    "put",
    "remove",
    "restore",
    "snapshot",
    "views",
]

RefKind = Literal["tag", "branch"]
KINDS: tuple[str, ...] = get_args(RefKind)

#: A name as the journal keeps it: ``[name, kind, node_pk, created_at]`` (time as text).
RefRow = list[Any]


Place = Literal["tree", "fragment", "trash"]


@dataclass(frozen=True, slots=True)
class RefMark:
    """A tag or a branch as a log or a tree marks its node: its name, kind and node."""

    name: str
    kind: RefKind
    node_id: str


@dataclass(frozen=True, slots=True)
class RefView:
    """A tag or a branch as read: its name, kind, the node it names and where that is."""

    name: str
    kind: RefKind
    node_id: str
    created_at: datetime
    place: Place
    """Where the node is: in the tree, in a fragment (pruned), in the trash."""
    role: str
    content: str
    """The node's text (whole: a list shortens it)."""
    at_head: bool
    """Whether the node is HEAD."""

    def as_dict(self, *, short: int | None = 80) -> dict[str, Any]:
        text = " ".join(self.content.split())
        if short is not None and len(text) > short:
            text = text[: short - 1] + "…"
        return {
            "name": self.name,
            "kind": self.kind,
            "node_id": self.node_id,
            "created_at": self.created_at.isoformat(),
            "place": self.place,
            "role": self.role,
            "text": text,
            "at_head": self.at_head,
        }


def _kind(kind: str) -> RefKind:
    if kind not in KINDS:
        raise InvalidOperationError(f"a name is a tag or a branch, not {kind!r}")
    return kind  # type: ignore[return-value]


def _row(conn: Connection, session_pk: int, name: str) -> Any:
    return conn.execute(
        select(refs.c.pk, refs.c.kind, refs.c.node_pk).where(
            refs.c.session_pk == session_pk, refs.c.name == name
        )
    ).first()


# --- reads ------------------------------------------------------------------------------


def marks(conn: Connection, session_pk: int) -> list[RefMark]:
    """The session's names and the ids of their nodes, by name: what marks a node in a
    log or a tree (no walk to where the nodes are)."""
    query = (
        select(refs.c.name, refs.c.kind, nodes.c.id)
        .join(nodes, nodes.c.pk == refs.c.node_pk)
        .where(refs.c.session_pk == session_pk)
        .order_by(refs.c.name)
    )
    return [RefMark(name, kind, node_id) for name, kind, node_id in conn.execute(query)]


def views(
    conn: Connection, session_pk: int, head_pk: int | None, kind: str | None = None
) -> list[RefView]:
    """The session's names (``kind``: only tags or only branches), by name, with their
    nodes and where those are (:func:`places`)."""
    query = (
        select(
            refs.c.name,
            refs.c.kind,
            q.type_coerce_text(refs.c.created_at),
            nodes.c.pk,
            nodes.c.id,
            nodes.c.role,
            nodes.c.content,
        )
        .join(nodes, nodes.c.pk == refs.c.node_pk)
        .where(refs.c.session_pk == session_pk)
        .order_by(refs.c.name)
    )
    if kind is not None:
        query = query.where(refs.c.kind == _kind(kind))
    rows = conn.execute(query).all()
    where = places(conn, [row.pk for row in rows])
    return [
        RefView(
            row.name,
            row.kind,
            row.id,
            q.timestamp(row.created_at),
            where[row.pk],
            row.role,
            row.content,
            row.pk == head_pk,
        )
        for row in rows
    ]


# Every ancestor of the given nodes, each once (UNION: walks that meet go on as one).
_ANCESTORS = text(
    """WITH RECURSIVE up(pk, parent_pk) AS (
    SELECT pk, parent_pk FROM nodes WHERE pk IN :pks
    UNION
    SELECT n.pk, n.parent_pk FROM nodes n JOIN up ON n.pk = up.parent_pk
)
SELECT up.pk, up.parent_pk, n.detached FROM up JOIN nodes n ON n.pk = up.pk"""
).bindparams(bindparam("pks", expanding=True))


def places(conn: Connection, pks: list[int]) -> dict[int, Place]:
    """Where each node of ``pks`` is (in the tree, a fragment, the trash), in one query:
    the walks up from them share their common ancestors."""
    if not pks:
        return {}
    parent: dict[int, int] = {}
    where: dict[int, Place] = {}
    for pk, parent_pk, detached in conn.execute(_ANCESTORS, {"pks": sorted(set(pks))}):
        if parent_pk is None:
            where[pk] = detached or "tree"
        else:
            parent[pk] = parent_pk
    for start in pks:
        path, pk = [], start
        while pk not in where:
            path.append(pk)
            pk = parent[pk]
        for below in path:
            where[below] = where[pk]
    return where


def snapshot(conn: Connection, session_pk: int) -> list[RefRow]:
    """The session's names as the journal keeps them, by name."""
    query = (
        select(refs.c.name, refs.c.kind, refs.c.node_pk, q.type_coerce_text(refs.c.created_at))
        .where(refs.c.session_pk == session_pk)
        .order_by(refs.c.name)
    )
    return [[name, kind, pk, q.time_text(at)] for name, kind, pk, at in conn.execute(query)]


# --- writes (inside a session's write transaction) -------------------------------------


def restore(conn: Connection, session_pk: int, rows: list[RefRow]) -> None:
    """Make the session's names what ``rows`` (a :func:`snapshot`) say."""
    conn.execute(delete(refs).where(refs.c.session_pk == session_pk))
    if rows:
        conn.execute(
            insert(refs),
            [
                {
                    "session_pk": session_pk,
                    "name": name,
                    "kind": kind,
                    "node_pk": pk,
                    "created_at": q.text_time(at),
                }
                for name, kind, pk, at in rows
            ],
        )


def add(
    conn: Connection, session_pk: int, session_id: str, rows: Sequence[tuple[str, str, str]]
) -> None:
    """Name many nodes at once (``(name, kind, node id)`` each, exact ids), in one insert
    and no undo step: an import's names.

    Raises:
        InvalidOperationError: a bad name or kind, or one given twice or taken already.
        UnknownNodeError: no node of the session has that id.
    """
    checked = [(check_ref_name(name), _kind(kind), node_id) for name, kind, node_id in rows]
    if not checked:
        return
    wanted = sorted({name for name, _, _ in checked})
    taken = set(
        conn.execute(
            select(refs.c.name).where(refs.c.session_pk == session_pk, refs.c.name.in_(wanted))
        ).scalars()
    )
    pks: dict[str, int] = {}
    ids = sorted({node_id for _, _, node_id in checked})
    for i in range(0, len(ids), 500):
        query = select(nodes.c.id, nodes.c.pk).where(
            nodes.c.session_pk == session_pk, nodes.c.id.in_(ids[i : i + 500])
        )
        pks.update((node_id, pk) for node_id, pk in conn.execute(query))
    now = datetime.now(UTC)
    values = []
    for name, kind, node_id in checked:
        if name in taken:
            raise InvalidOperationError(f"{name!r} is named already: names are unique in a session")
        if node_id not in pks:
            raise UnknownNodeError(node_id, session_id)
        taken.add(name)
        values.append(
            {
                "session_pk": session_pk,
                "name": name,
                "kind": kind,
                "node_pk": pks[node_id],
                "created_at": now,
            }
        )
    conn.execute(insert(refs), values)


def put(
    conn: Connection,
    session_pk: int,
    name: str,
    kind: str,
    node_pk: int,
    *,
    force: bool = False,
) -> bool:
    """Name node ``node_pk`` ``name`` (a tag or a branch); ``force``: move the name if
    the session has it already (of the same kind). Whether anything changed.

    Raises:
        InvalidOperationError: a bad name, or one taken (without ``force``, or by the
            other kind).
    """
    name, kind = check_ref_name(name), _kind(kind)
    existing = _row(conn, session_pk, name)
    if existing is None:
        conn.execute(
            insert(refs).values(
                session_pk=session_pk,
                name=name,
                kind=kind,
                node_pk=node_pk,
                created_at=datetime.now(UTC),
            )
        )
        return True
    if existing.kind != kind:
        raise InvalidOperationError(
            f"{name!r} is a {existing.kind} already: names are unique in a session"
        )
    if not force:
        flag = "-f" if kind == "branch" else "-f (or delete it first with -d)"
        raise InvalidOperationError(f"{kind} {name!r} exists already: to move it, give {flag}")
    if existing.node_pk == node_pk:
        return False
    conn.execute(update(refs).where(refs.c.pk == existing.pk).values(node_pk=node_pk))
    return True


def _existing(
    conn: Connection, session_pk: int, session_id: str, name: str, kind: str | None
) -> Any:
    """The row of name ``name`` (``kind``: it must be of that kind).

    Raises:
        UnknownNodeError: the session has no such name (of that kind).
    """
    existing = _row(conn, session_pk, name)
    if existing is None or (kind is not None and existing.kind != kind):
        what = "tag or branch" if kind is None else kind
        raise UnknownNodeError(
            name, session_id, why=f"session {session_id} has no {what} named {name!r}"
        )
    return existing


def remove(conn: Connection, session_pk: int, session_id: str, name: str, kind: str | None) -> str:
    """Delete a name (``kind``: it must be of that kind); its kind.

    Raises:
        UnknownNodeError: the session has no such name (of that kind).
    """
    existing = _existing(conn, session_pk, session_id, name, kind)
    conn.execute(delete(refs).where(refs.c.pk == existing.pk))
    return str(existing.kind)


def change(
    conn: Connection,
    session_pk: int,
    session_id: str,
    name: str,
    *,
    new: str | None = None,
    node_pk: int | None = None,
    kind: str | None = None,
) -> str:
    """Move a name to node ``node_pk`` and/or rename it ``new`` (same kind; ``kind``: it
    must be of that kind); its kind. Giving it the name or node it has changes nothing.

    Raises:
        UnknownNodeError: no such name (of that kind). InvalidOperationError: the new
            name is bad or taken.
    """
    new = None if new is None else check_ref_name(new)
    existing = _existing(conn, session_pk, session_id, name, kind)
    values: dict[str, Any] = {}
    if new is not None and new != name:
        taken = _row(conn, session_pk, new)
        if taken is not None:
            raise InvalidOperationError(
                f"{new!r} is a {taken.kind} already: names are unique in a session"
            )
        values["name"] = new
    if node_pk is not None and node_pk != existing.node_pk:
        values["node_pk"] = node_pk
    if values:
        conn.execute(update(refs).where(refs.c.pk == existing.pk).values(**values))
    return str(existing.kind)


def any_branch(conn: Connection, session_pk: int) -> bool:
    """Whether the session has a branch at all."""
    query = select(refs.c.pk).where(refs.c.session_pk == session_pk, refs.c.kind == "branch")
    return conn.execute(query.limit(1)).first() is not None


def branches_at(conn: Connection, session_pk: int, node_pk: int) -> bool:
    """Whether a branch of the session has its tip at ``node_pk``."""
    query = select(refs.c.pk).where(
        refs.c.session_pk == session_pk, refs.c.node_pk == node_pk, refs.c.kind == "branch"
    )
    return conn.execute(query.limit(1)).first() is not None


def follow_head(conn: Connection, session_pk: int, from_pk: int, to_pk: int) -> None:
    """The branches at ``from_pk`` (HEAD before a node was added) move to ``to_pk``."""
    conn.execute(
        update(refs)
        .where(refs.c.session_pk == session_pk, refs.c.node_pk == from_pk, refs.c.kind == "branch")
        .values(node_pk=to_pk)
    )
