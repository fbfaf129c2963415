"""A session's changes as a log of events, kept in the database with the changes.

Every write that moves a session's version (new nodes, HEAD moves, edits, undo and
redo, imports, title and metadata, trash and restore) appends one row to
``session_events`` in its own transaction: an event exists if and only if its change
committed. Its id is the version the write left the session at, so ids are monotonic
per session and a reader that knows a version knows where it stands. An event is small:
a ``kind``, the editor's ``action`` if any, the new HEAD, the nodes added and changed
(ids, at most :data:`MAX_IDS` of each, with their counts), never texts.

The last :data:`KEPT` events of each session are kept; a reader asking for what came
after an older one (or after a version the log never had, such as one from before the
log existed) is told to start again (:attr:`EventsRead.reset`): read the session whole.

On PostgreSQL the writing transaction also sends ``NOTIFY clotho_events, '<session id>
<version>'`` (delivered at its commit, never for a rollback), so that every process
listening (:func:`listen`) learns of it at once; the table stays the source of truth. On
SQLite readers poll the sessions' versions (:func:`versions`, one indexed read for all
the sessions a process watches). In both, a write this process commits is announced at
once (:func:`on_write_commit`, with the sessions it wrote and their versions).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, delete, event, exc, func, insert, select

from ._queries import public_ids, timestamp
from ._schema import session_events, sessions

__all__ = [
    "CHANNEL",
    "KEPT",
    "KINDS",
    "MAX_IDS",
    "POLL_S",
    "RECHECK_S",
    "EventsRead",
    "Listener",
    "PendingEvent",
    "SessionEvent",
    "listen",
    "on_write_commit",
    "versions",
]

#: How many events are kept per session (older ones are pruned by the writes).
KEPT = 500
#: How many node ids an event lists of those added, and of those changed (with counts).
MAX_IDS = 100
#: The PostgreSQL channel of the notifications.
CHANNEL = "clotho_events"
#: How often a reader on SQLite reads the versions of the sessions it watches (seconds).
POLL_S = 0.5
#: How often a reader reads the log anyway (a notification missed, a poll failed).
RECHECK_S = 5.0
#: Where a write connection notes the sessions its transaction wrote (session id ->
#: version), and where those of a committed transaction wait for its check-in.
_WRITTEN = "mnemosyne_events_written"
_COMMITTED = "mnemosyne_events_committed"

#: What an event's ``kind`` may be.
KINDS = (
    "grow",
    "turn",
    "head",
    "edit",
    "undo",
    "redo",
    "purge",
    "import",
    "session",
    "trash",
    "restore",
    "refs",
    "change",
)


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One committed change of a session. ``version``: the event's id, the version the
    change left the session at. ``payload``: ``action`` (the editor's or the turn's
    name, or ``None``), ``head`` (HEAD after it), ``added`` / ``changed`` (node ids, at
    most :data:`MAX_IDS`) and ``added_count`` / ``changed_count``; ``title`` for a
    ``session`` event that changed it."""

    session_id: str
    version: int
    kind: str
    at: datetime
    payload: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "version": self.version,
            "kind": self.kind,
            "at": self.at.isoformat(),
            **self.payload,
        }


@dataclass(frozen=True, slots=True)
class EventsRead:
    """What a reader gets: the events after the version it asked from, oldest first,
    the session's version now and its HEAD at that version (read together). ``reset``:
    the log cannot show every change after that version (pruned, or from before the
    log): read the session whole and go on from ``version``."""

    events: list[SessionEvent]
    version: int
    reset: bool = False
    head: str | None = None


@dataclass(slots=True)
class PendingEvent:
    """What one write transaction has noted for its event so far (see
    :class:`mnemosyne._transaction.TransactionState`)."""

    kind: str | None = None
    action: str | None = None
    added: list[str] = field(default_factory=list)
    added_count: int = 0
    changed: set[int] = field(default_factory=set)

    def note(
        self, kind: str, action: str | None = None, changed: Iterable[int | None] = ()
    ) -> None:
        """A write of ``kind`` (the first kind noted names the event)."""
        if self.kind is None:
            self.kind, self.action = kind, action
        self.changed.update(pk for pk in changed if pk is not None)

    def add(self, node_ids: Iterable[str]) -> None:
        """Nodes were added."""
        for node_id in node_ids:
            self.added_count += 1
            if len(self.added) < MAX_IDS:
                self.added.append(node_id)


def record(
    conn: Connection,
    session_pk: int,
    session_id: str,
    version: int,
    at: datetime,
    pending: PendingEvent,
    *,
    head_id: str | None,
    head_moved: bool,
) -> None:
    """Append the event of a write (in its transaction), prune the old ones, and on
    PostgreSQL notify the listeners (at the commit)."""
    kind = pending.kind or ("grow" if pending.added_count else "head" if head_moved else "change")
    added = set(pending.added)
    ids = public_ids(conn, pending.changed)  # a purge deletes some: they are left out
    changed = [ids[pk] for pk in sorted(ids) if ids[pk] not in added]
    payload = {
        "action": pending.action,
        "head": head_id,
        "added": pending.added,
        "added_count": pending.added_count,
        "changed": changed[:MAX_IDS],
        "changed_count": len(changed),
    }
    append(conn, session_pk, session_id, version, at, kind, payload)


def append(
    conn: Connection,
    session_pk: int,
    session_id: str,
    version: int,
    at: datetime,
    kind: str,
    payload: dict[str, Any],
) -> None:
    """Store one event (see :func:`record`), prune, notify."""
    conn.execute(
        insert(session_events).values(
            session_pk=session_pk,
            version=version,
            kind=kind,
            at=at,
            payload=json.dumps(payload, ensure_ascii=False, separators=(",", ":")),
        )
    )
    conn.execute(
        delete(session_events).where(
            session_events.c.session_pk == session_pk, session_events.c.version <= version - KEPT
        )
    )
    conn.info.setdefault(_WRITTEN, {})[session_id] = version  # for on_write_commit
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_notify(CHANNEL, f"{session_id} {version}")))


