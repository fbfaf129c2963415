"""Warming up a server: what the first turn needs, loaded in the background at start-up.

A server that only starts listening would make its first turn pay for everything the
model side loads on first use (litellm and its route, LangGraph, the templates, the
tokenizer, the lore's embedding model): seconds on "starting…". :class:`Warmup` loads
them in a thread as soon as the server starts, by the same code a turn runs: the engine
of the session changed last (its campaign, card, lore and vector index), and a model
call that litellm answers itself (:meth:`orchestrator.Gateway.warm`). ``GET
/api/health`` says ``warming`` until it is done, then ``ready``; the server's output
says both. A turn that comes sooner waits only for what is still loading.

Nothing here is needed for correctness: a failure is reported in one line and the
server stays up (the first turn then meets the problem, and names it).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from .context import ApiContext

__all__ = ["Warmup"]

WarmState = Literal["warming", "ready"]


class Warmup:
    """Loads the model side of a server once, in a daemon thread."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._done.set()  # nothing is warming until start()
        self.seconds: float | None = None

    @property
    def state(self) -> WarmState:
        return "ready" if self._done.is_set() else "warming"

    async def wait(self) -> None:
        """Until the warm-up is done (at once if it is): a turn that comes sooner uses
        what it loads instead of loading the same things beside it."""
        if not self._done.is_set():
            await asyncio.to_thread(self._done.wait)

    def start(self, ctx: ApiContext) -> None:
        """Begin warming the server of ``ctx`` (returns at once)."""
        self._done.clear()
        threading.Thread(target=self._run, args=(ctx,), name="clotho-warmup", daemon=True).start()

    def _run(self, ctx: ApiContext) -> None:
        started = time.perf_counter()
        _say("warming up what the first turn needs (the model client, templates, lore)…")
        try:
            _warm(ctx)
        except Exception as error:  # noqa: BLE001 - a failed warm-up must not stop the server
            _say(f"warming up failed, the first turn will load what it needs: {error}")
        else:
            self.seconds = time.perf_counter() - started
            _say(f"ready for the first turn (warmed up in {self.seconds:.1f} s)")
        finally:
            self._done.set()


def _say(line: str) -> None:
    sys.stderr.write(f"clotho: {line}\n")
    sys.stderr.flush()


def _warm(ctx: ApiContext) -> None:
    """What a first turn loads: the engine of the session changed last, kept by the
    server for its turns (its campaign, card, lore, vector index, templates, LangGraph),
    or with no session or no model configured, the turn loop and the package's templates;
    then the model client and its tokenizer."""
    from clotho.wiring import NoModelError, turn_setup
    from orchestrator import Engine, Gateway
    from prompts import TEMPLATE_NAMES

    sessions = ctx.store.sessions()
    engine = None
    if sessions:
        with contextlib.suppress(NoModelError):  # warmed with no model below
            engine = ctx.engine(sessions[0].id)
    if engine is None:
        engine = Engine(ctx.store, turn_setup(ctx.settings, None, require_model=False))
    for name in TEMPLATE_NAMES:
        engine.setup.templates.used(name)  # read and compiled
    if engine.setup.model.model != "none":
        # a call litellm answers itself opens no connection: nothing to close after it
        asyncio.run(Gateway().warm(engine.setup.model))
