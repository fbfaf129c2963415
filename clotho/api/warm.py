"""Warming up a server: what the first turn needs, loaded in the background at start-up.

A server that only starts listening would make its first turn pay for everything the
model side loads on first use (litellm and its route, LangGraph, the templates, the
tokenizer, the lore's embedding model): seconds on "starting…". :class:`Warmup` loads
them as soon as the server starts, in a task of the server's event loop, by the same
code a turn runs: the engine of the session changed last (its campaign, card, lore and
vector index), and a model call that litellm answers itself
(:meth:`orchestrator.Gateway.warm`). What blocks (imports, reading the lore, the
tokenizer) runs in threads of its own, so the server answers meanwhile. ``GET /api/health``
says ``warming`` until it is done, then ``ready``; the server's log (``clotho.api.warm``)
says both. A turn that comes sooner waits only for what is still loading.

A server stopped while it warms up stops at once: the warm-up is cancelled, not waited
for. Its threads are daemon threads, so the process does not wait for them either (an
import cannot be interrupted: litellm's takes seconds).

Nothing here is needed for correctness: a failure is logged in one line and the server
stays up (the first turn then meets the problem, and names it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeVar

if TYPE_CHECKING:
    from orchestrator import Engine, ModelConfig

    from .context import ApiContext

__all__ = ["Warmup"]

log = logging.getLogger(__name__)

WarmState = Literal["warming", "ready"]
T = TypeVar("T")


class Warmup:
    """Loads the model side of a server once, in a task of its event loop."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self.seconds: float | None = None
        self._loading_model = False  # a thread of it imports litellm (see cancel)

    @property
    def state(self) -> WarmState:
        return "warming" if self._task is not None and not self._task.done() else "ready"

    async def wait(self) -> None:
        """Until the warm-up is done (at once if it is): a turn that comes sooner uses
        what it loads instead of loading the same things beside it."""
        if self._task is not None and not self._task.done():
            await asyncio.wait([self._task])

    def start(self, ctx: ApiContext) -> None:
        """Begin warming the server of ``ctx`` (returns at once; call it from the
        server's event loop). A shutdown calls :meth:`cancel`, it does not wait."""
        self._task = asyncio.get_running_loop().create_task(self._run(ctx), name="clotho-warmup")

    def cancel(self) -> bool:
        """Stop warming up (the server is stopping). Returns ``True`` when a thread of
        it is still loading the model side: litellm may be half imported, and no model
        client was made for a turn (turns wait for the warm-up), so none is to close."""
        if self._task is None or self._task.done():
            return False
        self._task.cancel()
        log.info("the server stops while warming up: the warm-up is left unfinished")
        return self._loading_model

    async def _run(self, ctx: ApiContext) -> None:
        started = time.perf_counter()
        log.info("warming up what the first turn needs (the model client, templates, lore)…")
        try:
            await self._warm(ctx)
        except Exception as error:  # noqa: BLE001 - a failed warm-up must not stop the server
            log.warning("warming up failed, the first turn will load what it needs: %s", error)
        else:
            self.seconds = time.perf_counter() - started
            log.info("ready for the first turn (warmed up in %.1f s)", self.seconds)

    async def _warm(self, ctx: ApiContext) -> None:
        """What a first turn loads: the engine of the session changed last, kept by the
        server for its turns (its campaign, card, lore, vector index, templates,
        LangGraph), or with no session or no model configured, the turn loop and the
        package's templates; then the model client and its tokenizer."""
        from clotho.wiring import NoModelError

        sessions = await _in_thread(ctx.store.sessions)
        engine = None
        if sessions:
            with contextlib.suppress(NoModelError):  # warmed with no model below
                engine = await ctx.engine(sessions[0].id)  # kept by the server
        kept = engine is not None
        if engine is None:
            engine = await _in_thread(_engine_without_session, ctx)
        try:
            await _in_thread(_compile_templates, engine)
            model = engine.setup.model
            if model.model != "none":
                self._loading_model = True
                try:
                    await _in_thread(_load_model_side, model)
                finally:
                    self._loading_model = False
                # what is left: litellm's first (mock) call, on this loop, as a turn makes it
                await engine.gateway.warm(model)
                _say_if_no_key(model)
        finally:
            if not kept:
                await engine.aclose()


async def _in_thread(function: Callable[..., T], *args: object) -> T:
    """``function(*args)`` in a daemon thread of its own, awaited: a cancelled wait
    leaves the thread to finish (or to end with the process) instead of holding the
    shutdown, as a worker thread of the server's pool would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def work() -> None:
        result, error = None, None
        try:
            result = function(*args)
        except BaseException as failed:  # noqa: BLE001 - handed to the waiting task
            error = failed
        with contextlib.suppress(RuntimeError):  # the loop has closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name="clotho-warmup", daemon=True).start()
    return await future


def _say_if_no_key(model: ModelConfig) -> None:
    """A model whose provider's key is not set: said in the log as the server starts,
    not first to a player whose turn fails."""
    from orchestrator.gateway import no_key_error

    missing = no_key_error(model)
    if missing is not None:
        log.warning("%s: every turn will fail until the server is started with one", missing)


def _engine_without_session(ctx: ApiContext) -> Engine:
    from clotho.wiring import turn_setup
    from orchestrator import build_engine

    setup = turn_setup(ctx.settings, None, require_model=False)
    return build_engine(ctx.store, setup, close_clients=False)


def _compile_templates(engine: Engine) -> None:
    from prompts import TEMPLATE_NAMES

    for name in TEMPLATE_NAMES:
        engine.setup.templates.used(name)  # read and compiled


def _load_model_side(model: ModelConfig) -> None:
    """litellm imported, the model's route worked out, its tokenizer and window loaded,
    and a call litellm answers itself made the blocking way: the modules a call loads
    on first use are loaded here, in a worker thread, so the streamed call left for the
    event loop (:meth:`orchestrator.Gateway.warm`) stalls it far less."""
    from orchestrator import Gateway
    from orchestrator.gateway import litellm_module, route

    Gateway.counter(model)("warm")
    Gateway.context_window(model)
    messages = [{"role": "user", "content": "warm"}]
    answer = litellm_module().completion(
        **route(model), messages=messages, stream=True, mock_response="warm"
    )
    for _chunk in answer:
        pass
