"""Playing turns (say, reroll, edit, continue, impersonate, reply): each turn is a resource with
an id, its events streamed as server-sent events (``fastapi.sse``).

``POST .../turns`` starts a turn (``201``, ``Location: .../turns/{turn_id}``) and answers
with its events, each with an ``id`` (its number in the turn) and a JSON ``data``:

- ``turn``: first, the turn as ``GET .../turns/{turn_id}`` shows it;
- ``status`` ``{"text"}``: what the engine is doing: each step until the reply begins
  (reading the story, choosing the lore, building the prompt, waiting for the model),
  then anything that takes a while (summarising, updating the world state);
- ``token`` / ``reasoning`` ``{"text"}``: the reply (or the model's reasoning) as it
  is written;
- ``warning`` ``{"text"}``: something the player should know;
- last, one of: ``node`` (stored: ``{"node", "user_node", "session", "state",
  "incomplete", "warnings", "usage"}``, ``session`` holding the new version and HEAD),
  ``draft`` (impersonate: the player's line the model wrote, ``{"text", "session",
  "incomplete", "warnings", "usage"}``; nothing was stored: the page puts it in the
  input box), ``cancelled`` (stopped before its reply began: the turn's status document) or
  ``error`` (a problem document; nothing was stored).

``GET .../turns/{turn_id}/events`` follows the same events (from the start, or after
``Last-Event-ID``); once the turn has ended, only its last event. ``DELETE
.../turns/{turn_id}`` stops it, keeping what a client leaving keeps (below) and, before
the reply has begun, the player's message alone. An ``Idempotency-Key`` makes a retried
``POST`` follow the turn it started instead of playing another.

When the last client following a turn leaves while its reply streams, the reply stops:
the text so far is kept, marked incomplete, as Ctrl+C does in the terminal (before its
first word, no reply is stored: the player's message of a say or an edit is, HEAD on
it). At any other moment leaving stops nothing: the turn is played to its end and stored
whole. ``?detach=true``: the turn plays to its end even when every client has left
(the page does this: it stops a turn with ``DELETE`` and rejoins it after a reload).

The turns are kept in this process's memory (:mod:`clotho.api.turn_registry`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from starlette.concurrency import run_in_threadpool

from mnemosyne import IdempotencyKeyReusedError, Session

from .context import ApiContext, check_version
from .deps import ContextDep, IdempotencyKey, IfMatch, SessionDep
from .problems import ApiError, problem_of
from .reads import _declared
from .schemas import TurnBody
from .turn_registry import Asked, Turn, TurnRegistry, TurnStatus
from .turn_schemas import EVENT_STREAM, TurnOut, TurnsOut

if TYPE_CHECKING:
    from orchestrator import Engine, TurnRequest, TurnResult

__all__ = ["accepts_events", "known_turn", "router", "same_key"]

router = APIRouter(tags=["playing"])
#: The longest ``GET .../turns/{turn_id}?wait=`` (seconds).
MAX_WAIT_S = 60.0
log = logging.getLogger("clotho.api")


def _registry(ctx: ContextDep) -> TurnRegistry:
    """The turns of this server process."""
    return ctx.turns


Registry = Annotated[TurnRegistry, Depends(_registry)]


def _last_event_id(
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            description="The `id` of the last event the client saw: the stream goes on after it.",
        ),
    ] = None,
) -> int | None:
    if last_event_id is None or not last_event_id.strip():
        return None
    text = last_event_id.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 18:
        raise ApiError(
            400, "bad_last_event_id", f"Last-Event-ID must be an event's id, not {text!r}"
        )
    return int(text)


LastEventId = Annotated[int | None, Depends(_last_event_id)]


def _path(turn: Turn) -> str:
    return f"/api/sessions/{turn.session_id}/turns/{turn.turn_id}"


def _status(turn: Turn) -> dict[str, Any]:
    """The turn's status document (:class:`TurnOut`)."""
    asked = turn.asked
    return {
        "turn_id": turn.turn_id,
        "session_id": turn.session_id,
        "status": turn.status,
        "request": {
            "kind": asked.kind,
            "text": asked.text,
            "node_id": asked.node_id,
            "speaker": asked.speaker,
        },
        "detach": asked.detach,
        "created_at": turn.created_at.isoformat(),
        "ended_at": turn.ended_at.isoformat() if turn.ended_at else None,
        "events": _path(turn) + "/events",
        **turn.outcome,
    }


