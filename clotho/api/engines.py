"""What a server process keeps per session between requests: the engines that play its
turns (a bounded cache) and the lock that plays them one at a time.

:class:`EngineCache` keeps at most ``limit`` engines, the least recently *used* going
first, and hands back every engine it lets go (evicted, or replaced by one built for the
session's new documents) so that its owner closes it (``Engine.aclose`` is a coroutine,
which ``functools.lru_cache`` and its kin cannot await). A session whose turn is running
or waiting is never evicted: its engine is in use.

:class:`TurnLocks` holds a session's lock only while a turn holds it or waits for it: a
server that has played a million sessions keeps no lock for any of them.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orchestrator import Engine

__all__ = ["EngineCache", "SessionTurnLock", "TurnLocks"]


class EngineCache:
    """The engines of the sessions played last, each with the key it was built for (the
    session's documents: a new lorebook makes a new engine)."""

    def __init__(self, limit: int, busy: Callable[[str], bool] = lambda _session: False) -> None:
        if limit < 1:
            raise ValueError(f"an engine cache holds at least one engine, not {limit}")
        self.limit = limit
        self._busy = busy
        self._kept: OrderedDict[str, tuple[Hashable, Engine]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._kept

    def get(self, session_id: str, key: Hashable) -> Engine | None:
        """The session's engine if it was built for ``key`` (it becomes the most recently
        used); ``None`` otherwise."""
        known = self._kept.get(session_id)
        if known is None or known[0] != key:
            return None
        self._kept.move_to_end(session_id)
        return known[1]

    def put(self, session_id: str, key: Hashable, engine: Engine) -> list[Engine]:
        """Keep ``engine`` as the session's (the most recently used); the engines let go,
        for the caller to close: the session's previous one, and the least recently used
        beyond the limit whose sessions are not busy."""
        gone: list[Engine] = []
        previous = self._kept.pop(session_id, None)
        if previous is not None and previous[1] is not engine:
            gone.append(previous[1])
        self._kept[session_id] = (key, engine)
        excess = len(self._kept) - self.limit
        for candidate in list(self._kept):
            if excess <= 0:
                break
            if candidate != session_id and not self._busy(candidate):
                gone.append(self._kept.pop(candidate)[1])
                excess -= 1
        return gone

    def clear(self) -> list[Engine]:
        """Let every engine go; they are returned for the caller to close."""
        gone = [engine for _, engine in self._kept.values()]
        self._kept.clear()
        return gone


@dataclass
class _Held:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0
    """Turns holding the lock or waiting for it."""


class TurnLocks:
    """One turn at a time per session, in this process."""

    def __init__(self) -> None:
        self._held: dict[str, _Held] = {}

    def __len__(self) -> int:
        """Sessions with a turn holding or waiting for their lock."""
        return len(self._held)

    def __call__(self, session_id: str) -> SessionTurnLock:
        """The session's lock, to hold with ``async with``."""
        return SessionTurnLock(self, session_id)

    def in_use(self, session_id: str) -> bool:
        """Whether a turn of the session holds its lock or waits for it."""
        return session_id in self._held

    def locked(self, session_id: str) -> bool:
        """Whether a turn of the session holds its lock (one coming would wait)."""
        held = self._held.get(session_id)
        return held is not None and held.lock.locked()

    async def acquire(self, session_id: str) -> None:
        """Wait for the session's lock and take it."""
        held = self._held.setdefault(session_id, _Held())
        held.users += 1
        try:
            await held.lock.acquire()
        except BaseException:  # cancelled while waiting: this turn no longer uses it
            self._leave(session_id, held)
            raise

    def release(self, session_id: str) -> None:
        """Give the session's lock back (forgotten if no turn waits for it)."""
        held = self._held[session_id]
        held.lock.release()
        self._leave(session_id, held)

    def _leave(self, session_id: str, held: _Held) -> None:
        held.users -= 1
        if held.users == 0:
            del self._held[session_id]


class SessionTurnLock:
    """A session's turn lock: ``async with`` it to play a turn; :meth:`locked` tells
    whether a turn holds it now (one coming would wait)."""

    def __init__(self, locks: TurnLocks, session_id: str) -> None:
        self._locks = locks
        self.session_id = session_id

    def locked(self) -> bool:
        return self._locks.locked(self.session_id)

    async def __aenter__(self) -> None:
        await self._locks.acquire(self.session_id)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._locks.release(self.session_id)
