"""The tree editor ("god view"): the machinery under every edit, and the journal
that takes any step back.

The operations themselves are typed commands, one class each, in
:mod:`mnemosyne.edits` (prune, graft, inject, rewrite, toggle, delete, restore,
move, copy, checkout); each applies itself through :class:`Editor`, which works on
the state of one :class:`~mnemosyne.SessionTransaction` (one database transaction
with the tree, HEAD, active-child pointers, keyframes and the journal). ``purge``
(the trash emptied for good, the one irreversible operation) and undo/redo are
here.

World state follows: a moved, grafted, copied, injected or toggled part is replayed
on its new base (its keyframes rebuilt, every delta checked; one that no longer
applies refuses the edit, naming the node and the operation).

The journal (one table, per session, shared by every process) keeps, for each edit,
the before and after images of every row it touched and of HEAD; undo writes the
before images back, redo the after ones. Before either, the rows are compared with
what the journal expects: if something changed outside the journal, the journal is
cleared and the caller is told why, rather than undoing into a wrong state. Every
15 entries, when none is left, or when more than 30 nodes were touched since the
last one, an entry also carries a snapshot of the affected part (the after images of
every node touched since the previous snapshot). At most 50 entries are kept.

A turn is one entry too (:meth:`Editor.growth`, which the turn's commit opens): undo
sends the nodes it added to the trash and HEAD back, redo brings them back. Growing
the tree any other way (the editor's ``add``, imports) is a breakpoint: it clears the
journal.

The session's names (tags and branches, :mod:`mnemosyne.refs`) are journaled whole
when an entry changes them (:meth:`Editor.rename_nodes`, a turn moving a branch): the
entry's ``refs`` holds them before and after.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from sqlalchemy import delete, func, insert, select, update

from . import _head
from . import _queries as q
from . import _refs as names
from . import _worldstate as ws
from ._checks import check_content, check_delta, check_name, check_role, new_id
from ._schema import journal, nodes, sessions
from .errors import InvalidDeltaError, InvalidOperationError
from .state.delta import State

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from ._transaction import TransactionState
    from .state.schema import StateSchema

__all__ = ["EditResult", "Editor", "JournalEntry", "JournalMismatchError"]

MAX_ENTRIES = 50
SNAPSHOT_EVERY = 15
SNAPSHOT_TOUCHED = 30

# The columns of a node's row image, in the order images are kept.
IMAGE_COLUMNS = (
    "pk",
    "id",
    "session_pk",
    "parent_pk",
    "role",
    "name",
    "content",
    "enabled",
    "created_at",
    "metadata",
    "delta",
    "active_child_pk",
    "detached",
    "detached_from_pk",
    "detached_at",
)
_DETACHED = IMAGE_COLUMNS.index("detached")
Place = Literal["fragment", "trash"]


class _Batch(NamedTuple):
    """An open batch of edits: the recorder of its one journal entry, the actions so far."""

    recorder: Recorder
    actions: list[str]


class _Growth(NamedTuple):
    """Journaled growth under way (a turn): the recorder of its entry, the new nodes."""

    recorder: Recorder
    created: list[int]


class NodePlace(NamedTuple):
    """Where a node hangs, as :meth:`Editor.row` reads it."""

    pk: int
    id: str
    parent_pk: int | None
    active_child_pk: int | None
    detached: Place | None
    detached_from_pk: int | None
    enabled: bool


class JournalMismatchError(InvalidOperationError):
    """The journal disagreed with the tree; it was cleared (nothing else changed)."""

    code = "journal_mismatch"


@dataclass(frozen=True, slots=True)
class EditResult:
    """What an edit (or an undo/redo) did."""

    action: str
    node_id: str | None
    head_id: str | None
    head_moved: bool = False
    created: list[str] = field(default_factory=list)
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "node_id": self.node_id,
            "head_id": self.head_id,
            "head_moved": self.head_moved,
            "created": self.created,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One entry of the undo journal, for ``history``."""

    position: int
    action: str
    at: datetime
    current: bool
    undone: bool
    snapshot: bool
    touched: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "action": self.action,
            "at": self.at.isoformat(),
            "current": self.current,
            "undone": self.undone,
            "snapshot": self.snapshot,
            "touched": self.touched,
        }


