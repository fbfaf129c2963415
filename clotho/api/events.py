"""Watching a session live: ``GET /api/sessions/{session_id}/events``, its changes as
server-sent events (see docs/events.md).

The database is the log (:mod:`mnemosyne.events`): every committed write of the session
left one event there, named by the version it made. The stream first sends ``ready``
(where the session stands), then one ``change`` per write as it commits, whichever
process wrote it; each event's ``id`` is the session's version after it, so a client that
reconnects with ``Last-Event-ID`` (or ``?last_event_id=``) misses nothing and sees nothing
twice. A client further behind than the log keeps gets ``reset``: read the session again.

What wakes a stream (only the streams of the session written, and once per version):
on PostgreSQL, one thread per server process LISTENs to the notifications the writing
transactions send (delivered at their commit), so every worker of every server on the
database delivers the same events. On SQLite (one machine) one poller per process reads
the versions of every session watched twice a second, one indexed read for them all. On
both, a write this process commits wakes the streams of its sessions as soon as it is
committed (:func:`mnemosyne.events.on_write_commit`). The table stays the source of
truth: each stream also reads it every few seconds, in case a wake was missed.

A stream ends when the client leaves, and when the server shuts down (so a shutdown does
not wait for its watchers: they reconnect, to another worker or when it is back).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import AsyncIterator, Callable
from types import FrameType
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from mnemosyne import Store, UnknownSessionError, events
from mnemosyne.events import POLL_S, RECHECK_S, EventsRead

from ._common import context
from .deps import SessionDep
from .turn_schemas import event_schema
from .turns import LastEventId

__all__ = ["Hub", "close_hub", "router"]

router = APIRouter(tags=["reading"])


class _Shutdown:
    """Set when the server process is told to stop (SIGINT, SIGTERM): the streams end, so
    that the server does not wait for them. The server's own handlers still run."""

    def __init__(self, on_stop: Callable[[], None]) -> None:
        self.event: asyncio.Event | None = None
        self.on_stop = on_stop

    def watch(self) -> asyncio.Event:
        if self.event is not None:
            return self.event
        self.event = asyncio.Event()
        loop = asyncio.get_running_loop()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous = signal.getsignal(sig)
                if callable(previous):
                    signal.signal(sig, self._chain(loop, previous))
        return self.event

    def _chain(
        self, loop: asyncio.AbstractEventLoop, previous: Callable[[int, FrameType | None], Any]
    ) -> Callable[[int, FrameType | None], Any]:
        def handler(signum: int, frame: FrameType | None) -> Any:
            self.on_stop()
            if self.event is not None:
                loop.call_soon_threadsafe(self.event.set)
            return previous(signum, frame)

        return handler


class Hub:
    """This process's streams, and what wakes them: its own commits, and the database's
    notifications (PostgreSQL) or one poll of the watched sessions' versions (SQLite).
    A stream is woken only for its own session, once per version."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.listens = store.dialect == "postgresql"
        self.waiting: dict[str, set[asyncio.Event]] = {}
        self.known: dict[str, int] = {}  # the last version each session's streams woke for
        self.loop: asyncio.AbstractEventLoop | None = None
        self.listener = events.Listener(store.engine, self._notified)
        self.poller: asyncio.Task[None] | None = None
        self.unhook: Callable[[], None] | None = None
        self.shutdown = _Shutdown(self.listener.stop.set)

    def subscribe(self, session_id: str) -> asyncio.Event:
        """An event set whenever the session may have changed."""
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self.unhook = events.on_write_commit(self.store.engine, self._committed)
            if self.listens:
                self.listener.start()
            else:
                self.poller = asyncio.ensure_future(self._poll())
        woken = asyncio.Event()
        self.waiting.setdefault(session_id, set()).add(woken)
        return woken

    def unsubscribe(self, session_id: str, woken: asyncio.Event) -> None:
        waiting = self.waiting.get(session_id)
        if waiting is not None:
            waiting.discard(woken)
            if not waiting:
                del self.waiting[session_id]
                self.known.pop(session_id, None)

    async def aclose(self) -> None:
        """Stop: the streams end, the commit hook goes, the poller or the listening
        thread ends (waited for)."""
        if self.shutdown.event is not None:
            self.shutdown.event.set()
        if self.unhook is not None:
            self.unhook()
            self.unhook = None
        if self.poller is not None:
            self.poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.poller
        await run_in_threadpool(self.listener.close)

    def _committed(self, written: dict[str, int]) -> None:  # the writing thread
        for session_id, version in written.items():
            self._notified(session_id, version)

    def _notified(self, session_id: str, version: int) -> None:  # another thread
        if self.loop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self._wake, session_id, version)

    def _wake(self, session_id: str, version: int | None) -> None:
        """Wake the streams of ``session_id`` if ``version`` is new to them (``None``:
        whatever it is, the session is gone); ``""``: every stream (the listener
        connected again: anything may have been missed)."""
        if session_id == "":
            for every in self.waiting.values():
                for woken in every:
                    woken.set()
            return
        waiting = self.waiting.get(session_id)
        if not waiting:
            return
        if version is not None:
            if version <= self.known.get(session_id, -1):
                return  # woken for it already (its commit here, then its notification)
            self.known[session_id] = version
        for woken in waiting:
            woken.set()

    async def _poll(self) -> None:
        """SQLite: the watched sessions' versions, every POLL_S seconds, one read."""
        while True:
            await asyncio.sleep(POLL_S)
            watched = list(self.waiting)
            if not watched:
                continue
            found = await run_in_threadpool(events.versions, self.store.engine, watched)
            if found is None:  # not readable this time: the next poll asks again
                continue
            for session_id in watched:
                self._wake(session_id, found.get(session_id))