def known_turn(registry: TurnRegistry, session_id: str, turn_id: str, what: str = "turn") -> Turn:
    """A turn (or a cascade: ``what``) of ``registry``; an unknown one is a 404."""
    turn = registry.get(session_id, turn_id)
    if turn is None:
        raise ApiError(
            404,
            "unknown_turn",
            f"no {what} {turn_id} in session {session_id} on this server (they are kept "
            "an hour after they end)",
        )
    return turn


def _turn(session: SessionDep, turn_id: str, registry: Registry) -> Turn:
    return known_turn(registry, session.id, turn_id)


KnownTurn = Annotated[Turn, Depends(_turn)]


def _draft(result: TurnResult) -> dict[str, Any]:
    """The ``draft`` event of an impersonation (:class:`.turn_schemas.DraftOut`)."""
    return {
        "text": result.text,
        "session": result.session.as_dict(),
        "incomplete": result.completion.incomplete,
        "warnings": result.warnings,
        "usage": result.completion.usage or {},
    }


def _result(ctx: ApiContext, result: TurnResult) -> dict[str, Any]:
    assert result.node is not None  # a stored turn's
    sid = result.session.id
    state = ctx.store.state(sid, result.node.id)
    declared = _declared(ctx.store.schema(sid), state.variables)  # as GET .../state says
    return {
        "node": result.node.as_dict(),
        "user_node": result.user_node.as_dict() if result.user_node else None,
        "session": result.session.as_dict(),
        "state": {"node_id": result.node.id, **state.as_dict(), "declared": declared},
        "incomplete": result.completion.incomplete,
        "warnings": result.warnings,
        "usage": result.completion.usage or {},
    }


def _prepare(ctx: ApiContext, session: Session, body: TurnBody, engine: Engine) -> TurnRequest:
    """Everything that can refuse the turn before it starts (a 4xx, not an event): where
    it grows, and who speaks (unknown, muted, absent; another than its reply's for a
    reroll or a continue; no one who can), found once. The speaker the order chose is
    passed on as the turn's, so the engine does not choose again."""
    from orchestrator import TurnRequest
    from orchestrator.turn import locate_turn

    request = TurnRequest(body.kind, text=body.text, node=body.node_id, speaker=body.speaker)
    _, _, where = locate_turn(ctx.store, session.id, request, engine.setup, engine.rng)
    chosen = where.get("speaker")
    if request.speaker is None and request.kind != "impersonate" and chosen is not None:
        request = replace(request, speaker=chosen.name)
    return request


