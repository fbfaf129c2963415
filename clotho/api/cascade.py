"""A cascade over HTTP (:mod:`orchestrator.cascade`): after an early message was edited
as a fork, the rest of its old branch played again on it, its progress streamed as
server-sent events the way a turn's are (:mod:`clotho.api.turns`).

- ``POST .../cascade`` (``201``, ``Location: .../cascades/{cascade_id}``) plans it
  (refused before anything runs, 422 ``invalid_cascade``: no original to follow, a leaf
  not below it, nothing below it) and answers with its events: ``cascade`` (first: its
  status), ``progress`` (a step begins: ``step`` of ``total``, the old node), ``status``
  / ``token`` / ``warning`` (the engine's, while a reply is generated), ``step`` (a
  step made: the old node and its mirror), and last ``outcome`` (done, or stopped: the
  steps made, and how the states diverged) or ``error`` (a problem document; the steps
  made before it are kept).
- ``GET .../cascades/{cascade_id}/events`` rejoins them (``Last-Event-ID``);
  ``GET .../cascades/{cascade_id}`` is its status; ``GET .../cascades?status=running``
  the one to rejoin after a reload.
- ``DELETE .../cascades/{cascade_id}`` stops it as a turn is stopped (a reply streaming
  is kept, incomplete; before its first word nothing is stored) and no further step
  begins. Leaving does not stop it.
- Posting again goes on where it stopped (each new node names the old node it
  mirrors); while one runs in this process, posting again follows that one (200).

A cascade is a turn of its own kind (:class:`clotho.api.turn_registry.Turn`, in a registry
of its own, :attr:`ApiContext.cascades`, its plan kept as ``Turn.plan``): its id is
named ``turn_id`` in the paths, ``cascade_id`` in its documents.
A cascade holds its session's turn lock while it runs: a turn asked meanwhile waits.
The cascades live in this process's memory, as turns do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from mnemosyne.edits import NodeRef

from .context import ApiContext, check_version
from .deps import ContextDep, IfMatch, SessionDep
from .problems import Problem, problem_of
from .turn_registry import Asked, Turn, TurnStatus
from .turn_schemas import REF as _REF
from .turn_schemas import TEXT as _TEXT
from .turn_schemas import event_schema
from .turns import LastEventId, known_turn

if TYPE_CHECKING:
    from mnemosyne import Node
    from orchestrator.cascade import Cascade, CascadePlan, CascadeStep

__all__ = ["CascadeBody", "CascadeOut", "CascadePlanOut", "CascadesOut", "router"]

router = APIRouter(tags=["playing"])
log = logging.getLogger("clotho.api")


class CascadeBody(BaseModel):
    """Which cascade: every field may be left out."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{}, {"node_id": "3f2a9c", "from_id": "77b01e"}]},
    )
    node_id: NodeRef | None = Field(
        default=None,
        description="The fork, the edited message (default: HEAD; on a node a stopped "
        "cascade made, that cascade's; on the reply an edit made, its message).",
    )
    from_id: NodeRef | None = Field(
        default=None,
        description="The original the fork replaces (default: the nearest alternative "
        "before it whose story goes on below it).",
    )
    to_id: NodeRef | None = Field(
        default=None,
        description="The old branch's end (default: the active path below the original).",
    )


class CascadeOut(BaseModel):
    """A cascade: what it regenerates, how far it has come, and once ended its outcome."""

    cascade_id: str
    session_id: str
    status: TurnStatus = Field(
        description="`running`; `done`: every step made; `cancelled`: stopped (the steps "
        "made are kept: post again to go on); `failed`: `problem` says why (the steps "
        "made before it are kept)."
    )
    fork_id: str
    original_id: str
    leaf_id: str
    total: int = Field(description="The steps of the whole cascade (the old branch's nodes).")
    done: int = Field(description="The steps made so far (those of earlier runs included).")
    created_at: str
    ended_at: str | None
    events: str = Field(description="The path of its events (`GET`: follow or rejoin them).")
    outcome: dict[str, Any] | None = Field(
        default=None,
        description="Once ended (done or cancelled): the `outcome` event's document: `made` "
        "(each step: `step`, `old_id`, `new_id`, `role`, `name`, `generated`), `complete`, "
        "`old_id` and `new_id` (where the states are compared), `divergence` "
        "(`{path: [old value, new value]}`), `version`, `head_id`.",
    )
    problem: Problem | None = Field(default=None, description="failed: the problem document.")


