"""The turns a server process is playing or has just played, as resources: each has an
id, a status, and its events, which any number of clients follow (from the start, or
after the last event id they saw).

A running turn keeps every event it sent, so a client that rejoins gets the reply so far
and then the rest as it comes; a client following it when it ends still gets every
event. Once those have gone, an ended turn keeps only its final event (``node``,
``error`` or ``cancelled``), which a later client gets again. Ended turns are kept for
:data:`KEEP_ENDED_S` seconds and at most :data:`MAX_ENDED` of them (the oldest go first);
a running turn is never dropped. Everything lives in the process's memory: with several
worker processes, a turn is known to the worker that plays it.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from fastapi.sse import ServerSentEvent

__all__ = ["KEEP_ENDED_S", "MAX_ENDED", "Asked", "Turn", "TurnRegistry", "TurnStatus"]

TurnStatus = Literal["running", "done", "failed", "cancelled"]

#: How long an ended turn is kept (its status and final event), in seconds.
KEEP_ENDED_S = 3600.0
#: How many ended turns a process keeps at most.
MAX_ENDED = 256


@dataclass(frozen=True)
class Asked:
    """What a turn was asked to do (a retry with the same Idempotency-Key must ask the
    same)."""

    kind: str
    text: str | None
    node_id: str | None
    detach: bool
    speaker: str | None = None


@dataclass(eq=False)
class Turn:
    """One turn: what it is, how it stands, and its events."""

    turn_id: str
    session_id: str
    asked: Asked
    created_at: datetime
    idempotency_key: str | None = None
    status: TurnStatus = "running"
    ended_at: datetime | None = None
    outcome: dict[str, Any] = field(default_factory=dict)
    """Once ended: ``node_id``, ``user_node_id``, ``version``, ``head_id``,
    ``incomplete``, ``problem`` (what is known of each)."""
    replied: bool = False
    """The reply (or the model's reasoning) has begun streaming."""
    started: bool = False
    """The turn holds its session's lock: the engine is playing it."""
    followers: int = 0
    on_abandoned: Callable[[], None] | None = None
    """Called when the last client following the turn leaves while it runs."""
    on_cancel: Callable[[], None] | None = None
    """Stops the turn (what it keeps is the caller's to decide)."""
    plan: dict[str, Any] = field(default_factory=dict)
    """A cascade's: what it regenerates (``CascadePlan.as_dict``, ``done`` kept up to date)."""
    _events: list[ServerSentEvent] = field(default_factory=list)
    _first: int = 0  # the id of _events[0]
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def ended(self) -> bool:
        return self.status != "running"

    @property
    def last_event_id(self) -> int:
        return self._first + len(self._events) - 1

    def publish(self, event: str, data: Any) -> None:
        """Send an event to every client following the turn (and keep it for later ones)."""
        if self.ended:
            return
        if event in ("token", "reasoning"):
            self.replied = True
        self._append(event, data)

    def end(self, status: TurnStatus, event: str, data: Any, **outcome: Any) -> None:
        """End the turn with its final event (``data``, or ``data()`` called once the
        turn's status is set). The clients following it get every event still; once they
        have gone, only the final event is kept."""
        if self.ended:
            return
        self.status = status
        self.ended_at = datetime.now(UTC)
        self.outcome = outcome
        self._append(event, data() if callable(data) else data)
        if self.followers == 0:
            self._keep_last()

    def _keep_last(self) -> None:
        self._first = self.last_event_id
        self._events = self._events[-1:]

    def _append(self, event: str, data: Any) -> None:
        number = self._first + len(self._events)
        self._events.append(
            ServerSentEvent(
                event=event, raw_data=json.dumps(data, ensure_ascii=False), id=str(number)
            )
        )
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait(self, timeout: float) -> None:
        """Until the turn has ended, or ``timeout`` seconds have passed."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.ended:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return
            try:
                await asyncio.wait_for(self._changed.wait(), left)
            except TimeoutError:
                return

    async def follow(self, after: int | None = None) -> AsyncIterator[ServerSentEvent]:
        """The turn's events after the one numbered ``after`` (``None``: from the start),
        then each as it comes, until the final one. Of an ended turn, only the final
        event."""
        self.followers += 1
        try:
            number = 0 if after is None else after + 1
            if self.ended:
                number = max(number, self.last_event_id)
            while True:
                number = max(number, self._first)
                while number <= self.last_event_id:
                    yield self._events[number - self._first]
                    number += 1
                if self.ended:
                    return
                changed = self._changed
                await changed.wait()
        finally:
            self.followers -= 1
            if self.followers == 0 and self.ended:
                self._keep_last()
            elif self.followers == 0 and self.on_abandoned is not None:
                self.on_abandoned()


class TurnRegistry:
    """The turns of one server process, by id, by session, and by Idempotency-Key."""

    def __init__(self, *, keep_s: float = KEEP_ENDED_S, max_ended: int = MAX_ENDED) -> None:
        self.keep_s = keep_s
        self.max_ended = max_ended
        self._turns: dict[str, Turn] = {}
        self._ended: OrderedDict[str, float] = OrderedDict()  # turn id -> when it ended
        self._keys: dict[tuple[str, str], str] = {}  # (session id, key) -> turn id

    def create(self, session_id: str, asked: Asked, key: str | None = None) -> Turn:
        turn = Turn(
            turn_id=uuid.uuid4().hex,
            session_id=session_id,
            asked=asked,
            created_at=datetime.now(UTC),
            idempotency_key=key,
        )
        self._turns[turn.turn_id] = turn
        if key is not None:
            self._keys[(session_id, key)] = turn.turn_id
        return turn

    def ended(self, turn: Turn) -> None:
        """Note that ``turn`` ended (it is kept a while, then forgotten)."""
        self._ended[turn.turn_id] = time.monotonic()
        self._forget()

    def _forget(self) -> None:
        horizon = time.monotonic() - self.keep_s
        while self._ended:
            oldest, when = next(iter(self._ended.items()))
            if when > horizon and len(self._ended) <= self.max_ended:
                break
            del self._ended[oldest]
            turn = self._turns.pop(oldest)
            if turn.idempotency_key is not None:
                self._keys.pop((turn.session_id, turn.idempotency_key), None)

    def get(self, session_id: str, turn_id: str) -> Turn | None:
        """The turn of that session with that id, if this process knows it."""
        self._forget()
        turn = self._turns.get(turn_id)
        return turn if turn is not None and turn.session_id == session_id else None

    def by_key(self, session_id: str, key: str) -> Turn | None:
        self._forget()
        turn_id = self._keys.get((session_id, key))
        return None if turn_id is None else self._turns.get(turn_id)

    def of_session(self, session_id: str) -> list[Turn]:
        """The session's turns this process knows, newest first."""
        self._forget()
        turns = [turn for turn in self._turns.values() if turn.session_id == session_id]
        return sorted(turns, key=lambda turn: turn.created_at, reverse=True)
