"""Playing turns (say, reroll, edit, continue, impersonate), streamed as server-sent
events.

Events, each a JSON object in ``data``:

- ``status`` ``{"text"}``: what the engine is doing: each step until the reply begins
  (reading the story, choosing the lore, building the prompt, waiting for the model),
  then anything that takes a while (summarising, updating the world state);
- ``token`` / ``reasoning`` ``{"text"}``: the reply (or the model's reasoning) as it
  is written;
- ``warning`` ``{"text"}``: something the player should know (an incomplete reply, a
  state delta that failed);
- ``node``: the turn was committed: ``{"node", "user_node", "session", "state",
  "incomplete", "warnings", "usage"}``; the last event;
- ``error``: a problem document (RFC 9457); the last event, nothing was stored.

A client that disconnects while the reply streams stops it: the text so far is kept,
marked incomplete, as Ctrl+C does in the terminal (before its first word, no reply is
stored: the player's message of a say or an edit is, HEAD on it). A client that
disconnects at any other moment stops nothing: the turn is played to its end and
stored whole (while the state delta is extracted, that costs one call and loses
nothing, unlike Ctrl+C, which a player presses on purpose). With ``Accept:
application/json`` the turn is played to the end and its result returned as one
document instead.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ._common import context, document
from .context import ApiContext, check_version, etag, expected_version
from .problems import problem_of
from .schemas import TurnBody, TurnResultOut

if TYPE_CHECKING:
    from orchestrator import Engine, TurnRequest, TurnResult

__all__ = ["router"]

router = APIRouter(tags=["playing"])
log = logging.getLogger("clotho.api")
KEEP_ALIVE_S = 15.0

_EVENTS_DOC = (
    'Server-sent events: `status`, `token`, `reasoning`, `warning` (`{"text"}`), then '
    "`node` (the committed turn, as the JSON response) or `error` (a problem document)."
)

#: One event of the stream (OpenAPI before 3.2 has the schema of an event stream describe
#: each event; ``data`` is a JSON document).
SSE_EVENT = {
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "event": {
            "type": "string",
            "enum": ["status", "token", "reasoning", "warning", "node", "error"],
        },
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _result(ctx: ApiContext, result: TurnResult) -> dict[str, Any]:
    state = ctx.store.state(result.session.id, result.node.id)
    return {
        "node": result.node.as_dict(),
        "user_node": result.user_node.as_dict() if result.user_node else None,
        "session": result.session.as_dict(),
        "state": {"node_id": result.node.id, **state.as_dict()},
        "incomplete": result.completion.incomplete,
        "warnings": result.warnings,
        "usage": result.completion.usage or {},
    }


def _prepare(ctx: ApiContext, session_id: str, body: TurnBody, expected: int | None) -> Any:
    """Everything that can refuse the turn before it starts (a 4xx, not an event)."""
    from orchestrator import TurnRequest
    from orchestrator.turn import locate_turn

    session = ctx.store.session(session_id)
    check_version(session, expected)
    request = TurnRequest(body.kind, text=body.text, node=body.node_id)
    locate_turn(ctx.store, session.id, request)
    return session, request, ctx.engine(session.id)


@router.post(
    "/sessions/{session_id}/turns",
    summary="Play a turn (streamed)",
    response_model=TurnResultOut,
    responses={
        200: {
            "description": _EVENTS_DOC + " With `Accept: application/json`: the result.",
            "content": {"text/event-stream": {"schema": SSE_EVENT}},
        }
    },
)
async def play_turn(request: Request, session_id: str, body: TurnBody) -> Response:
    """say (a player's message and the reply), reroll (a new alternative of a reply),
    edit (a player's message forked with new text, and the reply), continue (one more
    reply), impersonate (the model writes the player's next message)."""
    ctx = context(request)
    expected = expected_version(request)
    await request.app.state.warmup.wait()  # a server just started: what it is loading
    session, turn, engine = await run_in_threadpool(_prepare, ctx, session_id, body, expected)
    accept = request.headers.get("accept", "")
    if "application/json" in accept and "text/event-stream" not in accept:
        result = await _play(ctx, engine, session.id, turn, None)
        payload = await run_in_threadpool(_result, ctx, result)
        return document(payload, result.session)
    queue: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue()

    def on_event(kind: str, text: str) -> None:
        # the engine's progress through its steps is a status to the page
        queue.put_nowait(("status" if kind == "progress" else kind, {"text": text}))

    started = asyncio.Event()  # this turn holds the session's lock (is the engine's)

    async def play() -> None:
        try:
            result = await _play(ctx, engine, session.id, turn, on_event, started)
            queue.put_nowait(("node", await run_in_threadpool(_result, ctx, result)))
        except Exception as error:  # every failure ends the stream, named
            if getattr(error, "code", None) is None:
                log.exception("turn failed in session %s", session.id)
            queue.put_nowait(("error", problem_of(error, request.url.path)))
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(play())
    ctx.tasks.add(task)
    task.add_done_callback(ctx.tasks.discard)

    async def events() -> AsyncIterator[bytes]:
        try:
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), KEEP_ALIVE_S)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if item is None:
                    return
                yield _sse(*item)
        finally:
            if not task.done() and started.is_set():
                engine.stop_reply()  # the client left: keep the reply so far, incomplete

    headers = {
        "Cache-Control": "no-cache",
        "X-Accel-Buffering": "no",
        "ETag": etag(session.version),
    }
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


async def _play(
    ctx: ApiContext,
    engine: Engine,
    session_id: str,
    turn: TurnRequest,
    on_event: Any,
    started: asyncio.Event | None = None,
) -> TurnResult:
    lock = ctx.turn_lock(session_id)
    if lock.locked() and on_event is not None:
        on_event("status", "waiting for the turn being played in this session")
    async with lock:
        if started is not None:
            started.set()
        return await engine.run(session_id, turn, on_event)
