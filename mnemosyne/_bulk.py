"""Bulk writes and whole-session reads: an import in a few statements, an export in
one snapshot.

:func:`insert_nodes` writes many nodes at once (a SillyTavern chat, a tree file). It
checks every record as :meth:`~mnemosyne.SessionTransaction.append` checks its input,
replays the deltas in memory (each on its parent's state), places keyframes where
growing the tree node by node places them, and writes the rows with one
``executemany`` per table. The rows' keys are allotted before anything is written
(``max(pk) + 1`` onwards under SQLite's write lock, as SQLite itself would; the
column's sequence on PostgreSQL), so that a record can name an earlier one as its
parent. Everything is checked before the first row is written.

:func:`dump` reads a whole session as stored (nodes with their detached state,
traces in their stored form and the blobs they name, documents), for a lossless
export: :func:`insert_nodes` and :func:`insert_traces` take it back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple

from sqlalchemy import Connection, insert, select

from . import _dialect as dialect
from . import _documents as docs
from . import _queries as q
from . import _worldstate as ws
from . import traces as tr
from ._checks import check_content, check_delta, check_metadata, check_name, check_role, new_id
from ._refs import RefMark, marks
from ._schema import blobs, nodes, sessions, traces
from .errors import (
    ForeignNodeError,
    IdTakenError,
    InvalidOperationError,
    MnemosyneError,
    StorageError,
    UnknownNodeError,
)
from .models import Document, Node, Session
from .state.delta import State, apply_delta
from .state.note import check_note
from .state.presence import check_present
from .state.schema import BUILT_INS, StateSchema, check_value, type_of

__all__ = ["NodeRecord", "SessionDump", "StoredTrace"]

Place = Literal["fragment", "trash"]
PLACES: tuple[Place, ...] = ("fragment", "trash")
_ID = re.compile(r"^[0-9a-f]{32}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One node for :meth:`~mnemosyne.SessionTransaction.insert_nodes`, or as
    :meth:`~mnemosyne.Store.dump` reads it: the shape of a node in an exchange format
    (a read's shape is :class:`~mnemosyne.Node`; see :mod:`mnemosyne.models`).

    ``parent``, ``active_child`` and ``detached_from`` name other nodes: by id, or (on
    a write) by the index of another record of the same call. As read, they are ids.
    """

    role: str
    content: str
    parent: str | int | None = None
    """The parent: a node of the session or an earlier record; ``None``: a root (or
    the top of a detached subtree)."""
    name: str | None = None
    enabled: bool = True
    metadata: Mapping[str, Any] | None = None
    delta: Sequence[Mapping[str, Any]] | None = None
    id: str | None = None
    """32 lowercase hex characters not used anywhere in the database; ``None``: a new one."""
    created_at: datetime | None = None
    """An aware datetime (stored in UTC); ``None``: now."""
    active_child: str | int | None = None
    """The child the active path goes on to (a later record whose parent this is);
    ``None``: its last child, as growing node by node leaves it (``None`` for a leaf)."""
    detached: Place | None = None
    """``fragment`` or ``trash``: the top of a subtree out of the tree (no parent)."""
    detached_from: str | int | None = None
    """Where a detached subtree hung (a node, or ``None`` if unknown)."""
    detached_at: datetime | None = None
    """When it was detached; ``None``: now."""
    detached_state: Mapping[str, Any] | None = None
    """For a detached top: the world state after it, as it was where it hung (kept as
    its keyframe; the subtree's states follow from it). ``None``: computed from
    ``detached_from``'s state (the initial state if there is none), as a prune does."""


@dataclass(frozen=True, slots=True)
class StoredTrace:
    """A PromptTrace in its stored form (see :mod:`mnemosyne.traces`)."""

    node_id: str
    parts: list[dict[str, Any]]
    """``{"run": [first id, last id, count]}`` (``"named": true`` too: replies sent with
    their speaker's name) or ``{"blob": hash}``, one per span sent."""
    messages_hash: str
    document: dict[str, Any]