class CascadesOut(BaseModel):
    cascades: list[CascadeOut] = Field(description="Newest first.")


def _path(turn: Turn) -> str:
    return f"/api/sessions/{turn.session_id}/cascades/{turn.turn_id}"


def _status(turn: Turn) -> dict[str, Any]:
    plan = turn.plan
    return {
        "cascade_id": turn.turn_id,
        "session_id": turn.session_id,
        "status": turn.status,
        "fork_id": plan.get("fork_id", ""),
        "original_id": plan.get("original_id", ""),
        "leaf_id": plan.get("leaf_id", ""),
        "total": plan.get("total", 0),
        "done": plan.get("done", 0),
        "created_at": turn.created_at.isoformat(),
        "ended_at": turn.ended_at.isoformat() if turn.ended_at else None,
        "events": _path(turn) + "/events",
        **turn.outcome,
    }


def _known(ctx: ApiContext, session_id: str, cascade_id: str) -> Turn:
    return known_turn(ctx.cascades, session_id, cascade_id, "cascade")


def _known_cascade(session: SessionDep, turn_id: str, ctx: ContextDep) -> Turn:
    """The cascade a path names (a dependency: an unknown one is a 404 before any event)."""
    return _known(ctx, session.id, turn_id)


def _plan(ctx: ApiContext, session_id: str, body: CascadeBody) -> CascadePlan:
    from orchestrator.cascade import plan_cascade

    return plan_cascade(ctx.store, session_id, body.node_id, original=body.from_id, leaf=body.to_id)


async def _run(ctx: ApiContext, turn: Turn, runner: Cascade, body: CascadeBody) -> None:
    """Run the cascade (once its session's turn before it has ended) and end it with
    its last event."""
    sid = turn.session_id

    def on_event(kind: str, text: str) -> None:
        turn.publish("status" if kind == "progress" else kind, {"text": text})

    from orchestrator.cascade import regenerates

    def begun(number: int, total: int, old: Node) -> None:
        generate = regenerates(old)
        turn.publish(
            "progress",
            {"step": number, "total": total, "old_id": old.id, "role": old.role,
             "name": old.name, "generate": generate},
        )  # fmt: skip

    def made(step: CascadeStep) -> None:
        turn.plan["done"] = step.number
        turn.publish("step", step.as_dict())

    try:
        lock = ctx.turn_lock(sid)
        if lock.locked():
            on_event("status", "waiting for the turn being played in this session")
        async with lock:
            turn.started = True
            # as it stands now, of the nodes the POST resolved (HEAD may have moved since)
            plan = await run_in_threadpool(_plan, ctx, sid, body)
            turn.plan.update(plan.as_dict())
            if not runner.stopping:
                outcome = await runner.run(plan, on_begin=begun, on_step=made, on_event=on_event)
            else:
                outcome = runner.outcome(plan, [])
        session = await run_in_threadpool(ctx.store.session, sid)
        document = {**outcome.as_dict(), "version": session.version, "head_id": session.head_id}
        status: TurnStatus = "done" if outcome.complete else "cancelled"
        turn.end(status, "outcome", document, outcome=document)
    except asyncio.CancelledError:
        gone = problem_of(RuntimeError("the server stopped during the cascade"))
        turn.end("failed", "error", gone, problem=gone)
        raise
    except Exception as error:  # every failure ends the stream, named
        if getattr(error, "code", None) is None:
            log.exception("cascade failed in session %s", sid)
        problem = problem_of(error, f"/api/sessions/{sid}/cascade")
        turn.end("failed", "error", problem, problem=problem)
    finally:
        if not turn.ended:
            gone = problem_of(RuntimeError("the cascade stopped unexpectedly"))
            turn.end("failed", "error", gone, problem=gone)
        ctx.cascades.ended(turn)