def _hub(request: Request) -> Hub:
    found: Hub | None = getattr(request.app.state, "live_events", None)
    store = context(request).store
    if found is None or found.store is not store:
        if found is not None:  # the app's store was replaced: its hub stops
            _closing.add(closing := asyncio.ensure_future(found.aclose()))
            closing.add_done_callback(_closing.discard)
        found = Hub(store)
        request.app.state.live_events = found
    return found


_closing: set[asyncio.Future[None]] = set()  # hubs being closed (kept until they are)


async def close_hub(state: Any) -> None:
    """Stop the app's hub, if it has one (at the end of the app's lifespan)."""
    found: Hub | None = getattr(state, "live_events", None)
    if found is not None:
        state.live_events = None
        await found.aclose()


def _resume_from(
    header: LastEventId,
    last_event_id: Annotated[
        int | None,
        Query(
            ge=0,
            description="The `id` of the last event seen, for a client that cannot send "
            "the `Last-Event-ID` header (the header wins).",
        ),
    ] = None,
) -> int | None:
    return header if header is not None else last_event_id


ResumeFrom = Annotated[int | None, Depends(_resume_from)]


def _event(kind: str, version: int, data: dict[str, Any]) -> ServerSentEvent:
    return ServerSentEvent(event=kind, id=str(version), data=data)


def _schema(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return event_schema(
        name,
        description,
        {"type": "object", "properties": properties},
        numbered="The session's version after it.",
    )


_VERSION = {"version": {"type": "integer"}, "session_id": {"type": "string"}}
_CHANGE = {
    **_VERSION,
    "kind": {"type": "string", "enum": list(events.KINDS)},
    "at": {"type": "string", "format": "date-time"},
    "action": {"type": ["string", "null"]},
    "head": {"type": ["string", "null"]},
    "added": {"type": "array", "items": {"type": "string"}},
    "added_count": {"type": "integer"},
    "changed": {"type": "array", "items": {"type": "string"}},
    "changed_count": {"type": "integer"},
    "title": {"type": ["string", "null"]},
}
EVENTS_STREAM: dict[str, Any] = {
    "itemSchema": {
        "oneOf": [
            _schema("ready", "First: where the session stands (its version, HEAD).", _VERSION),
            _schema("change", "One committed write of the session.", _CHANGE),
            _schema(
                "reset",
                "The log no longer holds every change after the id resumed from: read "
                "the session again; the stream goes on from `version`.",
                _VERSION,
            ),
        ]
    }
}


@router.get(
    "/sessions/{session_id}/events",
    summary="Watch a session's changes live",
    response_class=EventSourceResponse,
    responses={
        200: {
            "description": "The session's events.",
            "content": {"text/event-stream": EVENTS_STREAM},
        }
    },
)
async def session_events(
    session: SessionDep, request: Request, after: ResumeFrom
) -> AsyncIterator[ServerSentEvent]:
    """`ready`, then a `change` for every write of the session as it commits (new nodes,
    HEAD moves, edits, undo and redo, imports, title, trash), made by any client of any
    server process on the database; `id` is the session's version after it. Resume
    with `Last-Event-ID` (or `?last_event_id=`): the changes after it come first, or
    `reset` if the log (its last 500 events) no longer reaches back that far. Comments
    keep the connection alive; the stream ends when the server stops."""
    hub = _hub(request)
    store, sid = hub.store, session.id
    stop = hub.shutdown.watch()
    woken = hub.subscribe(sid)
    try:
        read: EventsRead = await run_in_threadpool(store.events, sid, after=after)
        yield _event(
            "ready",
            after if after is not None and not read.reset else read.version,
            {"session_id": sid, "version": read.version, "head": read.head},
        )
        while True:
            if read.reset:
                yield _event("reset", read.version, {"session_id": sid, "version": read.version})
            for change in read.events:
                yield _event("change", change.version, change.as_dict())
            last = read.version
            if await _wait(woken, stop, request, RECHECK_S):
                return
            try:
                read = await run_in_threadpool(store.events, sid, after=last)
            except UnknownSessionError:  # purged meanwhile: nothing more will come
                return
    finally:
        hub.unsubscribe(sid, woken)


async def _wait(
    woken: asyncio.Event, stop: asyncio.Event, request: Request, timeout: float
) -> bool:
    """Until the session may have changed or ``timeout``; whether the stream must end
    (the server stops, or the client has left)."""
    if stop.is_set():
        return True
    waits = [asyncio.ensure_future(woken.wait()), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in waits:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending
    woken.clear()
    return stop.is_set() or await request.is_disconnected()