def _now() -> datetime:
    return datetime.now(UTC)


def _image(row: q.NamedRow) -> list[Any]:
    """A row of IMAGE_COLUMNS as the journal keeps it: a list in that order, times as
    text (comparable and JSON-ready), ``enabled`` a bool."""
    values = row._asdict()
    for name in ("created_at", "detached_at"):
        if values[name] is not None:
            values[name] = q.time_text(values[name])
    values["enabled"] = bool(values["enabled"])
    return [values[name] for name in IMAGE_COLUMNS]


def images(conn: Connection, pks: Iterable[int]) -> dict[int, list[Any] | None]:
    """Row images of nodes (``None`` for a pk with no row)."""
    wanted = list(dict.fromkeys(pks))
    out: dict[int, list[Any] | None] = dict.fromkeys(wanted)
    columns = [q.type_coerce_text(nodes.c[name]) for name in IMAGE_COLUMNS]
    for i in range(0, len(wanted), 500):
        query = select(*columns).where(nodes.c.pk.in_(wanted[i : i + 500]))
        for row in conn.execute(query):
            out[row.pk] = _image(row)
    return out


def write_image(conn: Connection, pk: int, image: list[Any] | None, *, exists: bool) -> None:
    """Make the row of ``pk`` (``exists``: whether it has one now) what ``image`` says
    (``None``: no row)."""
    if image is None:
        if exists:
            conn.execute(delete(nodes).where(nodes.c.pk == pk))
        return
    values = dict(zip(IMAGE_COLUMNS, image, strict=True))
    for name in ("created_at", "detached_at"):
        if values[name] is not None:
            values[name] = q.text_time(values[name])
    if exists:
        conn.execute(update(nodes).where(nodes.c.pk == pk).values(**values))
    else:
        conn.execute(insert(nodes).values(**values))


class Recorder:
    """Collects what one edit touches, then writes its journal entry."""

    def __init__(self, conn: Connection, session_pk: int, head_pk: int | None) -> None:
        self.conn = conn
        self.session_pk = session_pk
        self.before: dict[int, list[Any] | None] = {}
        self.head_before = head_pk
        self.refs_before: list[names.RefRow] | None = None
        self.keeps_head = False  # an entry that only names nodes: undo leaves HEAD be

    def touch_refs(self) -> list[names.RefRow]:
        """Remember the session's names as they are, before they change (the first
        time: a batch keeps what they were when it began); what they were."""
        if self.refs_before is None:
            self.refs_before = names.snapshot(self.conn, self.session_pk)
        return self.refs_before

    def touch(self, *pks: int | None) -> None:
        """Remember the rows of ``pks`` as they are, before they change."""
        fresh = [pk for pk in pks if pk is not None and pk not in self.before]
        if fresh:
            self.before.update(images(self.conn, fresh))

    def created(self, pk: int) -> None:
        self.before.setdefault(pk, None)

    def write(self, action: str, head_after: int | None, position: int) -> int:
        """Write the entry after ``position`` (dropping any undone ones); its position."""
        after = images(self.conn, self.before)
        changed = {
            str(pk): [self.before[pk], after[pk]]
            for pk in self.before
            if self.before[pk] != after[pk]
        }
        conn = self.conn
        conn.execute(
            delete(journal).where(
                journal.c.session_pk == self.session_pk, journal.c.position > position
            )
        )
        entries = conn.execute(
            select(journal.c.position, journal.c.snapshot, journal.c.touched)
            .where(journal.c.session_pk == self.session_pk)
            .order_by(journal.c.position.desc())
        ).all()
        since, touched_since = 0, len(changed)
        last_snapshot = None
        for entry_position, snapshot, touched in entries:
            if snapshot:
                last_snapshot = entry_position
                break
            since += 1
            touched_since += touched
        snapshot = last_snapshot is None or since + 1 >= SNAPSHOT_EVERY
        snapshot = snapshot or touched_since > SNAPSHOT_TOUCHED
        payload: dict[str, Any] = {
            "nodes": changed,
            "head": [self.head_before, head_after],
        }
        if self.refs_before is not None:
            refs_after = names.snapshot(conn, self.session_pk)
            if refs_after != self.refs_before:
                payload["refs"] = [self.refs_before, refs_after]
        if self.keeps_head:
            payload["head_kept"] = True
        if snapshot:
            payload["snapshot"] = self._affected_since(last_snapshot, after)
        new_position = position + 1
        conn.execute(
            insert(journal).values(
                session_pk=self.session_pk,
                position=new_position,
                action=action,
                at=_now(),
                snapshot=snapshot,
                touched=len(changed),
                payload=json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
            )
        )
        oldest = conn.execute(
            select(journal.c.position)
            .where(journal.c.session_pk == self.session_pk)
            .order_by(journal.c.position.desc())
            .offset(MAX_ENTRIES)
            .limit(1)
        ).scalar()
        if oldest is not None:
            conn.execute(
                delete(journal).where(
                    journal.c.session_pk == self.session_pk, journal.c.position <= oldest
                )
            )
        return new_position

    def _affected_since(
        self, last_snapshot: int | None, after: dict[int, list[Any] | None]
    ) -> dict[str, list[Any] | None]:
        """After images of every node touched since the last snapshot (this edit's too)."""
        query = select(journal.c.payload).where(journal.c.session_pk == self.session_pk)
        if last_snapshot is not None:
            query = query.where(journal.c.position > last_snapshot)
        touched = {
            int(pk) for (text,) in self.conn.execute(query) for pk in json.loads(text)["nodes"]
        }
        extra = images(self.conn, touched - after.keys())
        return {str(pk): image for pk, image in {**extra, **after}.items()}