@dataclass(frozen=True)
class SessionDump:
    """A whole session as stored, read in one snapshot (:meth:`~mnemosyne.Store.dump`)."""

    session: Session
    state_schema: dict[str, Any] | None
    """The world-state schema as stored (JSON); ``None``: none stored (permissive)."""
    documents: list[Document]
    nodes: list[NodeRecord]
    """Every node, parents before children, siblings in order: the tree (root by root),
    then the fragments, then the trash."""
    traces: list[StoredTrace]
    """The traces of the session's nodes, in the order of ``nodes``."""
    blobs: dict[str, str]
    """The blobs the traces name (their parts, and any hash in their documents)."""
    names: Sequence[RefMark] = ()
    """The session's tags and branches, by name (:mod:`mnemosyne.refs`)."""


@dataclass(frozen=True)
class Inserted:
    """What :func:`insert_nodes` did, for the transaction to take up."""

    nodes: list[Node]
    head: tuple[int, str] | None
    """HEAD's new (pk, id); ``None``: unchanged."""
    repoint: int | None
    """A node already stored on the path to HEAD: the nodes above it must point their
    active child along the path to it."""


# --- checks ----------------------------------------------------------------------------


def check_id(value: object, what: str = "node id") -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise InvalidOperationError(f"{what} {value!r} must be 32 lowercase hex characters")
    return value


