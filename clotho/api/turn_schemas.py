"""The documents of a turn as a resource: its status, the list of a session's turns, and
the description of its event stream (for the OpenAPI document)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from .problems import Problem
from .schemas import SessionOut, TurnBody, TurnResultOut
from .turn_registry import TurnStatus

__all__ = ["EVENT_STREAM", "DraftOut", "TurnOut", "TurnsOut"]


class DraftOut(BaseModel):
    """An impersonation's result: the player's line the model wrote. Nothing was stored;
    the player edits it and sends it (a `say`)."""

    text: str
    session: SessionOut = Field(description="The session, unchanged by the turn.")
    incomplete: bool = Field(description="The line was stopped before its end.")
    warnings: list[str]
    usage: dict[str, Any]


class TurnOut(BaseModel):
    """A turn: what it was asked, how it stands, and once ended what it left."""

    turn_id: str
    session_id: str
    status: TurnStatus = Field(
        description="`running` (waiting for its session's previous turn, or playing); "
        "`done`: stored (`incomplete` if its reply was stopped); `failed`: nothing stored "
        "(`problem` says why); `cancelled`: stopped before its reply began (the player's "
        "message of a say or an edit is kept: `user_node_id`)."
    )
    request: TurnBody
    detach: bool = Field(description="The turn plays on when every client has left.")
    created_at: str
    ended_at: str | None
    events: str = Field(description="The path of its events (`GET`: follow or rejoin them).")
    node_id: str | None = Field(default=None, description="done: the reply (HEAD).")
    user_node_id: str | None = Field(
        default=None, description="done or cancelled: the player's message it stored."
    )
    version: int | None = Field(
        default=None, description="Once ended: the session's version after it (its ETag)."
    )
    head_id: str | None = Field(default=None, description="Once ended: HEAD after it.")
    incomplete: bool | None = Field(default=None, description="done: the reply was stopped.")
    problem: Problem | None = Field(
        default=None, description="failed: the problem document (as the `error` event)."
    )
    result: TurnResultOut | None = Field(
        default=None, description="done: what the `node` event carried."
    )
    draft: DraftOut | None = Field(
        default=None, description="done, impersonate: what the `draft` event carried."
    )


class TurnsOut(BaseModel):
    turns: list[TurnOut] = Field(description="Newest first.")


def event_schema(
    name: str,
    description: str,
    data: dict[str, Any],
    *,
    numbered: str = "The event's number in the turn.",
) -> dict[str, Any]:
    """One server-sent event of a stream, as the OpenAPI document describes it: its
    ``event`` name, its ``data`` (JSON of the schema ``data``) and its ``id``
    (``numbered`` says what it counts). Turns, replays, cascades and a session's events
    are described by it."""
    return {
        "type": "object",
        "description": description,
        "required": ["event", "data", "id"],
        "properties": {
            "event": {"const": name},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": data,
            },
            "id": {"type": "string", "description": numbered},
        },
    }


TEXT = {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}
REF = "#/components/schemas/"

_EVENTS: list[tuple[str, str, dict[str, Any]]] = [
    ("turn", "The first: the turn as `GET .../turns/{turn_id}` shows it.",
     {"$ref": REF + "TurnOut"}),
    ("status", "What the turn is doing (each step until the reply begins, then what takes"
     " a while).", TEXT),
    ("reasoning", "The model's reasoning, as it is written.", TEXT),
    ("token", "The reply, as it is written.", TEXT),
    ("warning", "Something the player should know (an incomplete reply, a state delta that"
     " failed).", TEXT),
    ("node", "Last: the turn was stored; `session` holds the new version and HEAD.",
     {"$ref": REF + "TurnResultOut"}),
    ("draft", "Last, impersonate: the player's line the model wrote; nothing was stored.",
     {"$ref": REF + "DraftOut"}),
    ("cancelled", "Last: stopped before the reply began (`user_node_id`: the player's message"
     " kept).", {"$ref": REF + "TurnOut"}),
    ("error", "Last: the turn failed, nothing was stored (a problem document).",
     {"$ref": REF + "Problem"}),
]  # fmt: skip

#: The ``text/event-stream`` of a turn (OpenAPI 3.2's ``itemSchema``: one item per event).
EVENT_STREAM: dict[str, Any] = {
    "itemSchema": {"oneOf": [event_schema(*event) for event in _EVENTS]}
}
