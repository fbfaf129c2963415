"""Replay (A/B): ``POST /api/sessions/{session_id}/nodes/{node_id}/replay`` sends a
generated reply's prompt again with something changed (:mod:`orchestrator.replay`),
each answer a new alternative of the reply, HEAD on the last.

The body (:class:`ReplayBody`) says what changes; everything that can refuse the replay
is refused with a status before any model call (422: nothing changed, a player's
message, a reply with no trace or one that no longer verifies, an unknown lore entry,
sampler settings out of range, a ``templates`` field (a template is replaced from the
command line only); 404 an unknown profile; 412 a stale ``If-Match``; 503 no model).
Then the answer is a stream of server-sent events, as a turn's: ``status`` / ``token``
/ ``warning`` ``{"text", "index"}`` (which alternative, from 0), ``replay`` (one per
alternative stored: :class:`ReplayEventOut`, with its ``index``), last ``done``
(:class:`ReplayDoneOut`: the session after it, every alternative) or ``error`` (a
problem document: the alternatives stored before it stay, each was its own
transaction). A client that leaves stops nothing: every alternative is stored.

An ``Idempotency-Key``: a retry of the same request replays nothing again (200,
``Idempotent-Replayed: true``): while the first still plays, it follows its events (the
replay is kept in :attr:`ApiContext.replays`, a :class:`.turn_registry.TurnRegistry`, as
turns are); after, it gets the ``done`` event again. The key is also stored with the
session once every alternative is (for a retry after the process has forgotten the
replay, or on another worker); a replay that failed may be asked again with its key.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from clotho.replays import ReplayAsk, changes_for, replay_document
from orchestrator.replay import MAX_REPLAYS

from .context import ApiContext, check_version
from .deps import ContextDep, IdempotencyKey, IfMatch
from .idempotency import REPLAYED_HEADER, request_hash
from .problems import problem_of
from .schemas import NodeOut, SessionOut
from .turn_registry import Asked, Turn
from .turn_schemas import REF, event_schema
from .turns import accepts_events, same_key

if TYPE_CHECKING:
    from mnemosyne import Store
    from orchestrator.replay import PreparedReplay

__all__ = ["ReplayBody", "ReplayDoneOut", "ReplayEventOut", "ReplayedOut", "router"]

router = APIRouter(tags=["playing"])
log = logging.getLogger("clotho.api")


class ReplayBody(ReplayAsk):
    """What the replay changes (at least one thing), and how many alternatives."""

    n: int = Field(
        1, ge=1, le=MAX_REPLAYS, description="How many alternatives (each a model call)."
    )


class ReplayRecordOut(BaseModel):
    of: str = Field(description="The node replayed.")
    sent: str = Field(
        description="`as stored` (its exact stored messages) or `rebuilt` (built again)."
    )
    changed: dict[str, Any] = Field(
        description="What changed against it, each as `[before, after]` (`params`: per "
        "setting; `lore`: `{off, on}`; `templates`: per template, where it came from)."
    )


class ReplayedOut(BaseModel):
    """One alternative the replay stored."""

    node: NodeOut
    replay: ReplayRecordOut
    state: dict[str, Any] = Field(description="The world state after it.")
    incomplete: bool
    warnings: list[str]
    usage: dict[str, Any]


class ReplayEventOut(ReplayedOut):
    """The ``replay`` event: one alternative stored, and which."""

    index: int = Field(ge=0, description="Which alternative, from 0.")


class ReplayDoneOut(BaseModel):
    """The replay's end: the session after it (HEAD on the last alternative)."""

    session: SessionOut
    replays: list[ReplayedOut]


