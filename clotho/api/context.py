"""What the routes share: the settings, the store, the engines, and the HTTP details
every route needs (the session version as ETag, If-Match, If-None-Match)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Hashable
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool

from clotho.settings import Settings
from mnemosyne import ConflictError, Session, Store

from .engines import EngineCache, SessionTurnLock, TurnLocks
from .etags import entity_tags, etag, none_match
from .problems import ApiError
from .turn_registry import TurnRegistry

if TYPE_CHECKING:
    from orchestrator import Engine

__all__ = ["ApiContext", "expected_version", "not_modified"]

#: Sessions whose engines (model settings, templates, lore index) a process keeps.
MAX_ENGINES = 32


def expected_version(request: Request) -> int | None:
    """The version named by ``If-Match`` (``None``: absent or ``*``).

    If-Match uses the strong comparison (RFC 9110, 13.1.1): a weak tag (``W/"2"``)
    never matches, so a write that names one is refused (412) whatever the version.

    Raises:
        ApiError: 400 ``bad_if_match``, the header is not one entity-tag naming a
            version (``3`` without its quotes, a list); 412 ``weak_if_match``, it is weak.
    """
    header = request.headers.get("if-match")
    if header is None or header.strip() == "*":
        return None
    tags = entity_tags(header)
    # ASCII digits only ("²".isdigit()), and few enough for int() and any real version.
    if tags is None or len(tags) != 1 or not re.fullmatch(r"[0-9]{1,18}", tags[0][1]):
        raise ApiError(
            400,
            "bad_if_match",
            f'If-Match must be one session version as an ETag, such as "12", not {header!r}',
        )
    if tags[0][0]:
        raise ApiError(
            412,
            "weak_if_match",
            f"If-Match names a weak ETag ({header.strip()}), which never matches: send "
            f'the ETag as the server gave it, such as "{tags[0][1]}"',
        )
    return int(tags[0][1])


def not_modified(request: Request, session: Session) -> Response | None:
    """A 304 if ``If-None-Match`` names the session's current version."""
    if none_match(request.headers.get("if-none-match"), session.version):
        return Response(status_code=304, headers={"ETag": etag(session.version)})
    return None


def check_version(session: Session, expected: int | None) -> None:
    """Refuse (412) a write whose If-Match names another version than the session's."""
    if expected is not None and expected != session.version:
        raise ConflictError(session.id, expected, session.version)


class ApiContext:
    """The state of one server process: its settings and store, the engines of the
    sessions played last (``max_engines``, the least recently used closed when it
    goes), one turn at a time per session (:attr:`turn_locks`), and the tasks to wait
    for at shutdown (:attr:`tasks`)."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        token: str | None,
        *,
        max_engines: int = MAX_ENGINES,
    ) -> None:
        self.settings = settings
        self.store = store
        self.token = token
        self.turn_locks = TurnLocks()
        self._engines = EngineCache(max_engines, busy=self.turn_locks.in_use)
        self._building: dict[str, tuple[Hashable, asyncio.Future[Engine]]] = {}
        self.tasks: set[asyncio.Task[Any]] = set()
        self.turns = TurnRegistry()
        """The turns this process plays and has played lately."""
        self.replays = TurnRegistry()
        """The replays likewise (by Idempotency-Key: :mod:`clotho.api.replay`)."""
        self.cascades = TurnRegistry()
        """The cascades likewise (:mod:`clotho.api.cascade`)."""

    async def engine(self, session_id: str) -> Engine:
        """The engine that plays a session (kept while its documents stay the same; one
        let go is closed). Built in a worker thread (reading the lore blocks), once:
        requests that ask while it is being built wait for that one.

        Raises:
            NoModelError: no model is configured.
            CampaignError, PlannerError: the campaign or the session's lore is broken.
        """
        key = await run_in_threadpool(self._engine_key, session_id)
        known = self._engines.get(session_id, key)
        if known is not None:
            return known
        building = self._building.get(session_id)
        if building is None or building[0] != key:
            task = asyncio.ensure_future(self._build(session_id, key))
            building = self._building[session_id] = (key, task)
            task.add_done_callback(lambda _: self._forget_build(session_id, task))
        # shielded: one request giving up does not cancel the build the others wait for
        return await asyncio.shield(building[1])

    async def _build(self, session_id: str, key: Hashable) -> Engine:
        from clotho.wiring import session_engine

        engine = await run_in_threadpool(
            partial(session_engine, self.settings, self.store, session_id, close_clients=False)
        )
        for gone in self._engines.put(session_id, key, engine):
            await gone.aclose()
        return engine

    def _forget_build(self, session_id: str, task: asyncio.Future[Engine]) -> None:
        if self._building.get(session_id, (None, None))[1] is task:
            del self._building[session_id]
        if not task.cancelled():
            task.exception()  # retrieved: a failed build is its requests' error, not a log line

    def _engine_key(self, session_id: str) -> Hashable:
        """What an engine is built from, beside the session's id: its documents (a new
        lorebook makes a new engine), its settings (the connection profile it names...)
        and the profiles' files as they are now (a profile or key changed, by the page or
        by hand, takes effect on the next turn)."""
        from clotho.profiles import Profiles
        from clotho.sessionconfig import METADATA_KEY

        documents = tuple((d.kind, d.name, d.hash) for d in self.store.documents(session_id))
        settings = self.store.session(session_id).metadata.get(METADATA_KEY)
        chosen = json.dumps(settings, sort_keys=True, default=str)
        return documents, chosen, Profiles(self.settings.config_dir).stamp()

    def turn_lock(self, session_id: str) -> SessionTurnLock:
        """One turn at a time per session in this process (they share an engine):
        ``async with ctx.turn_lock(session_id)``. It is forgotten when no turn holds it
        or waits for it."""
        return self.turn_locks(session_id)

    async def aclose(self, *, model_clients: bool = True) -> None:
        """Wait for the tasks (30 s each at most) and the engines being built, close the
        engines, then the model clients the engines shared (litellm's, of this loop;
        ``model_clients=False``: none was made, and litellm may be half imported)."""
        for task in list(self.tasks):
            await asyncio.wait([task], timeout=30)
        building = [task for _, task in self._building.values()]
        await asyncio.gather(*building, return_exceptions=True)  # then kept: closed below
        for engine in self._engines.clear():
            await engine.aclose()
        # else no model client was ever made (nor litellm imported)
        if model_clients and "litellm" in sys.modules:
            from orchestrator import Gateway

            await Gateway().aclose()