def clear_journal(conn: Connection, session_pk: int) -> None:
    conn.execute(delete(journal).where(journal.c.session_pk == session_pk))
    conn.execute(update(sessions).where(sessions.c.pk == session_pk).values(journal_position=0))


def journal_position(conn: Connection, session_pk: int) -> int:
    position: int = conn.execute(
        select(sessions.c.journal_position).where(sessions.c.pk == session_pk)
    ).scalar_one()
    return position


def set_position(conn: Connection, session_pk: int, position: int) -> None:
    conn.execute(
        update(sessions).where(sessions.c.pk == session_pk).values(journal_position=position)
    )


def entry_at(conn: Connection, session_pk: int, position: int) -> tuple[str, dict[str, Any]] | None:
    row = conn.execute(
        select(journal.c.action, journal.c.payload).where(
            journal.c.session_pk == session_pk, journal.c.position == position
        )
    ).first()
    return None if row is None else (row.action, json.loads(row.payload))


def history(conn: Connection, session_pk: int) -> list[JournalEntry]:
    position = journal_position(conn, session_pk)
    rows = conn.execute(
        select(
            journal.c.position,
            journal.c.action,
            q.type_coerce_text(journal.c.at),
            journal.c.snapshot,
            journal.c.touched,
        )
        .where(journal.c.session_pk == session_pk)
        .order_by(journal.c.position)
    ).all()
    return [
        JournalEntry(
            row.position,
            row.action,
            q.timestamp(row.at),
            row.position == position,
            row.position > position,
            bool(row.snapshot),
            row.touched,
        )
        for row in rows
    ]


def states_before(
    conn: Connection, schema: StateSchema, pks: Iterable[int]
) -> dict[int, State | None]:
    """The states after existing nodes, before an edit changes anything (``None`` for
    one whose state cannot be computed where it is)."""
    out: dict[int, State | None] = {}
    for pk in pks:
        try:
            out[pk] = ws.state_after(conn, schema, pk).state
        except InvalidDeltaError:
            out[pk] = None
    return out


