"""The store: sessions and their node trees on SQLite or PostgreSQL.

Reads open a short read transaction each. Writes to a session go through
:meth:`Store.transaction`, one database transaction that locks the session row,
checks the version the caller read, applies any number of operations and bumps the
version once; the convenience methods (:meth:`Store.append`, :meth:`Store.checkout`,
...) are one operation in one such transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, delete, exc, func, insert, select, update

from . import _bulk as bulk
from . import _dialect as dialect
from . import _documents as docs
from . import _head, _refs, events
from . import _idempotency as idem
from . import _paths as paths
from . import _projection as proj
from . import _queries as q
from . import _search as search
from . import _worldstate as ws
from . import pages as pg
from . import traces as tr
from ._checks import check_content, check_delta, check_metadata, check_name, check_role, new_id
from ._engine import WRITE_OPTION, create_store_engine, describe, ensure_schema
from ._engine import reason as _reason
from ._projection import ProjectionPage
from ._schema import nodes, preferences, sessions
from ._search import SearchHit
from ._transaction import TransactionState
from .editor import Editor, EditResult, JournalEntry, JournalMismatchError, Place
from .editor import history as journal_history
from .edits import EditCommand
from .errors import (
    ConflictError,
    IdTakenError,
    InvalidOperationError,
    MnemosyneError,
    StorageError,
)
from .models import (
    Blame,
    Change,
    Document,
    Message,
    Node,
    NodeAmongSiblings,
    Scenes,
    Session,
    Tree,
    WorldState,
)
from .protocols import TurnStore
from .state.delta import apply_delta, diff_states, value_at
from .state.schema import StateSchema

__all__ = ["ProjectionPage", "SessionTransaction", "Store"]

Direction = _head.Direction


def _now() -> datetime:
    return datetime.now(UTC)


class SessionTransaction:
    """The operations of one write transaction on one session.

    Obtained from :meth:`Store.transaction`; valid only inside its ``with`` block.
    Every operation checks its input before it writes, so a refused operation
    raises before anything of it is stored, and the whole transaction rolls back.

    It keeps one invariant that reads rely on: every ancestor of HEAD has its
    active child on the path to HEAD.

    The tree editor's operations are typed commands (:mod:`mnemosyne.edits`), done by
    :meth:`apply`; :meth:`batch` makes several one undo step.
    """

    def __init__(self, state: TransactionState) -> None:
        self._state = state
        self._editor = Editor(state)
        self._pending: list[idem.Pending] = []

    @property
    def session(self) -> Session:
        """The session as read at the start; after the commit, as it was left."""
        return self._state.session

    @property
    def head_id(self) -> str | None:
        """HEAD as it stands inside this transaction."""
        return self._state.head_id

    @property
    def metadata(self) -> dict[str, Any]:
        """The session's metadata as it stands inside this transaction."""
        state = self._state
        return dict(state.session.metadata if state.metadata is None else state.metadata)

    def set_metadata(self, metadata: Mapping[str, Any]) -> None:
        """Replace the session's metadata (whole) with this transaction's commit.

        Raises:
            InvalidOperationError: the metadata cannot be stored.
        """
        self._state.metadata = check_metadata(metadata)
        self._state.grew()

    def remember(self, key: str, request_hash: str, answer: Callable[[Session], str]) -> None:
        """Store idempotency ``key`` with this write, in its transaction (so it is stored
        if and only if the write is): ``answer(session)``, called at the commit with the
        session as the write leaves it, makes the text :meth:`Store.remembered` gives
        back to a retry. ``request_hash`` names the request (a retry must match it).

        Raises:
            InvalidOperationError: the key is not 1 to 200 printable ASCII characters.
        """
        self._pending.append(idem.Pending(idem.check_key(key), request_hash, answer))

    def _commit(self) -> None:
        """Commit the state, then store the pending keys (still in the transaction)."""
        session = self._state.commit()
        if self._pending:
            idem.expire(self._state.conn)
        for pending in self._pending:
            idem.save(self._state.conn, self._state.record.pk, pending, session)

    # -- reads inside the transaction ----------------------------------------

    def node(self, ref: str) -> Node:
        """A node of this session by its name: an id or unique prefix (>= 6 characters),
        ``HEAD`` (as the transaction has moved it), ``HEAD~2``... (:mod:`mnemosyne.nodenames`)."""
        pk, _ = self._editor.resolve(ref)
        return q.get_node(self._state.conn, self._state.record, pk)

    def projection(self) -> list[Node]:
        """The linear projection at HEAD as it stands inside the transaction."""
        return proj.whole_nodes(self._state.conn, self._state.record, self._state.head_pk)

    def state(self, ref: str | None = None) -> WorldState:
        """The world state after a node (default HEAD) as it stands in the transaction."""
        pk = self._state.head_pk if ref is None else self._editor.resolve(ref)[0]
        if pk is None:
            return WorldState.from_mapping(self._state.schema.initial_state())
        return WorldState.from_mapping(
            ws.state_after(self._state.conn, self._state.schema, pk).state
        )

    # -- keyframes (for edits that change ancestry or enabled flags) ----------------

    def invalidate_keyframes(self, ref: str) -> int:
        """Drop the keyframes of a node and of its whole subtree (they are caches)."""
        pk, _ = self._editor.resolve(ref)
        self._state.grew()
        return ws.invalidate_below(self._state.conn, pk)

    def rebuild_keyframes(self, ref: str) -> int:
        """Recompute a subtree's states on its current base, checking every delta, and
        put its missing keyframes back.

        Raises:
            InvalidDeltaError: a delta there no longer applies (the node is named).
        """
        pk, _ = self._editor.resolve(ref)
        self._state.grew()
        return ws.rebuild_below(self._state.conn, self._state.schema, pk, self._state.every)

    # -- growth ---------------------------------------------------------------

    def append(
        self,
        role: str,
        content: str,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
    ) -> Node:
        """Append a node under HEAD (a root if the session is empty); HEAD moves to it.

        Growing the tree is a breakpoint of the editor (it clears the undo journal),
        unless it is done inside :meth:`journaled`.
        """
        self._editor.growing(self._state.head_pk)
        return self._insert(
            self._state.head_pk, self._state.head_id, role, content, name, metadata, delta, enabled
        )

    def add_sibling(
        self,
        of: str,
        content: str,
        *,
        role: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
    ) -> Node:
        """A new sibling of node ``of`` (same parent; same role and name unless given).

        This is a reroll or an edit as fork: the other siblings stay as they were.
        HEAD moves to the new node.
        """
        pk, node_id = self._editor.resolve(of)
        # in the tree, the nodes above pointing along the path to it; then the new
        # sibling takes its place in its parent's active child (in _insert)
        _head.repoint(self._state, pk, node_id)
        original = q.get_node(self._state.conn, self._state.record, pk)
        parent_pk = q.parent_key(self._state.conn, pk)
        self._editor.growing(parent_pk)
        node = self._insert(
            parent_pk,
            original.parent_id,
            role if role is not None else original.role,
            content,
            name if name is not None else original.name,
            metadata,
            delta,
            enabled,
        )
        return node

    def _insert(
        self,
        parent_pk: int | None,
        parent_id: str | None,
        role: str,
        content: str,
        name: str | None,
        metadata: Mapping[str, Any] | None,
        delta: Sequence[Mapping[str, Any]] | None,
        enabled: bool,
    ) -> Node:
        node = Node(
            id=new_id(),
            session_id=self._state.record.id,
            parent_id=parent_id,
            role=check_role(role),
            name=check_name(name),
            content=check_content(content),
            enabled=bool(enabled),
            created_at=_now(),
            metadata=check_metadata(metadata),
            delta=check_delta(delta) or [],
        )
        # The delta is checked against the state it applies to before anything is
        # written (a disabled node's too: enabling it later must not surprise).
        parent = (
            ws.state_after(self._state.conn, self._state.schema, parent_pk)
            if parent_pk is not None
            else None
        )
        base = parent.state if parent is not None else self._state.schema.initial_state()
        after = apply_delta(self._state.schema, base, node.delta)
        pk = self._state.conn.execute(
            insert(nodes)
            .values(
                id=node.id,
                session_pk=self._state.record.pk,
                parent_pk=parent_pk,
                role=node.role,
                name=node.name,
                content=node.content,
                enabled=node.enabled,
                created_at=node.created_at,
                metadata=q.encode_json(node.metadata),
                delta=q.encode_json(node.delta) if node.delta else None,
                active_child_pk=None,
            )
            .returning(nodes.c.pk)
        ).scalar_one()
        if ws.keyframe_due(parent, self._state.every):
            ws.put_keyframe(self._state.conn, pk, after if node.enabled else base)
        if parent_pk is not None:
            self._state.conn.execute(
                update(nodes).where(nodes.c.pk == parent_pk).values(active_child_pk=pk)
            )
        self._state.head_pk, self._state.head_id = pk, node.id
        self._state.grew()
        self._state.event.add([node.id])
        self._editor.grown(pk)
        return node

    def journaled(self, action: str) -> AbstractContextManager[None]:
        """Growth inside (:meth:`append`, :meth:`add_sibling`) is one entry of the undo
        journal named ``action`` (a turn: ``say``, ``reroll``...), not a breakpoint:
        undo sends the new nodes to the trash and HEAD back where it was when the block
        began; redo brings them back. The entries before it stay undoable."""
        return self._editor.growth(action)

    # -- bulk writes (imports) ----------------------------------------------------------

    def insert_nodes(
        self,
        records: Sequence[bulk.NodeRecord],
        *,
        head: str | int | None = None,
        check_disabled_deltas: bool = True,
    ) -> list[Node]:
        """Many nodes at once (an import): what appending them one by one would store,
        in a few statements.

        Records come parents first: a record's parent is a node of the session (by id)
        or an earlier record (by id or index); a root has none. Every record is checked
        as :meth:`append` checks its input (the same errors), its delta replayed on its
        parent's state; keyframes go where growing node by node puts them (and on the
        top of every detached subtree). A node's active child is the one its record
        names, else its last child; HEAD moves to ``head`` (an id or a record index),
        by default to the last record in the tree (unchanged if there is none), and
        every node above HEAD points along the path to it. Growing the tree is a
        breakpoint: the undo journal is cleared.

        Args:
            records: the nodes, parents before children.
            head: where HEAD goes (a node in the tree).
            check_disabled_deltas: check a disabled node's delta on its parent's state
                too, as :meth:`append` does. A restore of stored nodes passes ``False``:
                edits since (a toggle above, a graft) may have left a disabled delta
                that no longer applies there; it is checked when it is enabled again.

        Returns:
            The nodes as stored, in the order of ``records``.

        Raises:
            InvalidOperationError: a malformed record, a parent that is not earlier, an
                active child that is not a child, HEAD out of the tree.
            IdTakenError: an id given is in use anywhere in the database.
            InvalidDeltaError: a delta that does not apply (the node named).
            UnknownNodeError, ForeignNodeError: a node named is not of this session.

            An error of one record has its index as ``record_index``; nothing is
            written (the transaction rolls back).
        """
        done = bulk.insert_nodes(
            self._state.conn,
            self._state.record,
            self._state.schema,
            self._state.every,
            records,
            head=head,
            check_disabled_deltas=check_disabled_deltas,
        )
        if not done.nodes and done.head is None:
            return []
        self._clear_journal()
        self._state.event.note("import")
        self._state.event.add(node.id for node in done.nodes)
        if done.repoint is not None:
            _head.point_path_at(self._state, done.repoint)
        if done.head is not None:
            self._state.head_pk, self._state.head_id = done.head
        self._state.grew()  # new nodes only, and active-child pointers
        return done.nodes

    def insert_traces(
        self, stored: Sequence[bulk.StoredTrace], blobs: Mapping[str, str] | None = None
    ) -> int:
        """Traces in their stored form (as :meth:`Store.dump` reads them), with the
        blobs they name (``{hash: text}``, kept once); how many traces.

        Raises:
            InvalidOperationError: a malformed trace, a blob whose text does not hash to
                its name, a blob named by parts that is neither given nor stored, a node
                that has a trace already. UnknownNodeError: a node not of this session.
        """
        count = bulk.insert_traces(self._state.conn, self._state.record, stored, blobs or {})
        if count:
            self._state.grew()
        return count

    def adopt_identity(
        self,
        session_id: str,
        *,
        created_at: datetime | None = None,
        updated_at: datetime | None = None,
    ) -> None:
        """For an import that keeps a session whole: the session being created (at
        version 0, first thing in its transaction) takes the id and the times it had
        where it was exported; ``updated_at`` is kept through the commit.

        Raises:
            InvalidOperationError: the session is not new, or the id is malformed.
            IdTakenError: another session has this id.
        """
        if self.session.version != 0 or self._state.wrote:
            raise InvalidOperationError(
                f"session {self._state.record.id} is not new: only a session being created "
                "takes another identity, before anything else is written to it"
            )
        bulk.check_id(session_id, "session id")
        if session_id != self._state.record.id:
            taken = self._state.conn.execute(
                select(sessions.c.pk).where(sessions.c.id == session_id)
            ).first()
            if taken is not None:
                raise IdTakenError("session", session_id)
        created = (
            self.session.created_at if created_at is None else bulk.utc(created_at, "created_at")
        )
        self._state.conn.execute(
            update(sessions)
            .where(sessions.c.pk == self._state.record.pk)
            .values(id=session_id, created_at=created)
        )
        self._state.session = replace(self.session, id=session_id, created_at=created)
        self._state.record = replace(self._state.record, session=self._state.session)
        if updated_at is not None:
            self._state.updated_at = bulk.utc(updated_at, "updated_at")
        self._state.changed()

    # -- prompt traces --------------------------------------------------------------

    def put_blob(self, text: str) -> str:
        """Store a text once (content-addressed); its hash, for a trace document."""
        return tr.put_blob(self._state.conn, text)

    def put_trace(
        self,
        ref: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        sources: Sequence[int | None],
        history: Sequence[Message],
        document: Mapping[str, Any],
        named: bool = False,
    ) -> str:
        """Attach the PromptTrace of a generated node; the hash of its messages.

        Args:
            ref: the generated node.
            messages: exactly what the model was sent.
            sources: for each message, the index in ``history`` of the node it is
                (sent as ``{"role", "content"}``), or ``None``. Consecutive indices are
                stored as one reference to the path between two nodes.
            history: the projection the prompt was built from (:meth:`Store.messages`).
            document: the rest of the trace, JSON (large texts as :meth:`put_blob`).
            named: the history's replies were sent with their speaker's name
                (:func:`mnemosyne.traces.history_message`; a cast of several).

        Raises:
            InvalidOperationError: the node has a trace already, or the input is malformed.
        """
        pk, node_id = self._editor.resolve(ref)
        return tr.put_trace(
            self._state.conn, pk, node_id, messages, sources, history, document, named
        )

    # -- documents (lorebooks, cards) ----------------------------------------------

    def put_document(self, kind: str, name: str, content: str) -> Document:
        """Keep a JSON document with the session (replacing one of the same kind and name).

        Raises:
            InvalidOperationError: a malformed kind or name, or content that is not JSON.
        """
        document = docs.put(self._state.conn, self._state.record.pk, kind, name, content)
        self._state.grew()
        return document

    def remove_document(self, kind: str, name: str) -> None:
        """Forget a document.

        Raises:
            NotFoundError: the session has no such document.
        """
        docs.remove(self._state.conn, self._state.record.pk, kind, name)
        self._state.grew()

    def documents(self, kind: str | None = None) -> list[Document]:
        return docs.listed(self._state.conn, self._state.record.pk, kind)

    # -- moving HEAD ------------------------------------------------------------

    def checkout(self, ref: str) -> Node:
        """Move HEAD to a node; every node above it now remembers this path."""
        pk, node_id = self._editor.resolve(ref)
        _head.checkout(self._state, pk, node_id)
        return q.get_node(self._state.conn, self._state.record, pk)

    def switch_sibling(self, direction: Direction, ref: str | None = None) -> Node:
        """Move to the next/previous sibling of ``ref`` (default HEAD), then down its
        active-child pointers to a leaf, which becomes HEAD.

        Raises:
            InvalidOperationError: the session is empty, or there is no sibling that way.
        """
        at = None
        if ref is not None:
            at = self._editor.resolve(ref)
            self._editor.require_attached(*at, "node")
        leaf = _head.sibling_leaf(self._state, direction, at)
        node = q.get_node(self._state.conn, self._state.record, leaf)
        _head.checkout(self._state, leaf, node.id)  # in the tree: a sibling of a node in it
        return node

    # -- the tree editor ----------------------------------------------------------

    def apply(self, edit: EditCommand) -> EditResult:
        """Do one edit operation (:mod:`mnemosyne.edits`), journaled for undo (with the
        rest of the batch, inside :meth:`batch`).

        Raises:
            InvalidOperationError: a cycle, a node out of the tree, a trashed node...
            InvalidDeltaError: a delta that no longer applies on its new base.
            UnknownNodeError, ForeignNodeError: a node that is not of this session.
        """
        return edit.apply(self._editor)

    def batch(self) -> AbstractContextManager[None]:
        """Edits made inside are one journal entry: one undo takes them all back."""
        return self._editor.batch()

    def apply_all(self, batch: Sequence[EditCommand]) -> list[EditResult]:
        """Edit operations in order, as one journal entry (:meth:`batch`).

        Raises:
            MnemosyneError: what the refused operation raised, with ``operation`` set
                to its index in ``batch`` (the transaction must not commit).
        """
        results = []
        with self.batch():
            for index, edit in enumerate(batch):
                try:
                    results.append(self.apply(edit))
                except MnemosyneError as error:
                    error.operation = index  # type: ignore[attr-defined]  # named, re-raised
                    raise
        return results

    def undo(self) -> EditResult:
        """Take back the last edit. Raises InvalidOperationError if there is none."""
        return self._editor.undo()

    def redo(self) -> EditResult:
        """Do again the last edit taken back."""
        return self._editor.redo()

    def purge(self) -> int:
        """Empty the trash for good; how many nodes were deleted. Irreversible: it
        clears the journal too."""
        return self._editor.purge()

    def history(self) -> list[JournalEntry]:
        """The journal, oldest first (``current``: the last applied entry)."""
        return self._editor.history()

    def _clear_journal(self) -> None:
        """A breakpoint: growing the tree forgets what could be undone."""
        self._editor.clear_journal()

    def drop_journal(self) -> None:
        """Clear the journal as a change of its own (the version moves): what the store
        does after a journal disagreed with the tree."""
        self._editor.drop_journal()

    # -- names on nodes: tags and branches (mnemosyne.refs) ----------------------------

    def name_node(
        self, name: str, kind: str, ref: str = "HEAD", *, force: bool = False
    ) -> EditResult:
        """Name a node (``kind``: ``tag`` or ``branch``), one undo step; ``force``: move
        a name the session has already."""
        pk, node_id = self._editor.resolve(ref)
        session_pk = self._state.record.pk

        def change(conn: Connection) -> str:
            _refs.put(conn, session_pk, name, kind, pk, force=force)
            return node_id

        return self._editor.rename_nodes(kind, change)

    def unname(self, name: str, kind: str | None = None) -> EditResult:
        """Delete a tag or branch (``kind``: it must be one), one undo step."""
        record = self._state.record

        def change(conn: Connection) -> None:
            _refs.remove(conn, record.pk, record.id, name, kind)

        return self._editor.rename_nodes(f"delete {kind or 'name'}", change)

    def change_name(
        self,
        name: str,
        *,
        new: str | None = None,
        ref: str | None = None,
        kind: str | None = None,
    ) -> EditResult:
        """Move a tag or branch to node ``ref`` and/or rename it ``new`` (``kind``: it
        must be one): one undo step, which leaves HEAD be; a change that changes nothing
        is no step. ``ref`` is read before the rename (it may be the name itself)."""
        record = self._state.record
        pk, node_id = (None, None) if ref is None else self._editor.resolve(ref)

        def change(conn: Connection) -> str | None:
            _refs.change(conn, record.pk, record.id, name, new=new, node_pk=pk, kind=kind)
            return node_id

        return self._editor.rename_nodes("rename" if new is not None else "move", change)

    def restore_names(self, names: Sequence[tuple[str, str, str]]) -> None:
        """Name nodes in bulk, ``(name, kind, node id)`` each (exact ids), in one insert
        and no undo step: the names of an imported session (:meth:`Store.dump`'s).
        Raises InvalidOperationError (a bad, repeated or taken name) or
        UnknownNodeError (no such node)."""
        state = self._state
        if not names:
            return
        _refs.add(state.conn, state.record.pk, state.record.id, names)
        state.has_branches = None
        state.grew()