def read(
    conn: Connection,
    session_pk: int,
    session_id: str,
    version: int,
    after: int | None,
    *,
    head: str | None = None,
) -> EventsRead:
    """The events of a session after version ``after`` (``None``: none, only where the
    session stands), its version being ``version`` and its HEAD ``head`` (read in the
    same transaction)."""
    if after is None or after == version:
        return EventsRead([], version, head=head)
    if after > version or after < 0:
        return EventsRead([], version, reset=True, head=head)
    rows = conn.execute(
        select(
            session_events.c.version,
            session_events.c.kind,
            session_events.c.at,
            session_events.c.payload,
        )
        .where(session_events.c.session_pk == session_pk, session_events.c.version > after)
        .where(session_events.c.version <= version)
        .order_by(session_events.c.version)
    ).all()
    if not rows or rows[0].version != after + 1:  # pruned, or older than the log
        return EventsRead([], version, reset=True, head=head)
    events = [
        SessionEvent(session_id, row.version, row.kind, timestamp(row.at), json.loads(row.payload))
        for row in rows
    ]
    return EventsRead(events, version, head=head)


def versions(engine: Engine, session_ids: Iterable[str]) -> dict[str, int] | None:
    """The versions of the sessions ``session_ids`` that exist (one indexed read): what a
    process watching many sessions polls on SQLite. ``None``: the database could not be
    read this time (locked, or restarting): ask again at the next poll."""
    wanted = sorted(set(session_ids))
    found: dict[str, int] = {}
    try:
        with engine.connect() as conn:
            for i in range(0, len(wanted), 500):
                query = select(sessions.c.id, sessions.c.version).where(
                    sessions.c.id.in_(wanted[i : i + 500])
                )
                found.update((row.id, row.version) for row in conn.execute(query))
    except exc.DBAPIError:
        return None
    return found


def listen(
    engine: Engine,
    on_notify: Callable[[str, int], None],
    stop: threading.Event,
    *,
    every: float = 1.0,
) -> None:
    """PostgreSQL: call ``on_notify(session_id, version)`` for every event committed by
    any process, until ``stop`` is set (checked every ``every`` seconds). A dropped
    connection is opened again (``on_notify(\"\", 0)`` then tells the caller it may have
    missed some: read the table). Blocks: run it in a thread. SQLite: returns at once
    (there is nothing to listen to; poll)."""
    if engine.dialect.name != "postgresql":
        return
    import psycopg  # the PostgreSQL driver (only there)

    while not stop.is_set():
        try:
            raw = engine.raw_connection()
        except exc.DBAPIError:  # the server may be restarting: try again
            stop.wait(every)
            continue
        driver: psycopg.Connection[Any] = raw.driver_connection  # type: ignore[assignment]
        raw.detach()  # a connection of its own, never handed back to the pool
        try:
            driver.rollback()
            driver.autocommit = True
            driver.execute(f"LISTEN {CHANNEL}")
            on_notify("", 0)  # listening now: what came before is in the table
            while not stop.is_set():
                for notification in driver.notifies(timeout=every):
                    session_id, _, version = notification.payload.partition(" ")
                    if version.isdigit():
                        on_notify(session_id, int(version))
                    if stop.is_set():
                        break
        except psycopg.Error:  # the connection dropped: listen again
            stop.wait(every)
        finally:
            driver.close()


class Listener:
    """:func:`listen` in a thread of its own (PostgreSQL; on SQLite it does nothing):
    :meth:`start`, then :meth:`close` stops it and waits for the thread to end."""

    def __init__(
        self, engine: Engine, on_notify: Callable[[str, int], None], *, every: float = 1.0
    ) -> None:
        self.engine = engine
        self.on_notify = on_notify
        self.every = every
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        if self.thread is not None or self.engine.dialect.name != "postgresql":
            return
        self.thread = threading.Thread(
            target=listen,
            args=(self.engine, self.on_notify, self.stop),
            kwargs={"every": self.every},
            name="clotho-events",
            daemon=True,
        )
        self.thread.start()

    def close(self) -> None:
        """Stop listening; returns once the thread has ended (within ``every`` seconds)."""
        self.stop.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join()


def on_write_commit(
    engine: Engine, callback: Callable[[dict[str, int]], None]
) -> Callable[[], None]:
    """Call ``callback(written)`` (in the writing thread) after every write transaction
    this process has committed through ``engine`` that changed sessions (once its
    connection is back in the pool, so the commit is done); ``written``: each session's
    id and the version the transaction left it at. A reader in the same process need not
    wait for a poll or a notification. Returns what removes it."""

    def committed(conn: Connection) -> None:
        written = conn.info.pop(_WRITTEN, None)
        if written:
            conn.info.setdefault(_COMMITTED, {}).update(written)

    def rolled_back(conn: Connection) -> None:
        conn.info.pop(_WRITTEN, None)

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        if record is None:
            return
        record.info.pop(_WRITTEN, None)  # never committed
        written = record.info.pop(_COMMITTED, None)
        if written:
            callback(written)

    event.listen(engine, "commit", committed)
    event.listen(engine, "rollback", rolled_back)
    event.listen(engine, "checkin", checked_in)

    def remove() -> None:
        event.remove(engine, "commit", committed)
        event.remove(engine, "rollback", rolled_back)
        event.remove(engine, "checkin", checked_in)

    return remove