def settle_all(
    conn: Connection, schema: StateSchema, before: dict[int, State | None], every: int
) -> None:
    """Settle every node of ``before`` that hangs in the tree, ancestors first (a node's
    new state is computed from its parent's, which must be right already). Detached
    subtrees keep the states they had where they last hung: their deltas need not
    apply anywhere else."""
    depth: dict[int, int] = {}
    for pk in before:
        place = q.placement(conn, pk)
        if place is not None:
            below_top, detached = place
            if detached is None:
                depth[pk] = below_top
    for pk in sorted(depth, key=lambda key: (depth[key], key)):
        ws.settle(conn, schema, pk, every, before[pk])


def repair_active_pointers(conn: Connection, session_pk: int, touched: Iterable[int]) -> None:
    """A safety net after rows were rewritten: an active-child pointer (of a touched
    node, or to one) that does not name a child of its node points at the node's last
    child (or at nothing)."""
    keys = list(touched)
    child = nodes.alias("child")
    stray = select(nodes.c.pk).where(
        nodes.c.session_pk == session_pk,
        nodes.c.active_child_pk.is_not(None),
        nodes.c.pk.in_(keys) | nodes.c.active_child_pk.in_(keys),
        ~select(child.c.pk)
        .where(child.c.pk == nodes.c.active_child_pk, child.c.parent_pk == nodes.c.pk)
        .exists(),
    )
    for (pk,) in conn.execute(stray).all():
        last = conn.execute(select(func.max(nodes.c.pk)).where(nodes.c.parent_pk == pk)).scalar()
        conn.execute(update(nodes).where(nodes.c.pk == pk).values(active_child_pk=last))


