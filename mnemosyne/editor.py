"""The tree editor ("god view"): reshape a session's tree and take back any step.

Operations (each inside one :class:`~mnemosyne.SessionTransaction`, so one database
transaction with the tree, HEAD, active-child pointers, keyframes and the journal):

- ``prune``: detach a subtree as a *fragment*; ``graft``: attach a fragment or a
  subtree under another node (a cycle is refused);
- ``inject``: a new node between a node and its active child;
- ``rewrite``: change a node's text in place; ``toggle``: enable/disable a node;
- ``delete``: move a subtree to the *trash*; ``restore``: put it back where it hung;
  ``purge``: empty the trash for good (the one irreversible operation);
- ``move``: re-parent one node alone (its children go to its former parent);
- ``copy``: duplicate a node with its active branch (or its whole subtree) under
  another node.

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
Growing the tree (append, add_sibling) is a breakpoint: it clears the journal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import delete, func, insert, select, update

from . import _queries as q
from . import _worldstate as ws
from ._schema import journal, nodes, sessions
from .errors import InvalidDeltaError, InvalidOperationError

if TYPE_CHECKING:
    from sqlalchemy import Connection

    from .state.schema import StateSchema

__all__ = ["EditResult", "JournalEntry", "JournalMismatchError"]

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
Place = Literal["fragment", "trash"]


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


def _image(row: Any) -> list[Any]:
    image = list(row)
    for i in (8, 14):  # times as text, comparable and JSON-ready
        if image[i] is not None and not isinstance(image[i], str):
            image[i] = image[i].astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    image[7] = bool(image[7])
    return image


def images(conn: Connection, pks: Iterable[int]) -> dict[int, list[Any] | None]:
    """Row images of nodes (``None`` for a pk with no row)."""
    wanted = list(dict.fromkeys(pks))
    out: dict[int, list[Any] | None] = dict.fromkeys(wanted)
    columns = [q.type_coerce_text(nodes.c[name]) for name in IMAGE_COLUMNS]
    for i in range(0, len(wanted), 500):
        query = select(*columns).where(nodes.c.pk.in_(wanted[i : i + 500]))
        for row in conn.execute(query):
            out[row[0]] = _image(row)
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
            values[name] = datetime.fromisoformat(values[name]).replace(tzinfo=UTC)
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
    return conn.execute(
        select(sessions.c.journal_position).where(sessions.c.pk == session_pk)
    ).scalar_one()


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
    return None if row is None else (row[0], json.loads(row[1]))


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
            row[0],
            row[1],
            q.timestamp(row[2]),
            row[0] == position,
            row[0] > position,
            bool(row[3]),
            row[4],
        )
        for row in rows
    ]


def states_before(
    conn: Connection, schema: StateSchema, pks: Iterable[int]
) -> dict[int, ws.State | None]:
    """The states after existing nodes, before an edit changes anything (``None`` for
    one whose state cannot be computed where it is)."""
    out: dict[int, ws.State | None] = {}
    for pk in pks:
        try:
            out[pk] = ws.state_after(conn, schema, pk).state
        except InvalidDeltaError:
            out[pk] = None
    return out


def settle_all(
    conn: Connection, schema: StateSchema, before: dict[int, ws.State | None], every: int
) -> None:
    """Settle every node of ``before`` that hangs in the tree, ancestors first (a node's
    new state is computed from its parent's, which must be right already). Detached
    subtrees keep the states they had where they last hung: their deltas need not
    apply anywhere else."""
    depth: dict[int, int] = {}
    for pk in before:
        place = q.placement(conn, pk)
        if place is not None and place[1] is None:
            depth[pk] = place[0]
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


class EditorMixin:
    """The editor's operations on :class:`~mnemosyne.SessionTransaction`."""

    # Provided by SessionTransaction.
    _conn: Connection
    _record: q.SessionRecord
    _schema: StateSchema
    _every: int
    _head_pk: int | None
    _head_id: str | None
    _dirty: bool
    _batch: tuple[Recorder, list[str]] | None = None

    def _point_path_at(self, pk: int, before_change: Any = None) -> None: ...

    # -- helpers ----------------------------------------------------------------

    def _row(self, pk: int) -> Any:
        return self._conn.execute(
            select(
                nodes.c.pk,
                nodes.c.id,
                nodes.c.parent_pk,
                nodes.c.active_child_pk,
                nodes.c.detached,
                nodes.c.detached_from_pk,
            ).where(nodes.c.pk == pk)
        ).one()

    def _resolve(self, ref: str) -> tuple[int, str]:
        return q.resolve_node(self._conn, self._record, ref)

    def _attached(self, pk: int, node_id: str, what: str) -> None:
        place = q.top_detached(self._conn, pk)
        if place is not None:
            where = "a fragment" if place == "fragment" else "the trash"
            hint = "graft it first" if place == "fragment" else "restore it first"
            raise InvalidOperationError(f"{what} {node_id} is in {where}: {hint}")

    def _children(self, pk: int) -> list[int]:
        return list(
            self._conn.execute(
                select(nodes.c.pk).where(nodes.c.parent_pk == pk).order_by(nodes.c.pk)
            ).scalars()
        )

    def _begin(self) -> Recorder:
        # The active pointers above HEAD are not journaled: undo and redo restore HEAD
        # and repoint its path, which is what those pointers always are.
        if self._batch is not None:
            return self._batch[0]
        return Recorder(self._conn, self._record.pk, self._head_pk)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Edits made inside are one journal entry: one undo takes them all back.

        The journal entry (action ``batch``, or the one edit's name) is written when
        the block ends without an error; an error leaves the transaction to roll back.
        """
        if self._batch is not None:
            raise InvalidOperationError("edit batches do not nest")
        self._batch = (Recorder(self._conn, self._record.pk, self._head_pk), [])
        try:
            yield
            recorder, actions = self._batch
        finally:
            self._batch = None
        if actions:
            action = actions[0] if len(actions) == 1 else "batch"
            position = journal_position(self._conn, self._record.pk)
            new_position = recorder.write(action, self._head_pk, position)
            set_position(self._conn, self._record.pk, new_position)

    def _finish_edit(
        self,
        recorder: Recorder,
        action: str,
        node_id: str | None,
        settle: dict[int, ws.State | None] | None = None,
        created: list[str] | None = None,
    ) -> EditResult:
        """HEAD back into the tree if it left it, the active path repointed, keyframes
        rebuilt (every delta checked on its new base), the journal entry written."""
        before_head = self._head_pk
        head = self._head_pk
        note = ""
        if head is not None and q.top_detached(self._conn, head) is not None:
            head = self._nearest_attached(head)
            note = "HEAD was taken out of the tree; it moved to the nearest node still in it"
        if head is not None:
            self._point_path_at(head, recorder.touch)
        if settle:
            settle_all(self._conn, self._schema, settle, self._every)
        self._set_head(head)
        if self._batch is not None:
            self._batch[1].append(action)
        else:
            position = journal_position(self._conn, self._record.pk)
            new_position = recorder.write(action, head, position)
            set_position(self._conn, self._record.pk, new_position)
        self._dirty = True
        return EditResult(action, node_id, self._head_id, head != before_head, created or [], note)

    def _set_head(self, pk: int | None) -> None:
        self._head_pk = pk
        self._head_id = (
            None
            if pk is None
            else self._conn.execute(select(nodes.c.id).where(nodes.c.pk == pk)).scalar_one()
        )

    def _nearest_attached(self, pk: int) -> int | None:
        """For a node taken out of the tree: the node its subtree hung under, if that is
        still in the tree; else the leaf of the last root; else None."""
        top = q.path_keys(self._conn, pk)[-1][0]
        home = self._row(top).detached_from_pk
        if home is not None and q.top_detached(self._conn, home) is None:
            return home
        roots = q.sibling_keys(self._conn, self._record, None)
        return q.descend(self._conn, roots[-1]) if roots else None

    def _repair_active(self, parent_pk: int | None) -> None:
        """A parent whose active child left it points at its last remaining child."""
        if parent_pk is None:
            return
        row = self._row(parent_pk)
        kids = self._children(parent_pk)
        if row.active_child_pk not in kids:
            self._conn.execute(
                update(nodes)
                .where(nodes.c.pk == parent_pk)
                .values(active_child_pk=kids[-1] if kids else None)
            )

    def _detach(self, ref: str, place: Place, action: str) -> EditResult:
        pk, node_id = self._resolve(ref)
        self._attached(pk, node_id, "node")
        recorder = self._begin()
        row = self._row(pk)
        recorder.touch(pk, row.parent_pk)
        # A detached subtree keeps the states it had where it hung: its top gets a
        # keyframe of its state there (the rest of its keyframes stay right).
        ws.replace_keyframe(self._conn, pk, ws.state_after(self._conn, self._schema, pk).state)
        self._conn.execute(
            update(nodes)
            .where(nodes.c.pk == pk)
            .values(
                parent_pk=None, detached=place, detached_from_pk=row.parent_pk, detached_at=_now()
            )
        )
        self._repair_active(row.parent_pk)
        return self._finish_edit(recorder, action, node_id)

    def _attach(self, pk: int, parent_pk: int | None) -> None:
        self._conn.execute(
            update(nodes)
            .where(nodes.c.pk == pk)
            .values(parent_pk=parent_pk, detached=None, detached_from_pk=None, detached_at=None)
        )
        if parent_pk is not None:
            parent = self._row(parent_pk)
            if parent.active_child_pk is None:
                self._conn.execute(
                    update(nodes).where(nodes.c.pk == parent_pk).values(active_child_pk=pk)
                )

    # -- the operations ------------------------------------------------------------------

    def prune(self, ref: str) -> EditResult:
        """Detach a node's subtree as a fragment (kept, ready to be grafted)."""
        return self._detach(ref, "fragment", "prune")

    def delete(self, ref: str) -> EditResult:
        """Move a node and its subtree to the trash (restorable until a purge)."""
        return self._detach(ref, "trash", "delete")

    def graft(self, ref: str, onto: str) -> EditResult:
        """Attach a fragment, or move a subtree, under ``onto``; its deltas are replayed
        on the new base.

        Raises:
            InvalidOperationError: a cycle, a target out of the tree, a trashed node.
            InvalidDeltaError: a moved delta does not apply on the new base.
        """
        pk, node_id = self._resolve(ref)
        target, target_id = self._resolve(onto)
        row = self._row(pk)
        if q.top_detached(self._conn, pk) == "trash":
            raise InvalidOperationError(f"node {node_id} is in the trash: restore it first")
        self._attached(target, target_id, "target")
        if any(key == pk for key, _, _ in q.path_keys(self._conn, target)):
            raise InvalidOperationError(
                f"grafting {node_id} under {target_id} would make a cycle: "
                f"{target_id} is {node_id} itself or below it"
            )
        recorder = self._begin()
        recorder.touch(pk, row.parent_pk, target)
        before = states_before(self._conn, self._schema, [pk])
        self._attach(pk, target)
        self._repair_active(row.parent_pk)
        return self._finish_edit(recorder, "graft", node_id, settle=before)

    def inject(
        self,
        after: str,
        role: str,
        content: str,
        *,
        name: str | None = None,
        delta: list[dict[str, Any]] | None = None,
    ) -> EditResult:
        """A new node between ``after`` and its active child (or as its only child)."""
        parent, parent_id = self._resolve(after)
        self._attached(parent, parent_id, "node")
        recorder = self._begin()
        row = self._row(parent)
        child = row.active_child_pk
        recorder.touch(parent, child)
        before = states_before(self._conn, self._schema, [child] if child is not None else [])
        node = self._create_node(parent, role, content, name, delta)
        recorder.created(node[0])
        if child is not None:
            self._conn.execute(update(nodes).where(nodes.c.pk == child).values(parent_pk=node[0]))
            self._conn.execute(
                update(nodes).where(nodes.c.pk == node[0]).values(active_child_pk=child)
            )
        self._conn.execute(
            update(nodes).where(nodes.c.pk == parent).values(active_child_pk=node[0])
        )
        return self._finish_edit(
            recorder, "inject", node[1], settle={node[0]: None, **before}, created=[node[1]]
        )

    def rewrite(self, ref: str, content: str) -> EditResult:
        """Change a node's text in place (the chat's edit forks instead)."""
        from .store import _check_content

        pk, node_id = self._resolve(ref)
        text = _check_content(content)
        recorder = self._begin()
        recorder.touch(pk)
        self._conn.execute(update(nodes).where(nodes.c.pk == pk).values(content=text))
        return self._finish_edit(recorder, "rewrite", node_id)

    def toggle(self, ref: str) -> EditResult:
        """Enable or disable a node: its delta leaves or rejoins every state below it."""
        pk, node_id = self._resolve(ref)
        recorder = self._begin()
        recorder.touch(pk)
        before = states_before(self._conn, self._schema, [pk])
        self._conn.execute(update(nodes).where(nodes.c.pk == pk).values(enabled=~nodes.c.enabled))
        return self._finish_edit(recorder, "toggle", node_id, settle=before)

    def restore(self, ref: str) -> EditResult:
        """Put a trashed subtree back where it hung (or as a root, if it was one)."""
        pk, node_id = self._resolve(ref)
        row = self._row(pk)
        if row.detached != "trash":
            raise InvalidOperationError(f"node {node_id} is not the top of a subtree in the trash")
        home = row.detached_from_pk
        if home is not None and (
            self._conn.execute(select(nodes.c.pk).where(nodes.c.pk == home)).first() is None
            or q.top_detached(self._conn, home) is not None
        ):
            raise InvalidOperationError(
                f"the node {node_id} hung under is no longer in the tree: graft it instead"
            )
        recorder = self._begin()
        recorder.touch(pk, home)
        before = states_before(self._conn, self._schema, [pk])
        self._attach(pk, home)
        return self._finish_edit(recorder, "restore", node_id, settle=before)

    def move(self, ref: str, onto: str) -> EditResult:
        """Re-parent one node alone under ``onto``; its children go to its former parent."""
        pk, node_id = self._resolve(ref)
        target, target_id = self._resolve(onto)
        if target == pk:
            raise InvalidOperationError(f"cannot move {node_id} under itself")
        self._attached(pk, node_id, "node")
        self._attached(target, target_id, "target")
        row = self._row(pk)
        kids = self._children(pk)
        recorder = self._begin()
        recorder.touch(pk, row.parent_pk, target, *kids)
        before = states_before(self._conn, self._schema, [pk, *kids])
        for kid in kids:
            self._conn.execute(
                update(nodes).where(nodes.c.pk == kid).values(parent_pk=row.parent_pk)
            )
        self._conn.execute(
            update(nodes).where(nodes.c.pk == pk).values(parent_pk=target, active_child_pk=None)
        )
        if row.parent_pk is not None:
            parent = self._row(row.parent_pk)
            if parent.active_child_pk == pk:
                replacement = row.active_child_pk if row.active_child_pk in kids else None
                self._conn.execute(
                    update(nodes)
                    .where(nodes.c.pk == row.parent_pk)
                    .values(active_child_pk=replacement)
                )
            self._repair_active(row.parent_pk)
        target_row = self._row(target)
        if target_row.active_child_pk is None:
            self._conn.execute(update(nodes).where(nodes.c.pk == target).values(active_child_pk=pk))
        return self._finish_edit(recorder, "move", node_id, settle=before)

    def copy(self, ref: str, onto: str, *, subtree: bool = False) -> EditResult:
        """Duplicate a node and its active branch (``subtree``: all below it) under
        ``onto``; the copies are new nodes, replayed on the new base."""
        pk, node_id = self._resolve(ref)
        target, target_id = self._resolve(onto)
        self._attached(target, target_id, "target")
        if subtree:
            keys = [key for key, _ in ws.subtree_keys(self._conn, pk)]
        else:
            keys, current = [], pk
            while current is not None:
                keys.append(current)
                current = self._row(current).active_child_pk
        if target in keys:
            raise InvalidOperationError(
                f"cannot copy {node_id} under {target_id}: it is inside the copy"
            )
        recorder = self._begin()
        recorder.touch(target)
        source = images(self._conn, keys)
        mapping: dict[int, tuple[int, str]] = {}
        created: list[str] = []
        for key in keys:  # parents before children
            image = source[key]
            assert image is not None
            values = dict(zip(IMAGE_COLUMNS, image, strict=True))
            parent = target if key == pk else mapping[values["parent_pk"]][0]
            new = self._create_node(
                parent,
                values["role"],
                values["content"],
                values["name"],
                json.loads(values["delta"]) if values["delta"] else None,
                enabled=values["enabled"],
                metadata=json.loads(values["metadata"]) if values["metadata"] else None,
                check=False,
            )
            mapping[key] = new
            recorder.created(new[0])
            created.append(new[1])
        for key in keys:
            active = source[key][11]  # type: ignore[index]
            if active in mapping:
                self._conn.execute(
                    update(nodes)
                    .where(nodes.c.pk == mapping[key][0])
                    .values(active_child_pk=mapping[active][0])
                )
        if self._row(target).active_child_pk is None:
            self._conn.execute(
                update(nodes).where(nodes.c.pk == target).values(active_child_pk=mapping[pk][0])
            )
        return self._finish_edit(
            recorder, "copy", mapping[pk][1], settle={mapping[pk][0]: None}, created=created
        )

    def _create_node(
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
        from .store import _check_content, _check_delta, _check_name, _check_role, new_id

        node_id = new_id()
        if check:
            role, content, name = _check_role(role), _check_content(content), _check_name(name)
        operations = _check_delta(delta)
        pk = self._conn.execute(
            insert(nodes)
            .values(
                id=node_id,
                session_pk=self._record.pk,
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

    # -- undo and redo ---------------------------------------------------------------------

    def undo(self) -> EditResult:
        """Take back the last edit. Raises InvalidOperationError if there is none."""
        return self._travel(-1)

    def redo(self) -> EditResult:
        """Do again the last edit taken back."""
        return self._travel(+1)

    def _travel(self, step: int) -> EditResult:
        session_pk = self._record.pk
        position = journal_position(self._conn, session_pk)
        target = position if step < 0 else position + 1
        found = entry_at(self._conn, session_pk, target)
        if found is None:
            word = "undo" if step < 0 else "redo"
            raise InvalidOperationError(f"nothing to {word} in session {self._record.id}")
        action, payload = found
        expect, write = (1, 0) if step < 0 else (0, 1)
        changed = {int(pk): images_pair for pk, images_pair in payload["nodes"].items()}
        current = images(self._conn, changed)
        for pk, pair in changed.items():
            if not _same(current[pk], pair[expect]):
                raise JournalMismatchError(
                    f"the undo journal of session {self._record.id} no longer matches the tree "
                    f"(node {(pair[expect] or pair[1 - expect] or ['?', '?'])[1]} was changed "
                    "outside it); it was cleared and nothing was undone"
                )
        existing = [pk for pk, row in current.items() if row is not None]
        before = states_before(self._conn, self._schema, existing)
        for pk, pair in changed.items():
            write_image(self._conn, pk, pair[write], exists=current[pk] is not None)
        repair_active_pointers(self._conn, session_pk, changed)
        head = payload["head"][write]
        self._set_head(head)
        if head is not None:
            self._point_path_at(head)
        # Rows the edit had deleted come back with no state to compare: settle them too.
        before.update({pk: None for pk in changed if current[pk] is None})
        settle_all(self._conn, self._schema, before, self._every)
        set_position(self._conn, session_pk, position + step)
        self._dirty = True
        word = "undo" if step < 0 else "redo"
        return EditResult(f"{word} {action}", None, self._head_id, True)

    def purge(self) -> int:
        """Empty the trash for good; how many nodes were deleted. Irreversible: it
        clears the journal too."""
        tops = self._conn.execute(
            select(nodes.c.pk).where(
                nodes.c.session_pk == self._record.pk, nodes.c.detached == "trash"
            )
        ).scalars()
        keys = [key for top in list(tops) for key, _ in ws.subtree_keys(self._conn, top)]
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            self._conn.execute(
                update(nodes).where(nodes.c.pk.in_(chunk)).values(active_child_pk=None)
            )
        for i in range(0, len(keys), 500):
            self._conn.execute(delete(nodes).where(nodes.c.pk.in_(keys[i : i + 500])))
        clear_journal(self._conn, self._record.pk)
        self._dirty = True
        return len(keys)

    def history(self) -> list[JournalEntry]:
        """The journal, oldest first (``current``: the last applied entry)."""
        return history(self._conn, self._record.pk)

    def clear_journal(self) -> None:
        """A breakpoint: growing the tree forgets what could be undone.

        On every append, so one statement when there is nothing to forget: a
        position other than 0 always names an entry, so no entry deleted means the
        position is 0 already.
        """
        gone = self._conn.execute(delete(journal).where(journal.c.session_pk == self._record.pk))
        if gone.rowcount:
            set_position(self._conn, self._record.pk, 0)


def _same(a: list[Any] | None, b: list[Any] | None) -> bool:
    """Rows agree on what the journal guards: everything but the active-child pointer
    (moving HEAD repoints it without being an edit)."""
    if a is None or b is None:
        return a is b
    return a[:11] == b[:11] and a[12:] == b[12:]