class Store:
    """Sessions and node trees in one database.

    Open with :meth:`Store.open` (a context manager too). Thread-safe as an engine
    is; every method is its own transaction unless it is called on a
    :class:`SessionTransaction`.
    """

    def __init__(self, engine: Engine, *, keyframe_every: int = ws.DEFAULT_KEYFRAME_EVERY) -> None:
        if keyframe_every < 1:
            raise InvalidOperationError(f"keyframe_every must be at least 1, not {keyframe_every}")
        self._engine = engine
        self.keyframe_every = keyframe_every
        self.paths = paths.PathCache()
        """The messages of recent paths, kept between reads (see :mod:`mnemosyne._paths`)."""
        self.tree_orders = pg.TreeOrders()
        """The tree orders of recent sessions, kept between pages (see
        :mod:`mnemosyne.pages`)."""

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool | None = None,
        keyframe_every: int = ws.DEFAULT_KEYFRAME_EVERY,
    ) -> Store:
        """Open the database at ``url`` (a SQLAlchemy URL).

        Args:
            url: ``sqlite:///path`` or ``postgresql://...``.
            migrate: bring the schema up to date if it is behind. Default: yes for
                SQLite (an embedded file migrates itself), no for a server database
                (run ``clotho db upgrade``).
            keyframe_every: a whole world state is cached at every root and whenever
                the nearest one above is this many levels up (writes place them;
                reads use whatever keyframes there are).

        Raises:
            StorageError: not a database, corrupt, foreign, newer schema, or behind
                with ``migrate`` false.
        """
        engine = create_store_engine(url)
        if migrate is None:
            migrate = dialect.migrates_itself(engine)
        try:
            ensure_schema(engine, migrate=migrate)
            return cls(engine, keyframe_every=keyframe_every)
        except BaseException:
            engine.dispose()
            raise

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for the other parts of mnemosyne and for tests)."""
        return self._engine

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self._engine.dialect.name

    def close(self) -> None:
        """Release the connections."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({describe(self._engine)!r})"

    # -- transactions -----------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction: every query in it sees one consistent snapshot."""
        try:
            conn = dialect.read_isolation(self._engine.connect())
            with conn, conn.begin():
                yield conn
        except exc.DBAPIError as error:
            raise _storage_error(error) from error

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction on the database (for writes that are not one session's)."""
        try:
            with (
                self._engine.connect().execution_options(**{WRITE_OPTION: True}) as conn,
                conn.begin(),
            ):
                yield conn
        except exc.IntegrityError as error:
            raise InvalidOperationError(f"refused by the database: {_reason(error)}") from error
        except exc.DBAPIError as error:
            raise _storage_error(error) from error

    @contextmanager
    def transaction(
        self, session_id: str, *, expected_version: int | None = None
    ) -> Iterator[SessionTransaction]:
        """One write transaction on a session: all of it happens, or none of it.

        The session's row is locked first (``BEGIN IMMEDIATE`` on SQLite, ``SELECT
        ... FOR UPDATE`` on PostgreSQL), so writers to one session queue up and none
        of them can lose another's node.

        Args:
            session_id: the session's id or a unique prefix.
            expected_version: the version the caller read. If the session has moved
                on since, :class:`ConflictError` is raised and nothing changes.
                ``None`` writes on top of whatever is current.

        Yields:
            The transaction's operations; its ``session`` attribute holds the
            session after the commit.
        """
        with self.write() as conn:
            record = q.session_record(conn, session_id, for_update=True)
            if expected_version is not None and expected_version != record.session.version:
                raise ConflictError(record.id, expected_version, record.session.version)
            if record.session.trashed_at is not None:
                raise InvalidOperationError(
                    f"session {record.id} is in the trash: restore it before changing it"
                )
            state = TransactionState.open(conn, record, self.keyframe_every)
            tx = SessionTransaction(state)
            yield tx
            tx._commit()
        if state.wrote and state.kept_paths:  # committed, every existing path as it was
            before, after = proj.stamp(record.session), proj.stamp(state.session)
            self.paths.advance(record.memory_key, before, after)

    def remembered(self, session_id: str, key: str, request_hash: str) -> str | None:
        """The answer stored with idempotency ``key`` by a write on the session (see
        :meth:`SessionTransaction.remember`), or ``None`` (none, or expired).

        Raises:
            IdempotencyKeyReusedError: the key was stored for another request than
                ``request_hash``.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return idem.find(conn, record.pk, idem.check_key(key), request_hash)

    # -- sessions ------------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str | None = None,
        campaign: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        schema: StateSchema | None = None,
        documents: Sequence[tuple[str, str, str]] = (),
        fill: Callable[[SessionTransaction], None] | None = None,
    ) -> Session:
        """A new empty session (no nodes, HEAD none, version 0).

        ``schema`` is its world-state schema, kept with it for good (``None``: the
        permissive one, where any variable may be set). ``documents`` are ``(kind,
        name, JSON text)`` to keep with it (its lorebooks, its card), written in the
        same transaction. ``fill`` may grow its tree in that transaction too (an import):
        if it raises, no session is created. The session returned is as ``fill`` left it.

        Raises:
            InvalidOperationError: a document is malformed (nothing is created).
        """
        now = _now()
        session = Session(
            id=new_id(),
            title=title or None,
            head_id=None,
            version=0,
            created_at=now,
            updated_at=now,
            campaign=campaign,
            metadata=check_metadata(metadata),
        )
        with self.write() as conn:
            conn.execute(
                insert(sessions).values(
                    id=session.id,
                    title=session.title,
                    campaign=session.campaign,
                    head_pk=None,
                    version=0,
                    created_at=now,
                    updated_at=now,
                    metadata=q.encode_json(session.metadata),
                    state_schema=schema.to_json() if schema is not None else None,
                )
            )
            if documents or fill is not None:
                record = q.session_record(conn, session.id)
                for kind, name, content in documents:
                    docs.put(conn, record.pk, kind, name, content)
                if fill is not None:
                    state = TransactionState.open(conn, record, self.keyframe_every)
                    fill(SessionTransaction(state))
                    session = state.commit()
        return session

    def session(self, ref: str) -> Session:
        """A session by id or unique prefix (>= 6 characters)."""
        with self.read() as conn:
            return q.session_record(conn, ref).session

    def sessions(self, *, trashed: bool = False) -> list[Session]:
        """Every session (``trashed``: every session in the trash), most recently
        changed first."""
        with self.read() as conn:
            return q.list_sessions(conn, trashed=trashed)

    def sessions_page(
        self, *, trashed: bool = False, limit: int = 50, after: str | None = None
    ) -> pg.Page[Session]:
        """:meth:`sessions` a page at a time, after the cursor ``after`` (a page's
        ``after``); see :func:`mnemosyne.pages.sessions_page`."""
        with self.read() as conn:
            return pg.sessions_page(conn, trashed=trashed, limit=limit, after=after)

    def trash_session(self, session_id: str, *, expected_version: int | None = None) -> Session:
        """Move a session to the trash: it leaves :meth:`sessions`, refuses changes and
        stays whole, restorable, until :meth:`purge_session`."""
        return self._set_trashed(session_id, True, expected_version)

    def restore_session(self, session_id: str, *, expected_version: int | None = None) -> Session:
        """Take a session back out of the trash."""
        return self._set_trashed(session_id, False, expected_version)

    def purge_session(self, session_id: str, *, expected_version: int | None = None) -> None:
        """Delete a session in the trash for good, with its nodes, traces and documents
        (irreversible).

        Raises:
            InvalidOperationError: the session is not in the trash.
        """
        with self.write() as conn:
            record = q.session_record(conn, session_id, for_update=True)
            if expected_version is not None and expected_version != record.session.version:
                raise ConflictError(record.id, expected_version, record.session.version)
            if record.session.trashed_at is None:
                raise InvalidOperationError(
                    f"session {record.id} is not in the trash: delete it first, then purge it"
                )
            conn.execute(update(sessions).where(sessions.c.pk == record.pk).values(head_pk=None))
            conn.execute(delete(nodes).where(nodes.c.session_pk == record.pk))
            conn.execute(delete(sessions).where(sessions.c.pk == record.pk))
        self.paths.forget(record.memory_key)

    def update_session(
        self,
        session_id: str,
        *,
        title: str | EllipsisType | None = ...,
        metadata: Mapping[str, Any] | EllipsisType = ...,
        expected_version: int | None = None,
    ) -> Session:
        """Change a session's ``title`` (``None``: no title) and/or its ``metadata``
        (replaced whole), in one transaction; the version is bumped. What is not given
        (``...``) stays as it is.

        Raises:
            ConflictError: ``expected_version`` is not the session's version.
            InvalidOperationError: the session is in the trash, or the metadata cannot
                be stored.
        """
        values: dict[str, Any] = {}
        if title is not ...:
            if title is not None and not isinstance(title, str):
                raise InvalidOperationError(f"a title is text, not {type(title).__name__}")
            values["title"] = title or None
        if metadata is not ...:
            values["metadata"] = check_metadata(metadata)
        with self.write() as conn:
            record = q.session_record(conn, session_id, for_update=True)
            current = record.session
            if expected_version is not None and expected_version != current.version:
                raise ConflictError(record.id, expected_version, current.version)
            if current.trashed_at is not None:
                raise InvalidOperationError(
                    f"session {record.id} is in the trash: restore it to change it"
                )
            now = _now()
            stored = dict(values)
            if "metadata" in stored:
                stored["metadata"] = q.encode_json(stored["metadata"])
            conn.execute(
                update(sessions)
                .where(sessions.c.pk == record.pk)
                .values(version=current.version + 1, updated_at=now, **stored)
            )
            change = {"action": None, "head": current.head_id}
            if "title" in values:
                change["title"] = values["title"]
            events.append(conn, record.pk, record.id, current.version + 1, now, "session", change)
            return replace(current, version=current.version + 1, updated_at=now, **values)

    def _set_trashed(self, session_id: str, trash: bool, expected_version: int | None) -> Session:
        with self.write() as conn:
            record = q.session_record(conn, session_id, for_update=True)
            current = record.session
            if expected_version is not None and expected_version != current.version:
                raise ConflictError(record.id, expected_version, current.version)
            if (current.trashed_at is not None) == trash:
                where = "already in the trash" if trash else "not in the trash"
                raise InvalidOperationError(f"session {record.id} is {where}")
            now = _now()
            conn.execute(
                update(sessions)
                .where(sessions.c.pk == record.pk)
                .values(
                    version=current.version + 1, updated_at=now, trashed_at=now if trash else None
                )
            )
            kind = "trash" if trash else "restore"
            change = {"action": None, "head": current.head_id}
            events.append(conn, record.pk, record.id, current.version + 1, now, kind, change)
            return replace(
                current,
                version=current.version + 1,
                updated_at=now,
                trashed_at=now if trash else None,
            )

    def events(self, session_id: str, *, after: int | None = None) -> events.EventsRead:
        """The session's changes after version ``after`` (its events, oldest first; see
        :mod:`mnemosyne.events`), or where it stands (``after`` ``None``)."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            version, head = record.session.version, record.session.head_id
            return events.read(conn, record.pk, record.id, version, after, head=head)

    def node_counts(self) -> dict[str, int]:
        """How many nodes each session has (sessions without nodes are absent)."""
        with self.read() as conn:
            query = (
                select(sessions.c.id, func.count())
                .join_from(nodes, sessions, sessions.c.pk == nodes.c.session_pk)
                .group_by(sessions.c.id)
            )
            return {sid: count for sid, count in conn.execute(query)}

    # -- node reads ------------------------------------------------------------------

    def node(self, session_id: str, ref: str) -> Node:
        """A node of the session by its name: an id or unique prefix (>= 6 characters),
        ``HEAD`` or ``@``, ``HEAD~2``, ``HEAD^``, ``1a2b3c~1`` (:mod:`mnemosyne.nodenames`);
        every method that takes a node takes these.

        Raises:
            UnknownNodeError: no such node (or the path is shorter than the steps up).
            ForeignNodeError: it is another session's. InvalidOperationError: no node name.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk, _ = q.resolve_node(conn, record, ref)
            return q.get_node(conn, record, pk)

    def projection(self, session_id: str, at: str | None = None) -> list[Node]:
        """The linear projection: root -> HEAD (or -> ``at``), disabled nodes left out."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk = _head.node_or_head(conn, record, at)
            return proj.whole_nodes(conn, record, pk)

    def messages(self, session_id: str, at: str | None = None) -> list[Message]:
        """What the model sees at HEAD (or at ``at``): the projection's enabled
        messages with only their id, role, name and text. The cheapest read of a
        long story; :meth:`projection` gives whole nodes.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk = _head.node_or_head(conn, record, at)
            return proj.messages(conn, self.paths, record, pk)

    def scenes(self, session_id: str, at: str | None = None) -> Scenes:
        """:meth:`messages` (at HEAD, or at ``at``) and who was present along the path
        (the built-in ``present``, :mod:`mnemosyne.state.presence`): where it changed,
        and to what. As cheap as :meth:`messages`: the changes are kept with the path in
        the memory of recent paths, read in the same walk (the deltas that mention
        ``present``), and folded from everyone at the root in one pass over them.
        What a character's prompt needs to hold only what it witnessed.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk = _head.node_or_head(conn, record, at)
            return proj.scenes(conn, self.paths, record, pk)

    def last_speaker(self, session_id: str, at: str | None = None) -> str | None:
        """The name on the newest reply (an enabled ``assistant`` message with a name)
        of the path to HEAD (or to ``at``); ``None``: no named reply. Read from the end
        of the path :meth:`messages` reads (kept in memory), with no copy of it: who
        spoke last, for a speaker order.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk = _head.node_or_head(conn, record, at)
            return proj.last_speaker(conn, self.paths, record, pk)

    def projection_turns(
        self, session_id: str, *, disabled: bool = False
    ) -> tuple[Session, list[NodeAmongSiblings]]:
        """The projection at HEAD with each node's siblings: what a chat view shows.
        ``disabled``: the disabled nodes of the path too (shown as hidden messages)."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return record.session, proj.turns(conn, record, record.head_pk, disabled=disabled)

    def projection_page(
        self,
        session_id: str,
        *,
        before: str | None = None,
        limit: int = 200,
        disabled: bool = False,
    ) -> ProjectionPage:
        """The ``limit`` messages of the projection at HEAD just before node ``before``
        (default: its last ones), each with its siblings: how a chat view reads a long
        story, newest first, and pages back. ``disabled``: the path's disabled nodes
        are messages too. The cost is the window's: the path's keys come from the
        memory of recent paths (:mod:`mnemosyne._paths`; after a turn, extended by
        what the turn added), then only the window's nodes are read.

        Raises:
            InvalidOperationError: ``limit`` below 1; ``before`` is not on the path
                root -> HEAD (another branch, a fragment, the trash).
            UnknownNodeError: no node ``before``.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return proj.page(
                conn, self.paths, record, before=before, limit=limit, disabled=disabled
            )

    def children(self, session_id: str, ref: str | None = None) -> list[Node]:
        """The children of a node in order; ``None``: the session's roots."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            parent = None if ref is None else q.resolve_node(conn, record, ref)[0]
            return q.children(conn, record, parent)

    def tree(self, session_id: str) -> Tree:
        """The whole session: its HEAD and every node, parents before children."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return Tree(record.session, q.all_nodes(conn, record))

    def tree_page(
        self, session_id: str, *, limit: int = 500, after: str | None = None
    ) -> pg.Page[Node]:
        """:meth:`tree` a page at a time, after node ``after``; see
        :func:`mnemosyne.pages.tree_page`."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return pg.tree_page(conn, record, limit=limit, after=after, orders=self.tree_orders)

    def dump(self, session_id: str) -> bulk.SessionDump:
        """The whole session as stored, in one snapshot, for a lossless export: every
        node (fragments and trash included, with where they hung and the state they
        kept there), the traces in their stored form with the blobs they name, the
        documents, the schema and the names. :meth:`SessionTransaction.insert_nodes` and
        :meth:`SessionTransaction.insert_traces` take it back, and
        :meth:`SessionTransaction.restore_names` its names. Keyframes (a cache) and the
        undo journal are not part of it.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return bulk.dump(conn, record)

    def turn(self, session_id: str, ref: str | None = None) -> NodeAmongSiblings:
        """A node (default HEAD) with its siblings' ids and its index among them."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk = _head.node_or_head(conn, record, ref)
            if pk is None:
                raise InvalidOperationError(f"session {record.id} is empty: it has no HEAD")
            node = q.get_node(conn, record, pk)
            keys = q.sibling_keys(conn, record, q.parent_key(conn, pk))
            if pk not in keys:  # the top of a fragment or of a subtree in the trash
                keys = [pk]
            ids = q.public_ids(conn, keys)
            return NodeAmongSiblings(node, [ids[k] for k in keys], keys.index(pk))

    # -- world state --------------------------------------------------------------------

    def trace(self, session_id: str, ref: str) -> tr.Trace | None:
        """A node's PromptTrace, its messages rebuilt and checked against the hash of
        what was sent; ``None`` if the node was not generated."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            pk, node_id = q.resolve_node(conn, record, ref)
            return tr.load_trace(conn, pk, node_id)

    def documents(self, session_id: str, kind: str | None = None) -> list[Document]:
        """The session's documents (of one kind, or all), in the order they were first put."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return docs.listed(conn, record.pk, kind)

    def schema(self, session_id: str) -> StateSchema:
        """The session's world-state schema."""
        with self.read() as conn:
            return ws.parse_schema(q.session_record(conn, session_id).schema_json)

    def state(self, session_id: str, at: str | None = None) -> WorldState:
        """The world state after HEAD (or after node ``at``).

        A keyframe and at most ``keyframe_every - 1`` deltas: the cost does not grow
        with the depth of the story.
        """
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return WorldState.from_mapping(self._state(conn, record, at))

    def diff(self, session_id: str, a: str, b: str) -> dict[str, list[Any]]:
        """``{path: [value after a, value after b]}`` for every path that differs."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return diff_states(self._state(conn, record, a), self._state(conn, record, b))

    def blame(self, session_id: str, path: str, at: str | None = None) -> Blame:
        """The node on the path to HEAD (or ``at``) that last wrote ``path``, and the
        value it left (the value at that point). Costs the rows up to that node and the
        state there (a keyframe and a few deltas), not a replay of the whole path."""
        _check_variable_path(path)
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            schema = ws.parse_schema(record.schema_json)
            pk = _head.node_or_head(conn, record, at)
            writer = None if pk is None else ws.last_writer(conn, pk, path)
            if pk is None or writer is None:
                return Blame(path, value_at(schema.initial_state(), path), None)
            return Blame(path, value_at(ws.state_after(conn, schema, pk).state, path), writer)

    def changes(
        self, session_id: str, path: str, at: str | None = None
    ) -> tuple[Any, list[Change]]:
        """The history of ``path`` along the path to HEAD (or ``at``): its value at the
        start and each node that wrote it, oldest first."""
        start, found = self._touches(session_id, path, at)
        return start, [Change(t.node_id, t.operations, t.value) for t in found]

    def _touches(self, session_id: str, path: str, at: str | None) -> tuple[Any, list[ws.Touch]]:
        _check_variable_path(path)
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            schema = ws.parse_schema(record.schema_json)
            pk = _head.node_or_head(conn, record, at)
            if pk is None:
                return value_at(schema.initial_state(), path), []
            return ws.touches_along(conn, schema, pk, path)

    def _state(self, conn: Connection, record: q.SessionRecord, at: str | None) -> dict[str, Any]:
        schema = ws.parse_schema(record.schema_json)
        pk = _head.node_or_head(conn, record, at)
        if pk is None:
            return schema.initial_state()
        return ws.state_after(conn, schema, pk).state

    # -- the tree editor --------------------------------------------------------------

    def edit(
        self, session_id: str, edit: EditCommand, *, expected_version: int | None = None
    ) -> tuple[EditResult, Session]:
        """One edit operation (:mod:`mnemosyne.edits`) in one transaction, journaled
        for undo."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            result = tx.apply(edit)
        return result, tx.session

    def edits(
        self,
        session_id: str,
        batch: Sequence[EditCommand],
        *,
        expected_version: int | None = None,
    ) -> tuple[list[EditResult], Session]:
        """Edit operations in order, in one transaction: all of them or none. They are
        one entry of the journal (one undo takes them all back).

        Raises:
            MnemosyneError: what the refused operation raised, with ``operation`` set
                to its index in ``batch``; none of them happened.
        """
        with self.transaction(session_id, expected_version=expected_version) as tx:
            results = tx.apply_all(batch)
        return results, tx.session

    def undo(
        self, session_id: str, *, expected_version: int | None = None
    ) -> tuple[EditResult, Session]:
        """Take back the last edit (see :meth:`redo`)."""
        return self._travel(session_id, "undo", expected_version)

    def redo(
        self, session_id: str, *, expected_version: int | None = None
    ) -> tuple[EditResult, Session]:
        """Do again the last edit taken back.

        Raises:
            InvalidOperationError: nothing to undo/redo.
            JournalMismatchError: the journal disagreed with the tree; it has been
                cleared (in a transaction of its own) and nothing else changed.
        """
        return self._travel(session_id, "redo", expected_version)

    def _travel(
        self, session_id: str, way: str, expected_version: int | None
    ) -> tuple[EditResult, Session]:
        try:
            with self.transaction(session_id, expected_version=expected_version) as tx:
                result = tx.undo() if way == "undo" else tx.redo()
        except JournalMismatchError:
            with self.transaction(session_id) as tx:
                tx.drop_journal()
            raise
        return result, tx.session

    def purge(self, session_id: str, *, expected_version: int | None = None) -> tuple[int, Session]:
        """Empty the trash for good (irreversible; clears the journal)."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            count = tx.purge()
        return count, tx.session

    def history(self, session_id: str) -> list[JournalEntry]:
        """The undo journal, oldest first."""
        with self.read() as conn:
            return journal_history(conn, q.session_record(conn, session_id).pk)

    def history_page(
        self, session_id: str, *, limit: int = 50, after: str | None = None
    ) -> pg.Page[JournalEntry]:
        """:meth:`history` a page at a time, after the entry at position ``after``; see
        :func:`mnemosyne.pages.history_page`."""
        with self.read() as conn:
            record = q.session_record(conn, session_id)
            return pg.history_page(conn, record, limit=limit, after=after)

    def fragments(self, session_id: str) -> list[list[Node]]:
        """The pruned subtrees waiting to be grafted: each a list of nodes, top first."""
        with self.read() as conn:
            return q.detached_subtrees(conn, q.session_record(conn, session_id), "fragment")

    def placement(self, session_id: str, ref: str) -> Place | None:
        """Where the subtree holding a node is parked: ``fragment`` (pruned), ``trash``,
        or ``None`` (in the story's tree). One query, where :meth:`fragments` and
        :meth:`trash` load every subtree."""
        with self.read() as conn:
            pk, _ = q.resolve_node(conn, q.session_record(conn, session_id), ref)
            return q.top_detached(conn, pk)  # type: ignore[return-value]

    def trash(self, session_id: str) -> list[list[Node]]:
        """The deleted subtrees, restorable until a purge: each a list, top first."""
        with self.read() as conn:
            return q.detached_subtrees(conn, q.session_record(conn, session_id), "trash")

    def search(
        self,
        query: str,
        *,
        session_id: str | None = None,
        role: str | None = None,
        trunk: bool = False,
        under: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
    ) -> list[SearchHit]:
        """The nodes whose content holds every word of ``query`` (a user's text, never
        search syntax; case-insensitive), over every branch of every live session (or
        of ``session_id``), newest first, at most ``limit`` (1 to
        :data:`~mnemosyne._search.MAX_LIMIT`). Disabled nodes and pruned fragments are
        found (marked); trashed sessions and trashed subtrees are not. How each
        database matches: :mod:`mnemosyne._search` (on SQLite the search first indexes
        the nodes written since the last one).

        Args:
            role: only messages of this role.
            trunk: only nodes on the path root -> HEAD of their session.
            under: only this node (a node name of ``session_id``: an id or prefix,
                ``HEAD~2``...) and the nodes below it.
            since: only nodes created at or after this moment (aware).
            until: only nodes created before this moment (aware).

        Raises:
            InvalidOperationError: an empty or too long query, a bad role or limit,
                ``under`` without ``session_id``, a naive or reversed time span.
            UnknownSessionError, UnknownNodeError: no such session, or node in it.
        """
        parsed = search.parse_query(query)
        search.check_limit(limit)
        if role is not None:
            check_role(role)
        if under is not None and session_id is None:
            raise InvalidOperationError("a search under a node is a search of its session")
        for moment in (since, until):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise InvalidOperationError(
                    f"a search's since and until are aware datetimes, not {moment!r}"
                )
        if since is not None and until is not None and until <= since:
            raise InvalidOperationError(
                f"a search's until ({until.isoformat()}) must be after its since"
                f" ({since.isoformat()})"
            )
        if self._engine.dialect.name == "sqlite":  # PostgreSQL keeps its index itself
            search.catch_up(self.read, self.write)
        with self.read() as conn:
            record = q.session_record(conn, session_id) if session_id is not None else None
            under_pk = None
            if record is not None and under is not None:
                under_pk = q.resolve_node(conn, record, under)[0]
            records: dict[int, q.SessionRecord] = {} if record is None else {record.pk: record}
            trunk_keys = None
            if trunk:
                if record is None:
                    live = conn.execute(q.sessions_query(False))
                    records = {found.pk: found for found in map(q.record_from_row, live)}
                keys = self._trunk_reader(len(records))
                trunk_keys = frozenset(
                    key
                    for found in records.values()
                    for key in keys(conn, self.paths, found, found.head_pk)
                )
            filters = search.SearchFilters(
                session_pk=record.pk if record is not None else None,
                role=role,
                trunk_keys=trunk_keys,
                under_pk=under_pk,
                since=since,
                until=until,
            )
            rows = search.matching_rows(conn, parsed, filters, limit=limit)
            if trunk_keys is not None:  # every hit is on it: no second walk
                return [search.hit_from_row(row, parsed.words, trunk_keys) for row in rows]
            hit = {row[8] for row in rows}
            records.update(q.session_records(conn, hit - records.keys()))
            keys = self._trunk_reader(len(hit))
            trunks = {
                pk: frozenset(keys(conn, self.paths, records[pk], records[pk].head_pk))
                for pk in hit
            }
            return [search.hit_from_row(row, parsed.words, trunks[row[8]]) for row in rows]

    def _trunk_reader(self, sessions: int) -> Callable[..., tuple[int, ...]]:
        """How a search reads the paths root -> HEAD of ``sessions`` sessions: through
        the path cache (kept for the next search, and for their players) while they are
        few; past half of what the cache holds, without keeping them, which would push
        out the paths of the sessions being played."""
        if sessions <= self.paths.max_sessions // 2:
            return proj.path_keys
        return proj.path_keys_unkept

    # -- one-operation writes -------------------------------------------------------------

    def append(
        self,
        session_id: str,
        role: str,
        content: str,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
        expected_version: int | None = None,
    ) -> tuple[Node, Session]:
        """Append under HEAD and move HEAD to the new node. Returns it and the session."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            node = tx.append(
                role, content, name=name, metadata=metadata, delta=delta, enabled=enabled
            )
        return node, tx.session

    def add_sibling(
        self,
        session_id: str,
        of: str,
        content: str,
        *,
        role: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
        expected_version: int | None = None,
    ) -> tuple[Node, Session]:
        """A new sibling of ``of`` (reroll / edit as fork); HEAD moves to it."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            node = tx.add_sibling(
                of, content, role=role, name=name, metadata=metadata, delta=delta, enabled=enabled
            )
        return node, tx.session

    def checkout(
        self, session_id: str, ref: str, *, expected_version: int | None = None
    ) -> tuple[Node, Session]:
        """Move HEAD to a node."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            node = tx.checkout(ref)
        return node, tx.session

    def switch_sibling(
        self,
        session_id: str,
        direction: Direction,
        ref: str | None = None,
        *,
        expected_version: int | None = None,
    ) -> tuple[Node, Session]:
        """Next/previous alternative of ``ref`` (default HEAD), down to its leaf."""
        with self.transaction(session_id, expected_version=expected_version) as tx:
            node = tx.switch_sibling(direction, ref)
        return node, tx.session

    # -- preferences ------------------------------------------------------------------------

    def preference(self, key: str) -> str | None:
        """A stored preference (such as the session used last), ``None`` if unset."""
        with self.read() as conn:
            return conn.execute(
                select(preferences.c.value).where(preferences.c.key == key)
            ).scalar_one_or_none()

    def set_preference(self, key: str, value: str) -> None:
        """Store a preference, replacing any earlier value."""
        with self.write() as conn:
            conn.execute(
                dialect.insert_or_replace(conn, preferences, "key", {"key": key, "value": value})
            )


def _storage_error(error: exc.DBAPIError) -> MnemosyneError:
    return StorageError(f"database error: {_reason(error)}")


def _check_variable_path(path: object) -> None:
    if not isinstance(path, str) or not path.strip():
        raise InvalidOperationError("a variable path is needed, such as 'hp' or 'affinity.marla'")


if TYPE_CHECKING:  # the type checker holds Store to the Protocols it implements

    def _turn_store(store: Store) -> TurnStore:
        return store