class Editor:
    """The tree editor over one transaction: the primitives the edit commands
    (:mod:`mnemosyne.edits`) are written with, the batch that makes several of them
    one journal entry, and undo, redo and purge.

    It holds no copy of the transaction: it works on the
    :class:`~mnemosyne._transaction.TransactionState` it is given, which
    :class:`~mnemosyne.SessionTransaction` shares.
    """

    def __init__(self, state: TransactionState) -> None:
        self._state = state
        self._batch: _Batch | None = None
        self._growth: _Growth | None = None
        self._grows_from: tuple[int | None, int | None] = (None, None)
        # Inside a growth: HEAD as the growth has it (where it began, then each new
        # node): a turn's commit may move HEAD back to where it grows the tree first.
        self._follow: int | None = None

    @property
    def conn(self) -> Connection:
        return self._state.conn

    @property
    def head_id(self) -> str | None:
        """HEAD as it stands in the transaction."""
        return self._state.head_id

    # -- reading the tree -----------------------------------------------------------

    def resolve(self, ref: str) -> tuple[int, str]:
        """The (pk, id) of a node of the session by its name (an id or unique prefix,
        ``HEAD``, ``HEAD~N``...: :mod:`mnemosyne.nodenames`), HEAD as it stands in the
        transaction."""
        state = self._state
        return q.resolve_node(state.conn, state.record, ref, (state.head_pk, state.head_id))

    def row(self, pk: int) -> NodePlace:
        """A node's place: ``pk, id, parent_pk, active_child_pk, detached,
        detached_from_pk, enabled``."""
        row = self._state.conn.execute(
            select(
                nodes.c.pk,
                nodes.c.id,
                nodes.c.parent_pk,
                nodes.c.active_child_pk,
                nodes.c.detached,
                nodes.c.detached_from_pk,
                nodes.c.enabled,
            ).where(nodes.c.pk == pk)
        ).one()
        return NodePlace._make(row)

    def children(self, pk: int) -> list[int]:
        """A node's children, in order."""
        return list(
            self._state.conn.execute(
                select(nodes.c.pk).where(nodes.c.parent_pk == pk).order_by(nodes.c.pk)
            ).scalars()
        )

    def exists(self, pk: int) -> bool:
        """Whether node ``pk`` has a row."""
        query = select(nodes.c.pk).where(nodes.c.pk == pk)
        return self._state.conn.execute(query).first() is not None

    def placement(self, pk: int) -> Place | None:
        """Where the subtree holding ``pk`` is parked (``None``: in the tree)."""
        return q.top_detached(self._state.conn, pk)  # type: ignore[return-value]

    def require_attached(self, pk: int, node_id: str, what: str) -> None:
        """Refuse a node in a fragment or in the trash (``what`` names its role)."""
        place = self.placement(pk)
        if place is not None:
            where = "a fragment" if place == "fragment" else "the trash"
            hint = "graft it first" if place == "fragment" else "restore it first"
            raise InvalidOperationError(f"{what} {node_id} is in {where}: {hint}")

    def is_below(self, pk: int, top: int) -> bool:
        """Whether ``pk`` is ``top`` itself or a node under it."""
        return any(keys.pk == top for keys in q.path_keys(self._state.conn, pk))

    def subtree(self, pk: int) -> list[int]:
        """A node and every node below it, parents first."""
        return [key for key, _ in ws.subtree_keys(self._state.conn, pk)]

    def active_branch(self, pk: int) -> list[int]:
        """A node and its active children down to a leaf."""
        keys: list[int] = []
        current: int | None = pk
        while current is not None:
            keys.append(current)
            current = self.row(current).active_child_pk
        return keys

    def images(self, pks: Iterable[int]) -> dict[int, list[Any] | None]:
        """Row images of nodes (see :data:`IMAGE_COLUMNS`)."""
        return images(self._state.conn, pks)

    def states_before(self, pks: Iterable[int]) -> dict[int, State | None]:
        """The states after nodes before the edit changes them (for :meth:`finish`)."""
        return states_before(self._state.conn, self._state.schema, pks)

    # -- changing the tree ----------------------------------------------------------------

    def update(self, pk: int, **values: Any) -> None:
        """Set columns of a node's row."""
        self._state.conn.execute(update(nodes).where(nodes.c.pk == pk).values(**values))

    def attach(self, pk: int, parent_pk: int | None) -> None:
        """Hang node ``pk`` (the top of a subtree) under ``parent_pk`` (``None``: as a
        root), no longer parked; a parent with no active child takes it."""
        self.update(pk, parent_pk=parent_pk, detached=None, detached_from_pk=None, detached_at=None)
        if parent_pk is not None and self.row(parent_pk).active_child_pk is None:
            self.update(parent_pk, active_child_pk=pk)

    def detach(self, ref: str, place: Place, action: str) -> EditResult:
        """Take a node's subtree out of the tree into a fragment or the trash."""
        pk, node_id = self.resolve(ref)
        self.require_attached(pk, node_id, "node")
        recorder = self.begin()
        row = self.row(pk)
        recorder.touch(pk, row.parent_pk)
        # A detached subtree keeps the states it had where it hung: its top gets a
        # keyframe of its state there (the rest of its keyframes stay right).
        state = ws.state_after(self._state.conn, self._state.schema, pk).state
        ws.replace_keyframe(self._state.conn, pk, state)
        self.update(
            pk, parent_pk=None, detached=place, detached_from_pk=row.parent_pk, detached_at=_now()
        )
        self.repair_active(row.parent_pk)
        return self.finish(recorder, action, node_id)

    def repair_active(self, parent_pk: int | None) -> None:
        """A parent whose active child left it points at its last remaining child."""
        if parent_pk is None:
            return
        row = self.row(parent_pk)
        kids = self.children(parent_pk)
        if row.active_child_pk not in kids:
            self.update(parent_pk, active_child_pk=kids[-1] if kids else None)

    def create_node(
        self,
        parent_pk: int | None,
        role: str,
        content: str,
        name: str | None,
        delta: list[dict[str, Any]] | None,
        *,
        enabled: bool = True,
        metadata: dict[str, Any] | None = None,
        check: bool = True,
    ) -> tuple[int, str]:
        """A new node under ``parent_pk``: its (pk, id). Its state is not settled
        here: pass it to :meth:`finish`."""
        node_id = new_id()
        if check:
            role, content, name = check_role(role), check_content(content), check_name(name)
        operations = check_delta(delta)
        pk = self._state.conn.execute(
            insert(nodes)
            .values(
                id=node_id,
                session_pk=self._state.record.pk,
                parent_pk=parent_pk,
                role=role,
                name=name,
                content=content,
                enabled=bool(enabled),
                created_at=_now(),
                metadata=q.encode_json(metadata or {}),
                delta=q.encode_json(operations) if operations else None,
                active_child_pk=None,
            )
            .returning(nodes.c.pk)
        ).scalar_one()
        return pk, node_id

    def move_head(self, pk: int, node_id: str) -> None:
        """HEAD to a node in the tree (a checkout: not journaled)."""
        _head.checkout(self._state, pk, node_id)

    # -- the journal entry of an edit ------------------------------------------------------

    def begin(self) -> Recorder:
        """The recorder of an edit about to change rows (the batch's, inside one)."""
        # The active pointers above HEAD are not journaled: undo and redo restore HEAD
        # and repoint its path, which is what those pointers always are.
        if self._batch is not None:
            return self._batch.recorder
        return Recorder(self._state.conn, self._state.record.pk, self._state.head_pk)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Edits made inside are one journal entry: one undo takes them all back.

        The journal entry (action ``batch``, or the one edit's name) is written when
        the block ends without an error; an error leaves the transaction to roll back.
        """
        if self._batch is not None:
            raise InvalidOperationError("edit batches do not nest")
        state = self._state
        self._batch = _Batch(Recorder(state.conn, state.record.pk, state.head_pk), [])
        try:
            yield
            recorder, actions = self._batch
        finally:
            self._batch = None
        if actions:
            action = actions[0] if len(actions) == 1 else "batch"
            position = journal_position(state.conn, state.record.pk)
            new_position = recorder.write(action, state.head_pk, position)
            set_position(state.conn, state.record.pk, new_position)

    @contextmanager
    def growth(self, action: str) -> Iterator[None]:
        """Nodes added inside (:meth:`growing`, :meth:`grown`) are one journal entry,
        ``action``: undo sends them to the trash and HEAD back where it was when the
        block began, redo brings them back. Entries before it stay undoable.

        The entry holds the top of each new subtree twice: as it hangs in the tree and
        as it lies in the trash (its image read back from a real trashing, so that the
        journal compares like with like), and the parent whose active child it became.
        """
        if self._batch is not None or self._growth is not None:
            raise InvalidOperationError("journaled growth does not nest, nor go in a batch")
        state = self._state
        self._growth = _Growth(Recorder(state.conn, state.record.pk, state.head_pk), [])
        self._follow = state.head_pk
        try:
            yield
            growth = self._growth
        finally:
            self._growth = None
            self._follow = None
        if growth.created:
            self._write_growth(action, growth)

    def growing(self, parent_pk: int | None) -> None:
        """Before a node is added under ``parent_pk``: inside :meth:`growth`, the parent
        is remembered as it was; outside, growing the tree is a breakpoint (the journal
        is cleared)."""
        if self._growth is None:
            self.clear_journal()
        else:
            self._growth.recorder.touch(parent_pk)
        self._grows_from = (self._state.head_pk, parent_pk)

    def grown(self, pk: int) -> None:
        """A node was added (inside :meth:`growth`, it is part of the entry). A branch
        whose tip was HEAD (inside a growth: where the growth began, then its last new
        node) follows it when the node goes under the tip or beside it (a reroll of the
        tip): :mod:`mnemosyne.refs`."""
        head_before, parent_pk = self._grows_from
        self._grows_from = (None, None)
        if self._growth is not None:
            self._growth.created.append(pk)
            head_before, self._follow = self._follow, pk
        state = self._state
        conn, session_pk = state.conn, state.record.pk
        if head_before is None:
            return
        if state.has_branches is None:
            state.has_branches = names.any_branch(conn, session_pk)
        if not state.has_branches or not names.branches_at(conn, session_pk, head_before):
            return
        if parent_pk != head_before and parent_pk != self.row(head_before).parent_pk:
            return
        if self._growth is not None:
            self._growth.recorder.touch_refs()
        names.follow_head(conn, session_pk, head_before, pk)

    # -- names on nodes (tags and branches) --------------------------------------------

    def rename_nodes(self, action: str, change: Callable[[Connection], str | None]) -> EditResult:
        """A change of the session's names (``change``, which returns the node it is
        about) as one journal entry ``action``; HEAD and the tree stay as they are."""
        state = self._state
        recorder = self.begin()
        before = recorder.touch_refs()
        node_id = change(state.conn)
        state.has_branches = None  # read again by the next node added
        after = names.snapshot(state.conn, state.record.pk)
        if self._batch is not None:
            self._batch.actions.append(action)
        elif after == before:
            return EditResult(action, node_id, state.head_id)  # nothing changed: no step
        else:
            recorder.keeps_head = True
            position = journal_position(state.conn, state.record.pk)
            set_position(
                state.conn, state.record.pk, recorder.write(action, state.head_pk, position)
            )
        state.grew()
        differ = {tuple(row[:3]) for row in before} ^ {tuple(row[:3]) for row in after}
        state.event.note("refs", action, (pk for _, _, pk in differ))  # the nodes renamed
        return EditResult(action, node_id, state.head_id)

    def _write_growth(self, action: str, growth: _Growth) -> None:
        state = self._state
        conn, recorder = state.conn, growth.recorder
        created = set(growth.created)
        for pk in growth.created:
            parent_pk = self.row(pk).parent_pk
            if parent_pk in created:  # below a new node: it comes and goes with its top
                recorder.before.pop(pk, None)
                continue
            self.update(
                pk, parent_pk=None, detached="trash", detached_from_pk=parent_pk, detached_at=_now()
            )
            recorder.before[pk] = images(conn, [pk])[pk]
            self.update(
                pk, parent_pk=parent_pk, detached=None, detached_from_pk=None, detached_at=None
            )
        position = journal_position(conn, state.record.pk)
        set_position(conn, state.record.pk, recorder.write(action, state.head_pk, position))
        state.grew()
        state.event.note("turn", action, recorder.before)

    def finish(
        self,
        recorder: Recorder,
        action: str,
        node_id: str | None,
        settle: dict[int, State | None] | None = None,
        created: list[str] | None = None,
    ) -> EditResult:
        """The end of every edit: HEAD back into the tree if it left it, the active
        path repointed, the states of ``settle`` (from :meth:`states_before`; ``None``
        for a new node) recomputed on their new base, every delta checked, the journal
        entry written (or left to the batch)."""
        state = self._state
        before_head = state.head_pk
        new_head, note = _head.after_edit(state, recorder.touch)
        if settle:
            settle_all(state.conn, state.schema, settle, state.every)
        state.set_head(new_head)
        if self._batch is not None:
            self._batch.actions.append(action)
        else:
            position = journal_position(state.conn, state.record.pk)
            new_position = recorder.write(action, new_head, position)
            set_position(state.conn, state.record.pk, new_position)
        state.changed()
        state.event.note("edit", action, recorder.before)
        state.event.add(created or ())  # the event lists them as added, not as changed
        moved = new_head != before_head
        return EditResult(action, node_id, state.head_id, moved, created or [], note)

    # -- undo and redo ---------------------------------------------------------------------

    def undo(self) -> EditResult:
        """Take back the last edit. Raises InvalidOperationError if there is none."""
        return self._travel(-1)

    def redo(self) -> EditResult:
        """Do again the last edit taken back."""
        return self._travel(+1)

    def _travel(self, step: int) -> EditResult:
        state = self._state
        conn, session_pk = state.conn, state.record.pk
        position = journal_position(conn, session_pk)
        target = position if step < 0 else position + 1
        found = entry_at(conn, session_pk, target)
        if found is None:
            word = "undo" if step < 0 else "redo"
            raise InvalidOperationError(f"nothing to {word} in session {state.record.id}")
        action, payload = found
        expect, write = (1, 0) if step < 0 else (0, 1)
        changed = {int(pk): images_pair for pk, images_pair in payload["nodes"].items()}
        current = images(conn, changed)
        named = payload.get("refs")
        if named is not None and names.snapshot(conn, session_pk) != named[expect]:
            raise JournalMismatchError(
                f"the undo journal of session {state.record.id} no longer matches its tags "
                "and branches (they were changed outside it); it was cleared and nothing "
                "was undone"
            )
        for pk, pair in changed.items():
            if not _same(current[pk], pair[expect]):
                raise JournalMismatchError(
                    f"the undo journal of session {state.record.id} no longer matches the tree "
                    f"(node {(pair[expect] or pair[1 - expect] or ['?', '?'])[1]} was changed "
                    "outside it); it was cleared and nothing was undone"
                )
        existing = [pk for pk, row in current.items() if row is not None]
        before = states_before(conn, state.schema, existing)
        for pk, pair in changed.items():
            write_image(conn, pk, pair[write], exists=current[pk] is not None)
            # A node leaving the tree (a turn undone) keeps the state it had where it
            # hung, as a detached top always does: a keyframe of it.
            now, then, where = current[pk], pair[write], before.get(pk)
            leaves = (
                now is not None and now[_DETACHED] is None and then is not None and then[_DETACHED]
            )
            if leaves and where is not None:
                ws.replace_keyframe(conn, pk, where)
        repair_active_pointers(conn, session_pk, changed)
        if named is not None:
            names.restore(conn, session_pk, named[write])
            state.has_branches = None
        new_head = state.head_pk if payload.get("head_kept") else payload["head"][write]
        state.set_head(new_head)
        if new_head is not None:
            _head.point_path_at(state, new_head)
        # Rows the edit had deleted come back with no state to compare: settle them too.
        before.update({pk: None for pk in changed if current[pk] is None})
        settle_all(conn, state.schema, before, state.every)
        set_position(conn, session_pk, position + step)
        state.changed()
        word = "undo" if step < 0 else "redo"
        state.event.note(word, action, changed)
        # Nodes it brings back to life (a copy or an injection redone) are added ones.
        state.event.add(pair[write][1] for pk, pair in changed.items() if current[pk] is None)
        return EditResult(f"{word} {action}", None, state.head_id, True)

    def purge(self) -> int:
        """Empty the trash for good; how many nodes were deleted. Irreversible: it
        clears the journal too."""
        conn, session_pk = self._state.conn, self._state.record.pk
        tops = conn.execute(
            select(nodes.c.pk).where(nodes.c.session_pk == session_pk, nodes.c.detached == "trash")
        ).scalars()
        keys = [key for top in list(tops) for key in self.subtree(top)]
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            conn.execute(update(nodes).where(nodes.c.pk.in_(chunk)).values(active_child_pk=None))
        for i in range(0, len(keys), 500):
            conn.execute(delete(nodes).where(nodes.c.pk.in_(keys[i : i + 500])))
        clear_journal(conn, session_pk)
        self._state.changed()
        self._state.event.note("purge")
        return len(keys)

    def history(self) -> list[JournalEntry]:
        """The journal, oldest first (``current``: the last applied entry)."""
        return history(self._state.conn, self._state.record.pk)

    def clear_journal(self) -> None:
        """A breakpoint: growing the tree forgets what could be undone.

        On every append, so one statement when there is nothing to forget: a
        position other than 0 always names an entry, so no entry deleted means the
        position is 0 already.
        """
        conn, session_pk = self._state.conn, self._state.record.pk
        gone = conn.execute(delete(journal).where(journal.c.session_pk == session_pk))
        if gone.rowcount:
            set_position(conn, session_pk, 0)

    def drop_journal(self) -> None:
        """Clear the journal as a change of its own (the version moves): what follows
        a journal that disagreed with the tree."""
        self.clear_journal()
        self._state.changed()


def _same(a: list[Any] | None, b: list[Any] | None) -> bool:
    """Rows agree on what the journal guards: everything but the active-child pointer
    (moving HEAD repoints it without being an edit)."""
    if a is None or b is None:
        return a is b
    return a[:11] == b[:11] and a[12:] == b[12:]