async def _start(
    session_id: str, body: CascadeBody, ctx: ContextDep, response: Response, expected: IfMatch
) -> Turn:
    from orchestrator.cascade import Cascade

    session = await run_in_threadpool(ctx.store.session, session_id)
    running = [t for t in ctx.cascades.of_session(session.id) if not t.ended]
    if running:  # one at a time: posting again follows it
        response.status_code = 200
        response.headers["Location"] = _path(running[0])
        return running[0]
    check_version(session, expected)
    engine = await ctx.engine(session.id)  # no model: 503, before anything else
    plan = await run_in_threadpool(_plan, ctx, session.id, body)  # refused here: a 4xx
    turn = ctx.cascades.create(session.id, Asked("cascade", None, plan.fork.id, True))
    turn.plan = plan.as_dict()
    turn.publish("cascade", _status(turn))
    runner = Cascade(engine, ctx.store)
    turn.on_cancel = runner.stop  # interrupts the engine only while its own reply runs
    fixed = CascadeBody(node_id=plan.fork.id, from_id=plan.original.id, to_id=plan.leaf_id)
    task = asyncio.create_task(_run(ctx, turn, runner, fixed))
    ctx.tasks.add(task)
    task.add_done_callback(ctx.tasks.discard)
    response.headers["Location"] = _path(turn)
    return turn


_ANY = {"type": "object"}