def accepts_events(
    accept: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> None:
    """Refuse (406) a client that takes no event stream (a turn answers with one)."""
    if not accept:
        return
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if not types & {"text/event-stream", "text/*", "*/*"}:
        raise ApiError(
            406,
            "not_acceptable",
            "a turn answers with its events (text/event-stream); the last one is the "
            "result, also at GET .../turns/{turn_id}?wait=60 (start it with ?detach=true)",
        )


async def _start(
    request: Request,
    response: Response,
    session_id: str,
    body: TurnBody,
    ctx: ContextDep,
    registry: Registry,
    expected: IfMatch,
    key: IdempotencyKey,
    detach: Annotated[
        bool,
        Query(
            description="Play the turn to its end even when every client has left "
            "(stop it with DELETE; rejoin it at its events)."
        ),
    ] = False,
) -> Turn:
    """The turn asked for: started here, or the one this Idempotency-Key started."""
    asked = Asked(body.kind, body.text, body.node_id, detach, body.speaker)
    await request.app.state.warmup.wait()  # a server just started: what it is loading
    session = await run_in_threadpool(ctx.store.session, session_id)
    if key is not None:  # before If-Match: a retry naming its old version gets its turn
        known = same_key(registry, session.id, key, asked)
        if known is not None:
            response.status_code = 200
            response.headers["Location"] = _path(known)
            return known
    check_version(session, expected)
    engine = await ctx.engine(session.id)
    turn_request = await run_in_threadpool(_prepare, ctx, session, body, engine)
    if key is not None:  # another request with the key may have started it meanwhile
        known = same_key(registry, session.id, key, asked)
        if known is not None:
            response.status_code = 200
            response.headers["Location"] = _path(known)
            return known
    turn = registry.create(session.id, asked, key)
    turn.publish("turn", _status(turn))
    task = asyncio.create_task(_play(ctx, registry, turn, engine, turn_request))
    ctx.tasks.add(task)
    task.add_done_callback(ctx.tasks.discard)
    turn.on_cancel = lambda: _cancel(turn, engine, task)
    if not detach:
        turn.on_abandoned = lambda: _abandoned(turn, engine)
    response.headers["Location"] = _path(turn)
    return turn


def same_key(registry: TurnRegistry, session_id: str, key: str, asked: Asked) -> Turn | None:
    """The turn this key started, if this process still knows it (a turn that failed
    stored nothing: its key may start the turn again).

    Raises:
        IdempotencyKeyReusedError: the key started another turn (422).
    """
    known = registry.by_key(session_id, key)
    if known is not None and known.asked != asked:
        raise IdempotencyKeyReusedError(key)
    return None if known is None or known.status == "failed" else known


async def _play(
    ctx: ApiContext, registry: TurnRegistry, turn: Turn, engine: Engine, request: TurnRequest
) -> None:
    """Play the turn (after its session's turn before it) and end it with its last event."""
    from orchestrator import TurnInterrupted

    def on_event(kind: str, text: str) -> None:
        # the engine's progress through its steps is a status to the page
        turn.publish("status" if kind == "progress" else kind, {"text": text})

    lock = ctx.turn_lock(turn.session_id)
    try:
        if lock.locked():
            on_event("status", "waiting for the turn being played in this session")
        async with lock:
            turn.started = True
            result = await engine.run(turn.session_id, request, on_event)
        if result.node is None:  # impersonate: the player's line, nothing stored
            draft = _draft(result)
            turn.end(
                "done",
                "draft",
                draft,
                version=result.session.version,
                head_id=result.session.head_id,
                incomplete=result.completion.incomplete,
                draft=draft,
            )
            return
        payload = await run_in_threadpool(_result, ctx, result)
        turn.end(
            "done",
            "node",
            payload,
            node_id=result.node.id,
            user_node_id=result.user_node.id if result.user_node else None,
            version=result.session.version,
            head_id=result.session.head_id,
            incomplete=result.completion.incomplete,
            result=payload,
        )
    except TurnInterrupted as stopped:
        await _end_cancelled(ctx, turn, stopped.user_node.id if stopped.user_node else None)
    except asyncio.CancelledError:  # cancelled before it began: nothing was stored
        await _end_cancelled(ctx, turn, None)
        raise
    except Exception as error:  # every failure ends the stream, named
        if getattr(error, "code", None) is None:
            log.exception("turn failed in session %s", turn.session_id)
        problem = problem_of(error, f"/api/sessions/{turn.session_id}/turns")
        turn.end("failed", "error", problem, problem=problem)
    finally:
        if not turn.ended:  # its followers wait for a last event, whatever happened
            gone = problem_of(RuntimeError("the turn stopped unexpectedly"))
            turn.end("failed", "error", gone, problem=gone)
        registry.ended(turn)


async def _end_cancelled(ctx: ApiContext, turn: Turn, user_node_id: str | None) -> None:
    """End the turn ``cancelled``, with the session's version and HEAD after it."""
    try:
        session = await run_in_threadpool(ctx.store.session, turn.session_id)
        where: dict[str, Any] = {"version": session.version, "head_id": session.head_id}
    except Exception:  # the database is gone: the turn ends all the same
        log.exception("reading session %s after a cancelled turn", turn.session_id)
        where = {}
    turn.end("cancelled", "cancelled", lambda: _status(turn), user_node_id=user_node_id, **where)


def _abandoned(turn: Turn, engine: Engine) -> None:
    """Every client left: a reply streaming stops (what they were shown is kept)."""
    if turn.started:
        engine.stop_reply()


def _cancel(turn: Turn, engine: Engine, task: asyncio.Task[None]) -> None:
    """Stop the turn, keeping what the player typed or saw: a reply streaming stops
    (kept, incomplete); before the reply, only the player's message is kept; a reply
    already whole is stored whole (its state delta is still extracted)."""
    if not turn.started:
        task.cancel()  # waiting for the session's turn before it: nothing was stored
    elif engine.stop_reply():
        return
    elif not turn.replied:
        engine.interrupt()


_EVENTS_RESPONSE = {
    "description": "The turn's events (server-sent events); the last is `node`, "
    "`cancelled` or `error`.",
    "content": {"text/event-stream": EVENT_STREAM},
    "headers": {
        "Location": {"description": "The turn.", "schema": {"type": "string"}},
    },
}


@router.post(
    "/sessions/{session_id}/turns",
    summary="Play a turn (its events streamed)",
    status_code=201,
    response_class=EventSourceResponse,
    dependencies=[Depends(accepts_events)],
    responses={
        201: _EVENTS_RESPONSE,
        200: {
            **_EVENTS_RESPONSE,
            "description": "The turn this Idempotency-Key started: its events (after "
            "`Last-Event-ID`), or its last event if it has ended.",
        },
        406: {"description": "The client takes no `text/event-stream`."},
    },
)
async def play_turn(
    turn: Annotated[Turn, Depends(_start)], after: LastEventId
) -> AsyncIterator[ServerSentEvent]:
    """say (a player's message and the reply), reroll (a new alternative of a reply),
    edit (a player's message forked with new text, and the reply), continue (the reply at
    HEAD extended: a new alternative holding its whole text; at a player's message, its
    reply), impersonate (the model drafts the player's next line: the `draft` event,
    nothing stored), reply (a member of the cast speaks at HEAD with no message of the
    player's). In a cast of several, `speaker` names who answers a say, an edit or a
    reply (default: the first of `POST .../speakers`); the reply node's `name` is its
    speaker. A stored turn is one step of the undo journal (`POST .../undo` sends its
    nodes to the trash and HEAD back). What can be refused before the model is called
    is refused with a status (422, 412, 503): an unknown, muted or absent speaker too."""
    async for event in turn.follow(after):
        yield event


@router.get(
    "/sessions/{session_id}/turns",
    summary="The session's turns this server knows",
    response_model=TurnsOut,
)
async def list_turns(
    session: SessionDep,
    registry: Registry,
    status: Annotated[
        TurnStatus | None,
        Query(description="Only the turns in this status (`running`: the one to rejoin)."),
    ] = None,
) -> dict[str, Any]:
    """Running turns and those ended within the hour, newest first."""
    turns = registry.of_session(session.id)
    return {"turns": [_status(turn) for turn in turns if status in (None, turn.status)]}


@router.get(
    "/sessions/{session_id}/turns/{turn_id}",
    summary="A turn's status",
    response_model=TurnOut,
)
async def turn_status(
    turn: KnownTurn,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            description="Seconds to wait for a running turn to end before answering "
            "(a client that reads no event stream gets the result this way).",
        ),
    ] = 0,
) -> dict[str, Any]:
    """running, done (the nodes it stored, the session's version after it, and the
    `node` event's document as `result`), failed (the problem), or cancelled."""
    if wait:
        await turn.wait(wait)
    return _status(turn)