def utc(value: object, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidOperationError(f"{what} must be a datetime with a time zone, not {value!r}")
    return value.astimezone(UTC)


def check_state(schema: StateSchema, value: object) -> State:
    """A world state given whole, checked against the schema (a copy)."""
    if not isinstance(value, Mapping):
        raise InvalidOperationError(f"a world state is an object, not {value!r}")
    extra = set(value) - set(BUILT_INS) - {"variables"}
    if extra:
        raise InvalidOperationError(f"a world state has no {', '.join(sorted(extra))}")
    variables = value.get("variables", {})
    lore = value.get("active_lore_ids", [])
    summary = value.get("summary", "")
    timers = value.get("lore_timers", {})
    if not isinstance(variables, Mapping):
        raise InvalidOperationError(f"variables: expected an object, not {variables!r}")
    if not isinstance(lore, list) or not all(isinstance(x, str) for x in lore):
        raise InvalidOperationError("active_lore_ids: expected a list of texts")
    if not isinstance(summary, str):
        raise InvalidOperationError(f"summary: expected text, not {summary!r}")
    if not isinstance(timers, Mapping):
        raise InvalidOperationError(f"lore_timers: expected an object, not {timers!r}")
    note = value.get("author_note")
    if note is not None:
        try:
            note = check_note(note)
        except ValueError as error:
            raise InvalidOperationError(str(error)) from None
    try:
        present = check_present(value.get("present"))
    except ValueError as error:
        raise InvalidOperationError(str(error)) from None
    for name, held in variables.items():
        spec = schema.variables.get(name)
        if spec is None:
            if not schema.permissive:
                raise InvalidOperationError(f"variables.{name}: not a variable of the schema")
            problem = None if type_of(held) is not None else "null is not a value"
        else:
            problem = check_value(spec, held)
        if problem:
            raise InvalidOperationError(f"variables.{name}: {problem}")
    state = {
        "variables": dict(variables),
        "active_lore_ids": list(lore),
        "summary": summary,
        "lore_timers": dict(timers),
        "author_note": note,
        "present": present,
    }
    try:
        ws.encode_state(state)
    except (TypeError, ValueError) as error:
        raise InvalidOperationError(f"a world state must be JSON: {error}") from None
    return state


def _tagged(error: MnemosyneError, index: int) -> MnemosyneError:
    error.record_index = index
    return error


def _chunks(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(values), _CHUNK):
        yield values[i : i + _CHUNK]


class _Stored(NamedTuple):
    """A node that exists, by its keys."""

    pk: int
    session_pk: int


def _lookup(conn: Connection, ids: Iterable[str]) -> dict[str, _Stored]:
    """The keys of the nodes that exist among ``ids``, by id."""
    wanted = list(dict.fromkeys(ids))
    found: dict[str, _Stored] = {}
    for chunk in _chunks(wanted):
        query = select(nodes.c.id, nodes.c.pk, nodes.c.session_pk).where(nodes.c.id.in_(chunk))
        found.update({row.id: _Stored(row.pk, row.session_pk) for row in conn.execute(query)})
    return found


# Bulk statements run on the driver's cursor: SQLAlchemy's per-row parameter handling
# costs more than the database's work for rows this simple.
_INSERT_NODES = (
    "INSERT INTO nodes (pk, id, session_pk, parent_pk, role, name, content, enabled, "
    "created_at, metadata, delta, active_child_pk, detached, detached_from_pk, detached_at) "
    "VALUES ({})".format(", ".join(["{p}"] * 15))
)
_INSERT_KEYFRAMES = "INSERT INTO keyframes (node_pk, state) VALUES ({p}, {p})"
_POINT = "UPDATE nodes SET active_child_pk = {p} WHERE pk = {p}"


def _executemany(conn: Connection, statement: str, rows: Sequence[tuple[Any, ...]]) -> None:
    sql = statement.format(p=dialect.param(conn))
    cursor = conn.connection.cursor()
    try:
        cursor.executemany(sql, rows)
    finally:
        cursor.close()


def _time_writer(conn: Connection) -> Any:
    """How the driver is handed a time for a ``DateTime`` column (SQLite: as text,
    the way SQLAlchemy writes it; PostgreSQL: as it is)."""
    column = nodes.c.created_at.type.dialect_impl(conn.dialect)
    convert = column.bind_processor(conn.dialect)
    return convert if convert is not None else (lambda value: value)


# --- writing nodes -----------------------------------------------------------------------


@dataclass(slots=True)
class _Prepared:
    id: str
    parent: int | str | None  # a record index, or the id of a stored node
    role: str
    name: str | None
    content: str
    enabled: bool
    created_at: datetime
    metadata: dict[str, Any]
    delta: list[dict[str, Any]] | None
    stored_metadata: str  # the columns' JSON text
    stored_delta: str | None
    active_child: int | str | None
    detached: Place | None
    detached_from: int | str | None
    detached_at: datetime | None
    detached_state: Mapping[str, Any] | None


def _reference(value: object, what: str, index_of: dict[str, int]) -> int | str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidOperationError(f"{what} must be a node id or a record index, not {value!r}")
    if isinstance(value, str):
        return index_of.get(value, value)
    return value


def _prepare(items: Sequence[NodeRecord], now: datetime) -> tuple[list[_Prepared], dict[str, int]]:
    prepared: list[_Prepared] = []
    index_of: dict[str, int] = {}
    for i, item in enumerate(items):
        try:
            if not isinstance(item, NodeRecord):
                raise InvalidOperationError(
                    f"a record must be a NodeRecord, not {type(item).__name__}"
                )
            if item.id is not None:
                node_id = check_id(item.id)
                if node_id in index_of:
                    raise InvalidOperationError(
                        f"node id {node_id} is given twice (records {index_of[node_id]} and {i})"
                    )
            else:
                node_id = new_id()
            parent = _reference(item.parent, "parent", index_of)
            if parent == node_id:
                raise InvalidOperationError(f"node {node_id} cannot be its own parent")
            if isinstance(parent, int) and not 0 <= parent < i:
                raise InvalidOperationError(
                    f"parent {parent} is not an earlier record (records come parents first)"
                )
            index_of[node_id] = i
            if item.detached is not None:
                if item.detached not in PLACES:
                    raise InvalidOperationError(
                        f"detached must be 'fragment' or 'trash', not {item.detached!r}"
                    )
                if parent is not None:
                    raise InvalidOperationError(
                        "a detached record (the top of a fragment or of the trash) has no parent"
                    )
            elif (
                item.detached_from is not None
                or item.detached_at is not None
                or item.detached_state is not None
            ):
                raise InvalidOperationError(
                    "detached_from, detached_at and detached_state are for a detached record"
                )
            detached_from = _reference(item.detached_from, "detached_from", {})
            if isinstance(detached_from, int) and not 0 <= detached_from < len(items):
                raise InvalidOperationError(f"detached_from {detached_from} is not a record")
            created_at = now if item.created_at is None else utc(item.created_at, "created_at")
            delta = check_delta(item.delta)
            metadata = check_metadata(item.metadata)
            prepared.append(
                _Prepared(
                    id=node_id,
                    parent=parent,
                    role=check_role(item.role),
                    name=check_name(item.name),
                    content=check_content(item.content),
                    enabled=bool(item.enabled),
                    created_at=created_at,
                    metadata=metadata,
                    delta=delta,
                    stored_metadata=q.encode_json(metadata),  # refuses what is not JSON
                    stored_delta=q.encode_json(delta) if delta else None,
                    active_child=_reference(item.active_child, "active_child", {}),
                    detached=item.detached,
                    detached_from=detached_from,
                    detached_at=(
                        None
                        if item.detached is None
                        else now
                        if item.detached_at is None
                        else utc(item.detached_at, "detached_at")
                    ),
                    detached_state=item.detached_state,
                )
            )
        except MnemosyneError as error:
            raise _tagged(error, i) from None
        except (TypeError, ValueError) as error:
            raise _tagged(InvalidOperationError(f"not JSON: {error}"), i) from None
    for p in prepared:  # where a subtree hung may be any record, earlier or later
        if isinstance(p.detached_from, str):
            p.detached_from = index_of.get(p.detached_from, p.detached_from)
    return prepared, index_of


def insert_nodes(
    conn: Connection,
    record: q.SessionRecord,
    schema: StateSchema,
    every: int,
    items: Sequence[NodeRecord],
    *,
    head: str | int | None,
    check_disabled_deltas: bool,
) -> Inserted:
    """Check and write ``items`` (see :meth:`~mnemosyne.SessionTransaction.insert_nodes`)."""
    items = list(items)
    now = datetime.now(UTC)
    prepared, index_of = _prepare(items, now)
    count = len(prepared)

    # Ids named that are not records': nodes stored already, of this session.
    stored_refs: dict[str, tuple[int, str]] = {}
    for i, p in enumerate(prepared):
        for ref, what in ((p.parent, "parent"), (p.detached_from, "detached_from")):
            if isinstance(ref, str):
                stored_refs.setdefault(ref, (i, what))
    if isinstance(head, str) and head not in index_of:
        stored_refs.setdefault(head, (-1, "head"))
    found = _lookup(conn, stored_refs)
    for ref, (i, what) in stored_refs.items():
        try:
            if ref not in found:
                if ref in index_of:  # a later record named as a parent
                    raise InvalidOperationError(
                        f"{what} {ref} is record {index_of[ref]}, after this one: "
                        "records come parents first"
                    )
                raise UnknownNodeError(ref, record.id)
            if found[ref].session_pk != record.pk:
                owner = conn.execute(
                    select(sessions.c.id).where(sessions.c.pk == found[ref].session_pk)
                ).scalar()
                raise ForeignNodeError(ref, owner or "?", record.id)
        except MnemosyneError as error:
            raise (_tagged(error, i) if i >= 0 else error) from None
    first_under: dict[str, int] = {}
    for i, p in enumerate(prepared):
        if isinstance(p.parent, str):
            first_under.setdefault(p.parent, i)
    for parent_id, i in first_under.items():  # as append and add_sibling, not in a fragment
        place = q.top_detached(conn, found[parent_id].pk)
        if place is not None:
            where, hint = (
                ("a fragment", "graft it first")
                if place == "fragment"
                else ("the trash", "restore it first")
            )
            raise _tagged(InvalidOperationError(f"node {parent_id} is in {where}: {hint}"), i)

    # Ids given must be new to the whole database.
    given = [p.id for p, item in zip(prepared, items, strict=True) if item.id is not None]
    taken = _lookup(conn, given)
    if taken:
        first = next(node_id for node_id in given if node_id in taken)
        raise _tagged(IdTakenError("node", first), index_of[first])

    # The children of each record (record indices), and active children checked.
    children: list[list[int]] = [[] for _ in range(count)]
    under_stored: dict[str, list[int]] = {}
    for i, p in enumerate(prepared):
        if isinstance(p.parent, int):
            children[p.parent].append(i)
        elif isinstance(p.parent, str):
            under_stored.setdefault(p.parent, []).append(i)
    active: list[int | None] = []
    for i, p in enumerate(prepared):
        chosen = p.active_child
        if chosen is None:
            active.append(children[i][-1] if children[i] else None)
            continue
        j = index_of.get(chosen) if isinstance(chosen, str) else chosen
        if j is None or not 0 <= j < count or prepared[j].parent != i:
            raise _tagged(
                InvalidOperationError(
                    f"active child {chosen!r} of node {p.id} is not one of its children"
                ),
                i,
            )
        active.append(j)

    # States, replayed in memory; keyframes where growing node by node puts them.
    reached: list[ws.Reached] = []
    stored_states: dict[int, ws.Reached] = {}

    def stored_state(node_id: str) -> ws.Reached:
        pk = found[node_id].pk
        if pk not in stored_states:
            stored_states[pk] = ws.state_after(conn, schema, pk)
        return stored_states[pk]

    frames: list[dict[str, Any]] = []
    for i, p in enumerate(prepared):
        try:
            if p.detached is not None:
                if p.detached_state is not None:
                    own = check_state(schema, p.detached_state)
                else:
                    source = p.detached_from
                    if isinstance(source, int) and source >= i:
                        raise InvalidOperationError(
                            f"detached_from {source} is a later record: give detached_state"
                        )
                    base = (
                        schema.initial_state()
                        if source is None
                        else reached[source].state
                        if isinstance(source, int)
                        else stored_state(source).state
                    )
                    own = base
                    if p.delta and (p.enabled or check_disabled_deltas):
                        after = apply_delta(schema, base, p.delta, node_id=p.id)
                        own = after if p.enabled else base
                frames.append({"node_pk": i, "state": ws.encode_state(own)})
                reached.append(ws.Reached(own, 0))
                continue
            above = (
                None
                if p.parent is None
                else reached[p.parent]
                if isinstance(p.parent, int)
                else stored_state(p.parent)
            )
            base = above.state if above is not None else schema.initial_state()
            own = base
            if p.delta and (p.enabled or check_disabled_deltas):
                after = apply_delta(schema, base, p.delta, node_id=p.id)
                own = after if p.enabled else base
            if ws.keyframe_due(above, every):
                frames.append({"node_pk": i, "state": ws.encode_state(own)})
                reached.append(ws.Reached(own, 0))
            else:
                assert above is not None and above.distance is not None
                reached.append(ws.Reached(own, above.distance + 1))
        except MnemosyneError as error:
            raise _tagged(error, i) from None

    # HEAD: the last record in the tree (as appending leaves it), or the one named.
    attached = [False] * count
    for i, p in enumerate(prepared):
        if p.detached is None:
            attached[i] = attached[p.parent] if isinstance(p.parent, int) else True
    head_index: int | None = None
    head_stored: tuple[int, str] | None = None
    if head is None:
        head_index = next((i for i in range(count - 1, -1, -1) if attached[i]), None)
    elif isinstance(head, bool) or not isinstance(head, (int, str)):
        raise InvalidOperationError(f"head must be a node id or a record index, not {head!r}")
    elif isinstance(head, int) or head in index_of:
        head_index = index_of[head] if isinstance(head, str) else head
        if not 0 <= head_index < count:
            raise InvalidOperationError(f"head {head} is not a record")
        if not attached[head_index]:
            raise InvalidOperationError(
                f"HEAD must be in the tree: node {prepared[head_index].id} is in a fragment "
                "or in the trash"
            )
    else:
        pk = found[head].pk
        if q.top_detached(conn, pk) is not None:
            raise InvalidOperationError(
                f"HEAD must be in the tree: node {head} is in a fragment or in the trash"
            )
        head_stored = (pk, head)

    # Every node above HEAD points its active child along the path to it.
    stored_active: dict[int, int] = {
        found[node_id].pk: kids[-1] for node_id, kids in under_stored.items()
    }
    repoint: int | None = None
    if head_index is not None:
        j = head_index
        while isinstance(prepared[j].parent, int):
            parent = prepared[j].parent
            assert isinstance(parent, int)
            active[parent] = j
            j = parent
        top_parent = prepared[j].parent
        if isinstance(top_parent, str):
            repoint = found[top_parent].pk
            stored_active[repoint] = j
    elif head_stored is not None:
        repoint, _ = head_stored

    # Write: keys first, then one executemany per table.
    if count:
        pks = dialect.new_node_keys(conn, count)

        def key(ref: int | str | None) -> int | None:
            if ref is None:
                return None
            return pks[ref] if isinstance(ref, int) else found[ref].pk

        time = _time_writer(conn)
        pointers = [(pks[j], pk) for pk, j in stored_active.items()]
        later = dialect.defers_forward_references(conn)
        rows = []
        for i, p in enumerate(prepared):
            child = key(active[i])
            if later and child is not None:
                pointers.append((child, pks[i]))
                child = None
            rows.append(
                (
                    pks[i],
                    p.id,
                    record.pk,
                    key(p.parent),
                    p.role,
                    p.name,
                    p.content,
                    p.enabled,
                    time(p.created_at),
                    p.stored_metadata,
                    p.stored_delta,
                    child,
                    p.detached,
                    key(p.detached_from),
                    None if p.detached_at is None else time(p.detached_at),
                )
            )
        _executemany(conn, _INSERT_NODES, rows)
        if frames:
            _executemany(conn, _INSERT_KEYFRAMES, [(pks[f["node_pk"]], f["state"]) for f in frames])
        if pointers:
            _executemany(conn, _POINT, pointers)
    ids = {i: p.id for i, p in enumerate(prepared)}
    made = [
        Node(
            p.id,
            record.id,
            None if p.parent is None else ids[p.parent] if isinstance(p.parent, int) else p.parent,
            p.role,  # type: ignore[arg-type]
            p.name,
            p.content,
            p.enabled,
            p.created_at,
            p.metadata,
            p.delta or [],
            None if active[i] is None else ids[active[i]],  # type: ignore[index]
        )
        for i, p in enumerate(prepared)
    ]
    if head_index is not None:
        new_head: tuple[int, str] | None = (pks[head_index], prepared[head_index].id)
    else:
        new_head = head_stored
    return Inserted(made, new_head, repoint)


# --- writing traces -------------------------------------------------------------------------


def _check_parts(parts: object) -> list[dict[str, Any]]:
    if not isinstance(parts, list):
        raise InvalidOperationError(f"parts must be a list, not {parts!r}")
    for n, part in enumerate(parts):
        if isinstance(part, Mapping) and set(part) == {"blob"}:
            if not isinstance(part["blob"], str) or not _HASH.match(part["blob"]):
                raise InvalidOperationError(f"parts[{n}].blob: not a SHA-256 hash in hex")
            continue
        if isinstance(part, Mapping) and set(part) in ({"run"}, {"run", "named"}):
            if part.get("named", True) is not True:
                raise InvalidOperationError(
                    f"parts[{n}].named: true or left out, not {part['named']!r}"
                )
            run = part["run"]
            if (
                isinstance(run, list)
                and len(run) == 3
                and all(isinstance(x, str) and _ID.match(x) for x in run[:2])
                and isinstance(run[2], int)
                and not isinstance(run[2], bool)
                and run[2] >= 1
            ):
                continue
            raise InvalidOperationError(
                f"parts[{n}].run: expected [first node id, last node id, count], not {run!r}"
            )
        raise InvalidOperationError(
            f'parts[{n}]: expected {{"run": [first, last, count]}} or {{"blob": hash}}'
        )
    return [dict(part) for part in parts]


def insert_traces(
    conn: Connection,
    record: q.SessionRecord,
    items: Sequence[StoredTrace],
    texts: Mapping[str, str],
) -> int:
    """Check and write traces in their stored form, and the blobs given; how many."""
    items = list(items)
    for digest, content in texts.items():
        if not isinstance(content, str) or "\x00" in content:
            raise InvalidOperationError(f"blob {digest!r}: a blob is text without NUL characters")
        actual = tr.blob_hash(content)
        if actual != digest:
            raise InvalidOperationError(f"blob {digest!r}: its text hashes to {actual}")
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        try:
            if not isinstance(item, StoredTrace):
                raise InvalidOperationError(
                    f"a trace must be a StoredTrace, not {type(item).__name__}"
                )
            node_id = check_id(item.node_id)
            if node_id in seen:
                raise InvalidOperationError(
                    f"node {node_id} has two traces (records {seen[node_id]} and {i})"
                )
            seen[node_id] = i
            parts = _check_parts(item.parts)
            if not isinstance(item.messages_hash, str) or not _HASH.match(item.messages_hash):
                raise InvalidOperationError("messages_hash: not a SHA-256 hash in hex")
            if not isinstance(item.document, Mapping):
                raise InvalidOperationError("a trace document must be an object")
            try:
                document = tr.canonical_json(dict(item.document))
            except (TypeError, ValueError) as error:
                raise InvalidOperationError(f"a trace document must be JSON: {error}") from None
            rows.append(
                {
                    "node_id": node_id,
                    "messages": tr.canonical_json(parts),
                    "messages_hash": item.messages_hash,
                    "document": document,
                    "blobs": [part["blob"] for part in parts if "blob" in part],
                }
            )
        except MnemosyneError as error:
            raise _tagged(error, i) from None
    found = _lookup(conn, seen)
    for node_id, i in seen.items():
        if node_id not in found or found[node_id].session_pk != record.pk:
            raise _tagged(UnknownNodeError(node_id, record.id), i)
    keys = [found[node_id].pk for node_id in seen]
    for chunk in _chunks(keys):
        traced = conn.execute(select(traces.c.node_pk).where(traces.c.node_pk.in_(chunk))).first()
        if traced is not None:
            node_id = next(n for n in seen if found[n].pk == traced.node_pk)
            raise _tagged(
                InvalidOperationError(f"node {node_id} already has a trace"), seen[node_id]
            )
    named = {digest: row["node_id"] for row in rows for digest in row["blobs"]}
    missing = [digest for digest in named if digest not in texts]
    stored: set[str] = set()
    for chunk in _chunks(missing):
        stored.update(conn.execute(select(blobs.c.hash).where(blobs.c.hash.in_(chunk))).scalars())
    for digest in missing:
        if digest not in stored:
            node_id = named[digest]
            raise _tagged(
                InvalidOperationError(
                    f"the trace of node {node_id} names blob {digest}, neither given nor stored"
                ),
                seen[node_id],
            )
    if texts:
        conn.execute(
            dialect.insert_or_ignore(conn, blobs),
            [{"hash": digest, "content": content} for digest, content in texts.items()],
        )
    if rows:
        conn.execute(
            insert(traces),
            [
                {
                    "node_pk": found[row["node_id"]].pk,
                    "messages": row["messages"],
                    "messages_hash": row["messages_hash"],
                    "document": row["document"],
                }
                for row in rows
            ],
        )
    return len(rows)


# --- reading a whole session -------------------------------------------------------------------


def _hashes(value: Any) -> Iterator[str]:
    """Every string in a JSON value that looks like a blob's name."""
    if isinstance(value, str):
        if len(value) == 64 and _HASH.match(value):
            yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _hashes(item)
    elif isinstance(value, list):
        for item in value:
            yield from _hashes(item)


def dump(conn: Connection, record: q.SessionRecord) -> SessionDump:
    """The whole session as stored (see :class:`SessionDump`)."""
    schema = ws.parse_schema(record.schema_json)
    rows = conn.execute(
        select(*q.NODE_COLUMNS, nodes.c.detached, nodes.c.detached_from_pk, nodes.c.detached_at)
        .where(nodes.c.session_pk == record.pk)
        .order_by(nodes.c.pk)
    ).all()
    ids = {row.pk: row.id for row in rows}
    elsewhere = {
        row.detached_from_pk
        for row in rows
        if row.detached_from_pk is not None and row.detached_from_pk not in ids
    }
    if elsewhere:
        ids.update(q.public_ids(conn, elsewhere))
    children: dict[int | None, list[q.NamedRow]] = {}
    for row in rows:
        children.setdefault(row.parent_pk, []).append(row)
    tops = [row for row in rows if row.parent_pk is None and row.detached is None]
    for place in PLACES:
        tops.extend(row for row in rows if row.parent_pk is None and row.detached == place)
    out: list[NodeRecord] = []
    stack = list(reversed(tops))
    while stack:
        row = stack.pop()
        state = ws.state_after(conn, schema, row.pk).state if row.detached is not None else None
        out.append(
            NodeRecord(
                id=row.id,
                parent=None if row.parent_pk is None else ids[row.parent_pk],
                role=row.role,
                name=row.name,
                content=row.content,
                enabled=bool(row.enabled),
                created_at=q.timestamp(row.created_at),
                metadata=q.decode_object(row.metadata),
                delta=json.loads(row.delta) if row.delta else [],
                active_child=None if row.active_child_pk is None else ids[row.active_child_pk],
                detached=row.detached,
                detached_from=(
                    None if row.detached_from_pk is None else ids.get(row.detached_from_pk)
                ),
                detached_at=None if row.detached_at is None else q.timestamp(row.detached_at),
                detached_state=state,
            )
        )
        stack.extend(reversed(children.get(row.pk, [])))
    if len(out) != len(rows):
        raise StorageError(
            f"session {record.id}: {len(rows) - len(out)} node(s) hang under no root"
        )
    stored = conn.execute(
        select(nodes.c.id, traces.c.messages, traces.c.messages_hash, traces.c.document)
        .join_from(traces, nodes, nodes.c.pk == traces.c.node_pk)
        .where(nodes.c.session_pk == record.pk)
        .order_by(nodes.c.pk)
    ).all()
    order = {node.id: i for i, node in enumerate(out)}
    found = sorted(
        (
            StoredTrace(
                row.id, json.loads(row.messages), row.messages_hash, json.loads(row.document)
            )
            for row in stored
        ),
        key=lambda trace: order[trace.node_id],
    )
    named: list[str] = []
    for trace in found:
        named.extend(part["blob"] for part in trace.parts if "blob" in part)
        named.extend(_hashes(trace.document))
    texts = tr.get_blobs(conn, named)
    return SessionDump(
        session=record.session,
        state_schema=json.loads(record.schema_json) if record.schema_json else None,
        documents=docs.listed(conn, record.pk, None),
        nodes=out,
        traces=found,
        blobs={digest: texts[digest] for digest in sorted(texts)},
        names=marks(conn, record.pk),
    )