def _event(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return event_schema(name, description, schema, numbered="The event's number in the cascade.")


_EVENTS = [
    _event("cascade", "The first: the cascade as `GET .../cascades/{id}` shows it.",
           {"$ref": _REF + "CascadeOut"}),
    _event("progress", "A step begins: `step` of `total`, the old node (`old_id`, `role`, "
           "`name`) and whether its reply is generated (`generate`).", _ANY),
    _event("status", "What the engine is doing, while a reply is generated.", _TEXT),
    _event("reasoning", "The model's reasoning, as it is written.", _TEXT),
    _event("token", "A reply, as it is written.", _TEXT),
    _event("warning", "Something the player should know (an incomplete reply...).", _TEXT),
    _event("step", "A step made: `step`, `total`, `old_id`, `new_id`, `role`, `name`, "
           "`generated`, `incomplete`.", _ANY),
    _event("outcome", "Last: done or stopped: the steps made, `divergence`, `version`, "
           "`head_id` (as `outcome` in `GET .../cascades/{id}`).", _ANY),
    _event("error", "Last: a step failed (the steps before it are kept).",
           {"$ref": _REF + "Problem"}),
]  # fmt: skip

_EVENTS_RESPONSE = {
    "description": "The cascade's events (server-sent events): `cascade`, then `progress` "
    "and `step` for each step (with the engine's `status`, `token`, `warning` while a "
    "reply is generated); the last is `outcome` or `error`.",
    "content": {"text/event-stream": {"itemSchema": {"oneOf": _EVENTS}}},
    "headers": {"Location": {"description": "The cascade.", "schema": {"type": "string"}}},
}


@router.post(
    "/sessions/{session_id}/cascade",
    summary="Regenerate the rest of an old branch on an edited message (events streamed)",
    status_code=201,
    response_class=EventSourceResponse,
    responses={
        201: _EVENTS_RESPONSE,
        200: {**_EVENTS_RESPONSE, "description": "A cascade of the session already runs: "
              "its events."},
    },
)  # fmt: skip
async def start_cascade(
    turn: Annotated[Turn, Depends(_start)], after: LastEventId
) -> AsyncIterator[ServerSentEvent]:
    """The old branch below the original (`from_id`), to its leaf (`to_id`), mirrored
    under the fork (`node_id`), one step per node, each committed as it is made: a
    player's message and a scene change copied, each reply generated again by the
    engine (by the same speaker in a cast of several); the new nodes' metadata
    `cascade: {"from": original, "of": old node}`. Posting again after a stop goes on
    where it stopped; nothing is made twice. The old branch is never changed."""
    async for event in turn.follow(after):
        yield event


class CascadePlanOut(BaseModel):
    """What a cascade would regenerate, and how much of it is made already."""

    session_id: str
    fork_id: str
    original_id: str
    leaf_id: str
    total: int = Field(description="The steps of the whole cascade (the old branch's nodes).")
    done: int = Field(description="The steps made already (by an earlier run, or the edit).")
    tip_id: str = Field(description="The node the next step grows under.")


@router.get(
    "/sessions/{session_id}/cascade",
    summary="What a cascade would regenerate (nothing runs)",
    response_model=CascadePlanOut,
)
async def cascade_plan(
    session: SessionDep,
    ctx: ContextDep,
    node_id: Annotated[
        NodeRef | None, Query(description="The fork (as in `POST .../cascade`).")
    ] = None,
    from_id: Annotated[NodeRef | None, Query(description="The original it replaces.")] = None,
    to_id: Annotated[NodeRef | None, Query(description="The old branch's end.")] = None,
) -> dict[str, Any]:
    """The plan of the cascade `POST .../cascade` would run with the same fields: the page
    offers it after an edit as a fork when there is something to regenerate (422
    `invalid_cascade` when there is not)."""
    body = CascadeBody(node_id=node_id, from_id=from_id, to_id=to_id)
    plan = await run_in_threadpool(_plan, ctx, session.id, body)
    return plan.as_dict()


@router.get(
    "/sessions/{session_id}/cascades",
    summary="The session's cascades this server knows",
    response_model=CascadesOut,
)
async def list_cascades(
    session: SessionDep,
    ctx: ContextDep,
    status: Annotated[
        TurnStatus | None,
        Query(description="Only the cascades in this status (`running`: the one to rejoin)."),
    ] = None,
) -> dict[str, Any]:
    """Running cascades and those ended within the hour, newest first."""
    turns = ctx.cascades.of_session(session.id)
    return {"cascades": [_status(t) for t in turns if status in (None, t.status)]}


@router.get(
    "/sessions/{session_id}/cascades/{turn_id}",
    summary="A cascade's status",
    response_model=CascadeOut,
)
async def cascade_status(session: SessionDep, turn_id: str, ctx: ContextDep) -> dict[str, Any]:
    """running (`done`: the steps made so far), done or cancelled (`outcome`), failed."""
    return _status(_known(ctx, session.id, turn_id))


@router.get(
    "/sessions/{session_id}/cascades/{turn_id}/events",
    summary="Follow or rejoin a cascade's events",
    response_class=EventSourceResponse,
    responses={200: {**_EVENTS_RESPONSE, "headers": {}}},
)
async def cascade_events(
    turn: Annotated[Turn, Depends(_known_cascade)], after: LastEventId
) -> AsyncIterator[ServerSentEvent]:
    """From the start (or after `Last-Event-ID`) while it runs; once ended, its last event."""
    async for event in turn.follow(after):
        yield event


@router.delete(
    "/sessions/{session_id}/cascades/{turn_id}",
    summary="Stop a cascade",
    status_code=202,
    response_model=CascadeOut,
    responses={200: {"model": CascadeOut, "description": "The cascade had already ended."}},
)
async def stop_cascade(
    session: SessionDep, turn_id: str, ctx: ContextDep, response: Response
) -> dict[str, Any]:
    """Stops the step running as a turn is stopped (a reply streaming kept, marked
    incomplete; before its first word, nothing stored) and begins no other; every step
    made is kept. Its events end with `outcome` (`stopped`). Post again to go on."""
    turn = _known(ctx, session.id, turn_id)
    if turn.ended or turn.on_cancel is None:
        response.status_code = 200
    else:
        turn.on_cancel()
    return _status(turn)