@router.get(
    "/sessions/{session_id}/turns/{turn_id}/events",
    summary="Follow or rejoin a turn's events",
    response_class=EventSourceResponse,
    responses={200: {**_EVENTS_RESPONSE, "headers": {}}},
)
async def turn_events(turn: KnownTurn, after: LastEventId) -> AsyncIterator[ServerSentEvent]:
    """From the start (or after `Last-Event-ID`) while the turn runs; once it has ended,
    its last event. Leaving does not stop the turn unless every client has left while
    its reply streams (and it was not started with `detach`)."""
    async for event in turn.follow(after):
        yield event


@router.delete(
    "/sessions/{session_id}/turns/{turn_id}",
    summary="Stop a turn",
    status_code=202,
    response_model=TurnOut,
    responses={200: {"model": TurnOut, "description": "The turn had already ended."}},
)
async def cancel_turn(turn: KnownTurn, response: Response) -> dict[str, Any]:
    """Stops the turn, keeping what the player typed or saw: a reply streaming stops
    (kept, marked incomplete: the turn ends `done`); before the reply begins, only the
    player's message of a say or an edit is kept (`cancelled`); a reply already whole is
    stored whole. The turn's events say when it has ended."""
    if turn.ended or turn.on_cancel is None:
        response.status_code = 200
    else:
        turn.on_cancel()
    return _status(turn)