def _inline(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON schema with its definitions written in place (the event stream's
    description in the OpenAPI document refers to no component)."""
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def resolve(part: Any) -> Any:
        if isinstance(part, dict):
            if "$ref" in part:
                return resolve(defs[part["$ref"].rsplit("/", 1)[1]])
            return {key: resolve(value) for key, value in part.items()}
        if isinstance(part, list):
            return [resolve(value) for value in part]
        return part

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def _event(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return event_schema(name, description, schema, numbered="The event's number in the replay.")


_TEXT = {
    "type": "object",
    "required": ["text", "index"],
    "properties": {"text": {"type": "string"}, "index": {"type": "integer"}},
}
_EVENTS = [
    _event("status", "What the replay is doing (which alternative: `index`).", _TEXT),
    _event("reasoning", "The model's reasoning, as it is written.", _TEXT),
    _event("token", "An alternative's text, as it is written.", _TEXT),
    _event("warning", "Something the player should know.", _TEXT),
    _event("replay", "An alternative stored.", _inline(ReplayEventOut)),
    _event("done", "Last: every alternative stored.", _inline(ReplayDoneOut)),
    _event(
        "error", "Last: the replay failed (those stored before stay).", {"$ref": REF + "Problem"}
    ),
]
_STREAM = {
    "description": "The replay's events (server-sent events); the last is `done` or `error`.",
    "content": {"text/event-stream": {"itemSchema": {"oneOf": _EVENTS}}},
}


@dataclass
class _Started:
    turn: Turn | None = None
    """The replay playing (or played lately): its events."""
    done: dict[str, Any] | None = None
    """A retry's once the process has forgotten the replay: the ``done`` the key stored."""


def _asked(node_id: str, digest: str) -> Asked:
    """What a replay was asked (a retry with the same Idempotency-Key asks the same)."""
    return Asked("replay", digest, node_id, detach=False)


async def _start(
    request: Request,
    response: Response,
    session_id: str,
    node_id: str,
    body: ReplayBody,
    ctx: ContextDep,
    expected: IfMatch,
    key: IdempotencyKey,
) -> _Started:
    """The replay checked and started, before its answer streams: every refusal is a
    status. A retry with the Idempotency-Key of a replay running or played lately follows
    that replay (as a turn's does: :func:`clotho.api.turns.same_key`); of one this
    process has forgotten, gets the ``done`` the key stored."""
    from orchestrator.replay import prepare_replay

    await request.app.state.warmup.wait()
    session = await run_in_threadpool(ctx.store.session, session_id)
    digest = request_hash(request, body.model_dump_json())
    asked = _asked(node_id, digest)
    if key is not None:  # before If-Match: a retry naming its old version gets its answer
        known = same_key(ctx.replays, session.id, key, asked)
        stored = None
        if known is None:
            stored = await run_in_threadpool(ctx.store.remembered, session.id, key, digest)
        if known is not None or stored is not None:
            response.status_code = 200
            response.headers[REPLAYED_HEADER] = "true"
            return _Started(known, None if stored is None else json.loads(stored))
    check_version(session, expected)
    engine = await ctx.engine(session.id)
    changes = await run_in_threadpool(changes_for, ctx.settings, engine, body)
    prepared = await run_in_threadpool(
        lambda: prepare_replay(engine, session.id, node_id, changes, n=body.n)
    )
    if key is not None:  # another request with the key may have started it meanwhile
        known = same_key(ctx.replays, session.id, key, asked)
        if known is not None:
            response.status_code = 200
            response.headers[REPLAYED_HEADER] = "true"
            return _Started(known)
    turn = ctx.replays.create(session.id, asked, key)
    task = asyncio.create_task(_play(ctx, turn, prepared))
    ctx.tasks.add(task)
    task.add_done_callback(ctx.tasks.discard)
    return _Started(turn)


def _remember(store: Store, session_id: str, key: str, digest: str, done: dict[str, Any]) -> None:
    text = json.dumps(done, ensure_ascii=False)
    with store.transaction(session_id) as tx:
        tx.remember(key, digest, lambda _session: text)


async def _play(ctx: ApiContext, turn: Turn, prepared: PreparedReplay) -> None:
    """Store each alternative (after the session's turn being played), its events
    published to whoever follows the replay."""
    sid = prepared.session_id
    made: list[dict[str, Any]] = []
    try:
        async with ctx.turn_lock(sid):
            for index in range(prepared.n):

                def on_event(kind: str, text: str, index: int = index) -> None:
                    name = "status" if kind == "progress" else kind
                    turn.publish(name, {"text": text, "index": index})

                result = await prepared.one(on_event)
                document = await run_in_threadpool(replay_document, ctx.store, sid, result)
                event = ReplayEventOut.model_validate({**document, "index": index})
                made.append(event.model_dump(mode="json", exclude={"index"}))
                turn.publish("replay", event.model_dump(mode="json"))
        session = await run_in_threadpool(ctx.store.session, sid)
        done = ReplayDoneOut.model_validate({"session": session.as_dict(), "replays": made})
        answer = done.model_dump(mode="json")
        if turn.idempotency_key is not None:
            key, digest = turn.idempotency_key, turn.asked.text or ""
            await run_in_threadpool(_remember, ctx.store, sid, key, digest, answer)
        turn.end("done", "done", answer, version=session.version, head_id=session.head_id)
    except Exception as error:  # every failure ends the stream, named
        problem = problem_of(error, f"/api/sessions/{sid}/nodes/{prepared.original.id}/replay")
        if problem["status"] >= 500 and problem.get("code") == "error":  # not one of ours
            log.exception("replay failed in session %s", sid)
        turn.end("failed", "error", problem, problem=problem)
    finally:
        if not turn.ended:  # its followers wait for a last event, whatever happened
            gone = problem_of(RuntimeError("the replay stopped unexpectedly"))
            turn.end("failed", "error", gone, problem=gone)
        ctx.replays.ended(turn)


def _sse(name: str, data: dict[str, Any], number: int) -> ServerSentEvent:
    return ServerSentEvent(
        event=name, raw_data=json.dumps(data, ensure_ascii=False), id=str(number)
    )


@router.post(
    "/sessions/{session_id}/nodes/{node_id}/replay",
    summary="Replay a reply with something changed (A/B)",
    status_code=201,
    response_class=EventSourceResponse,
    dependencies=[Depends(accepts_events)],
    responses={
        201: _STREAM,
        200: {**_STREAM, "description": "The replay this Idempotency-Key made: its `done`."},
        406: {"description": "The client takes no `text/event-stream`."},
    },
)
async def replay_node(
    started: Annotated[_Started, Depends(_start)],
) -> AsyncIterator[ServerSentEvent]:
    """Send a generated reply's prompt again with something changed: another `model`
    (on the session's connection, or `api_base`) or `profile`, other sampler `params`
    (its exact stored messages are sent), or lore (`lore_off`, `lore_on`) or the
    author's `note` (the prompt is built again at its parent; a template is replaced
    from the command line only, `clotho replay --template FILE`). Each answer is a new
    alternative of the reply (never a replacement), its metadata's `replay` naming the
    original and what changed; HEAD moves to each, as a reroll's. `n` alternatives
    (at most the schema's maximum), each one step of the undo journal."""
    if started.turn is None:
        assert started.done is not None
        yield _sse("done", started.done, 0)
        return
    async for event in started.turn.follow():
        yield event
