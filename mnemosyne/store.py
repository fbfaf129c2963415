"""The store: sessions and their node trees on SQLite or PostgreSQL.

Reads open a short read transaction each. Writes to a session go through
:meth:`Store.transaction`, one database transaction that locks the session row,
checks the version the caller read, applies any number of operations and bumps the
version once; the convenience methods (:meth:`Store.append`, :meth:`Store.checkout`,
...) are one operation in one such transaction.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Connection, Engine, bindparam, exc, func, insert, select, update

from . import _queries as q
from ._engine import WRITE_OPTION, create_store_engine, describe, ensure_schema
from ._schema import nodes, preferences, sessions
from .errors import ConflictError, InvalidOperationError, MnemosyneError, StorageError
from .models import ROLES, Node, Role, Session, Tree, TurnView

__all__ = ["SessionTransaction", "Store"]

Direction = Literal["next", "prev"]


def new_id() -> str:
    """A random 128-bit id in hex: random so that short prefixes are unique."""
    return secrets.token_hex(16)


def _now() -> datetime:
    return datetime.now(UTC)


def _check_role(role: str) -> Role:
    if role not in ROLES:
        raise InvalidOperationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return role  # type: ignore[return-value]


def _check_content(content: object) -> str:
    if not isinstance(content, str):
        raise InvalidOperationError(f"content must be text, not {type(content).__name__}")
    return content


def _check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidOperationError(f"metadata must be a mapping, not {type(metadata).__name__}")
    return dict(metadata)


def _check_delta(delta: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not delta:
        return None
    if isinstance(delta, (str, bytes)) or not isinstance(delta, Sequence):
        raise InvalidOperationError(f"a delta must be a list of operations, not {delta!r}")
    out = []
    for i, op in enumerate(delta):
        if not isinstance(op, Mapping):
            raise InvalidOperationError(f"delta operation {i} must be an object, not {op!r}")
        out.append(dict(op))
    return out


class SessionTransaction:
    """The operations of one write transaction on one session.

    Obtained from :meth:`Store.transaction`; valid only inside its ``with`` block.
    Every operation checks its input before it writes, so a refused operation
    raises before anything of it is stored, and the whole transaction rolls back.
    """

    def __init__(self, conn: Connection, session: Session, last_seq: int) -> None:
        self._conn = conn
        self._read = session
        self._head = session.head_id
        self._last_seq = last_seq
        self._dirty = False
        self.session: Session = session
        """The session as read at the start of the transaction."""

    @property
    def head_id(self) -> str | None:
        """HEAD as it stands inside this transaction."""
        return self._head

    # -- reads inside the transaction ----------------------------------------

    def node(self, ref: str) -> Node:
        """A node of this session by id or unique prefix (>= 6 characters)."""
        node_id = q.resolve_node_id(self._conn, self._read.id, ref)
        return q.get_node(self._conn, self._read.id, node_id)

    def projection(self) -> list[Node]:
        """The linear projection at HEAD as it stands inside the transaction."""
        return q.projection(self._conn, self._read.id, self._head)

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
        """Append a node under HEAD (a root if the session is empty); HEAD moves to it."""
        return self._insert(self._head, role, content, name, metadata, delta, enabled)

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
        original = self.node(of)
        return self._insert(
            original.parent_id,
            role if role is not None else original.role,
            content,
            name if name is not None else original.name,
            metadata,
            delta,
            enabled,
        )

    def _insert(
        self,
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
            session_id=self._read.id,
            parent_id=parent_id,
            role=_check_role(role),
            name=name or None,
            content=_check_content(content),
            enabled=bool(enabled),
            created_at=_now(),
            metadata=_check_metadata(metadata),
            delta=_check_delta(delta) or [],
        )
        self._last_seq += 1
        self._conn.execute(
            insert(nodes).values(
                id=node.id,
                session_id=node.session_id,
                parent_id=node.parent_id,
                seq=self._last_seq,
                role=node.role,
                name=node.name,
                content=node.content,
                enabled=node.enabled,
                created_at=node.created_at,
                metadata=node.metadata,
                delta=node.delta or None,
                active_child_id=None,
            )
        )
        if parent_id is not None:
            self._conn.execute(
                update(nodes).where(nodes.c.id == parent_id).values(active_child_id=node.id)
            )
        self._head = node.id
        self._dirty = True
        return node

    # -- moving HEAD ------------------------------------------------------------

    def checkout(self, ref: str) -> Node:
        """Move HEAD to a node; every node above it now remembers this path."""
        node = self.node(ref)
        self._point_path_at(node.id)
        self._head = node.id
        self._dirty = True
        return node

    def switch_sibling(self, direction: Direction, ref: str | None = None) -> Node:
        """Move to the next/previous sibling of ``ref`` (default HEAD), then down its
        active-child pointers to a leaf, which becomes HEAD.

        Raises:
            InvalidOperationError: the session is empty, or there is no sibling that way.
        """
        if direction not in ("next", "prev"):
            raise InvalidOperationError(f"direction must be 'next' or 'prev', not {direction!r}")
        if ref is None:
            if self._head is None:
                raise InvalidOperationError(f"session {self._read.id} is empty: nothing to switch")
            ref = self._head
        node = self.node(ref)
        siblings = q.sibling_ids(self._conn, self._read.id, node.parent_id)
        index = siblings.index(node.id)
        target = index + (1 if direction == "next" else -1)
        if not 0 <= target < len(siblings):
            end = "last" if direction == "next" else "first"
            raise InvalidOperationError(
                f"node {node.id} is the {end} of its {len(siblings)} alternative(s): "
                f"there is no {direction} one"
            )
        leaf = q.descend(self._conn, siblings[target])
        return self.checkout(leaf)

    def _point_path_at(self, node_id: str) -> None:
        rows = q.path_up(
            self._conn,
            self._read.id,
            node_id,
            columns=(nodes.c.id, nodes.c.parent_id, nodes.c.active_child_id),
        )
        changes = [
            {"pid": parent.id, "child": child.id}
            for child, parent in itertools.pairwise(rows)
            if parent.active_child_id != child.id
        ]
        if changes:
            self._conn.execute(
                update(nodes)
                .where(nodes.c.id == bindparam("pid"))
                .values(active_child_id=bindparam("child")),
                changes,
            )

    # -- the end ----------------------------------------------------------------

    def _finish(self) -> Session:
        if not self._dirty:
            return self._read
        now = _now()
        result = self._conn.execute(
            update(sessions)
            .where(sessions.c.id == self._read.id, sessions.c.version == self._read.version)
            .values(
                head_id=self._head,
                version=self._read.version + 1,
                last_seq=self._last_seq,
                updated_at=now,
            )
        )
        if result.rowcount != 1:  # the row lock makes this unreachable; belt and braces
            current = q.get_session(self._conn, self._read.id)
            raise ConflictError(self._read.id, self._read.version, current.version)
        self.session = q.get_session(self._conn, self._read.id)
        return self.session


class Store:
    """Sessions and node trees in one database.

    Open with :meth:`Store.open` (a context manager too). Thread-safe as an engine
    is; every method is its own transaction unless it is called on a
    :class:`SessionTransaction`.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @classmethod
    def open(cls, url: str, *, migrate: bool | None = None) -> Store:
        """Open the database at ``url`` (a SQLAlchemy URL).

        Args:
            url: ``sqlite:///path`` or ``postgresql://...``.
            migrate: bring the schema up to date if it is behind. Default: yes for
                SQLite (an embedded file migrates itself), no for a server database
                (run ``clotho db upgrade``).

        Raises:
            StorageError: not a database, corrupt, foreign, newer schema, or behind
                with ``migrate`` false.
        """
        engine = create_store_engine(url)
        if migrate is None:
            migrate = engine.dialect.name == "sqlite"
        try:
            ensure_schema(engine, migrate=migrate)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

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
            conn = self._engine.connect()
            if conn.dialect.name == "postgresql":
                conn = conn.execution_options(isolation_level="REPEATABLE READ")
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
            sid = q.resolve_session_id(conn, session_id)
            row = conn.execute(
                select(*q.SESSION_COLUMNS, sessions.c.last_seq)
                .where(sessions.c.id == sid)
                .with_for_update()
            ).one()
            session = q.session_from_row(row)
            if expected_version is not None and expected_version != session.version:
                raise ConflictError(session.id, expected_version, session.version)
            tx = SessionTransaction(conn, session, row.last_seq)
            yield tx
            tx._finish()

    # -- sessions ------------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str | None = None,
        campaign: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Session:
        """A new empty session (no nodes, HEAD none, version 0)."""
        now = _now()
        session = Session(
            id=new_id(),
            title=title or None,
            head_id=None,
            version=0,
            created_at=now,
            updated_at=now,
            campaign=campaign,
            metadata=_check_metadata(metadata),
        )
        with self.write() as conn:
            conn.execute(
                insert(sessions).values(
                    id=session.id,
                    title=session.title,
                    campaign=session.campaign,
                    head_id=None,
                    version=0,
                    last_seq=0,
                    created_at=now,
                    updated_at=now,
                    metadata=session.metadata,
                )
            )
        return session

    def session(self, ref: str) -> Session:
        """A session by id or unique prefix (>= 6 characters)."""
        with self.read() as conn:
            return q.get_session(conn, q.resolve_session_id(conn, ref))

    def sessions(self) -> list[Session]:
        """Every session, most recently changed first."""
        with self.read() as conn:
            return q.list_sessions(conn)

    def node_counts(self) -> dict[str, int]:
        """How many nodes each session has (sessions without nodes are absent)."""
        with self.read() as conn:
            query = select(nodes.c.session_id, func.count()).group_by(nodes.c.session_id)
            return {sid: count for sid, count in conn.execute(query)}

    # -- node reads ------------------------------------------------------------------

    def node(self, session_id: str, ref: str) -> Node:
        """A node of the session by id or unique prefix (>= 6 characters).

        Raises:
            UnknownNodeError: no such node. ForeignNodeError: it is another session's.
        """
        with self.read() as conn:
            sid = q.resolve_session_id(conn, session_id)
            return q.get_node(conn, sid, q.resolve_node_id(conn, sid, ref))

    def projection(self, session_id: str, at: str | None = None) -> list[Node]:
        """The linear projection: root -> HEAD (or -> ``at``), disabled nodes left out."""
        with self.read() as conn:
            sid = q.resolve_session_id(conn, session_id)
            if at is None:
                return q.head_projection(conn, sid)[1]
            return q.projection(conn, sid, q.resolve_node_id(conn, sid, at))

    def projection_turns(self, session_id: str) -> tuple[Session, list[TurnView]]:
        """The projection at HEAD with each node's siblings: what a chat view shows."""
        with self.read() as conn:
            session, path = q.head_projection(conn, q.resolve_session_id(conn, session_id))
            siblings = q.sibling_lists(conn, session.id, (n.parent_id for n in path))
            turns = []
            for node in path:
                ids = siblings[node.parent_id]
                turns.append(TurnView(node, ids, ids.index(node.id)))
            return session, turns

    def children(self, session_id: str, ref: str | None = None) -> list[Node]:
        """The children of a node in order; ``None``: the session's roots."""
        with self.read() as conn:
            sid = q.resolve_session_id(conn, session_id)
            parent = None if ref is None else q.resolve_node_id(conn, sid, ref)
            return q.children(conn, sid, parent)

    def tree(self, session_id: str) -> Tree:
        """The whole session: its HEAD and every node, parents before children."""
        with self.read() as conn:
            sid = q.resolve_session_id(conn, session_id)
            return Tree(q.get_session(conn, sid), q.all_nodes(conn, sid))

    def turn(self, session_id: str, ref: str | None = None) -> TurnView:
        """A node (default HEAD) with its siblings' ids and its index among them."""
        with self.read() as conn:
            sid = q.resolve_session_id(conn, session_id)
            if ref is None:
                head = q.get_session(conn, sid).head_id
                if head is None:
                    raise InvalidOperationError(f"session {sid} is empty: it has no HEAD")
                node_id = head
            else:
                node_id = q.resolve_node_id(conn, sid, ref)
            node = q.get_node(conn, sid, node_id)
            siblings = q.sibling_ids(conn, sid, node.parent_id)
            return TurnView(node, siblings, siblings.index(node.id))

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
            if conn.dialect.name == "postgresql":
                from sqlalchemy.dialects.postgresql import insert as upsert
            else:
                from sqlalchemy.dialects.sqlite import insert as upsert
            statement = upsert(preferences).values(key=key, value=value)
            conn.execute(
                statement.on_conflict_do_update(index_elements=["key"], set_={"value": value})
            )


def _reason(error: exc.DBAPIError) -> str:
    return str(error.orig).strip().splitlines()[0] if error.orig else str(error)


def _storage_error(error: exc.DBAPIError) -> MnemosyneError:
    return StorageError(f"database error: {_reason(error)}")
