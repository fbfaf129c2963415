"""Extracting a state delta from a reply: a second model call, validated, retried once.

The call asks for structured output (a JSON schema built from the campaign's state
schema), then the delta is checked against the state it will apply to. An invalid one
is sent back once with what was wrong; if the second answer is invalid too, the turn
goes on with an empty delta and the failure is recorded: a reply is never lost
because its delta failed. An extraction that did not finish (the player interrupted
it, or the call itself failed) is recorded the same way (:func:`unfinished`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemosyne import InvalidDeltaError, StateSchema
from mnemosyne.state import apply_delta
from mnemosyne.state.schema import BUILT_INS
from prompts import Templates

from .schema import response_format

__all__ = [
    "Attempt",
    "Call",
    "CallResult",
    "Extraction",
    "describe_failure",
    "extract_delta",
    "parse_delta",
    "unfinished",
]


@dataclass(frozen=True)
class CallResult:
    """What the model call returned (the gateway's answer, reduced to what matters here)."""

    text: str
    usage: dict[str, Any] = field(default_factory=dict)
    latency_ms: float = 0.0


#: The model call: messages and a response format in, the reply's text out.
Call = Callable[[list[dict[str, Any]], dict[str, Any]], Awaitable[CallResult]]


@dataclass(frozen=True)
class Attempt:
    output: str
    error: str | None
    usage: dict[str, Any]
    latency_ms: float


@dataclass(frozen=True)
class Extraction:
    """The outcome: the delta to store (empty on failure) and every attempt."""

    delta: list[dict[str, Any]]
    ok: bool
    attempts: list[Attempt]
    messages: list[dict[str, Any]]
    """The messages of the last call (the first one's plus the retry, when retried)."""
    response_format: dict[str, Any]
    stopped: str | None = None
    """Why the extraction did not finish (interrupted, the call failed); ``None`` if it
    ran to its end."""

    @property
    def error(self) -> str | None:
        """Why the extraction failed: why it stopped, or the last attempt's error."""
        if self.ok:
            return None
        return self.stopped or (self.attempts[-1].error if self.attempts else None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "delta": self.delta,
            "error": self.error,
            "stopped": self.stopped,
            "attempts": [
                {
                    "output": a.output,
                    "error": a.error,
                    "usage": a.usage,
                    "latency_ms": round(a.latency_ms, 2),
                }
                for a in self.attempts
            ],
        }


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def parse_delta(text: str, schema: StateSchema, state: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The operations in a model's answer, checked against ``state``.

    Raises:
        ValueError: not JSON, not ``{"operations": [...]}``, touching what the engine
            keeps itself (summary, active lore), or refused by the schema (every bad
            operation is named).
    """
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced:
        stripped = fenced.group(1)
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError as error:
        raise ValueError(f"the answer is not JSON ({error})") from None
    if isinstance(data, dict) and set(data) == {"operations"}:
        operations = data["operations"]
    else:
        raise ValueError('the answer must be an object {"operations": [...]}')
    if not isinstance(operations, list):
        raise ValueError('"operations" must be a list')
    for index, operation in enumerate(operations):
        path = operation.get("path") if isinstance(operation, dict) else None
        if isinstance(path, str) and path.split(".")[0] in BUILT_INS:
            raise ValueError(f"operation {index}: {path!r} is kept by the engine, not by the story")
    try:
        apply_delta(schema, dict(state), operations)
    except InvalidDeltaError as error:
        raise ValueError("; ".join(str(problem) for problem in error.problems)) from None
    return operations


def request_messages(
    templates: Templates,
    *,
    schema: StateSchema,
    state: Mapping[str, Any],
    reply: str,
    user_message: str | None,
) -> list[dict[str, Any]]:
    """The messages of the extraction call."""
    instructions = templates.render(
        "extract",
        {
            "variables": schema.variables,
            "permissive": schema.permissive,
            "state": state["variables"],
        },
    )
    told = f"The player: {user_message}\n\n" if user_message else ""
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": f"{told}The game master: {reply}"},
    ]


async def extract_delta(
    call: Call,
    templates: Templates,
    *,
    schema: StateSchema,
    state: Mapping[str, Any],
    reply: str,
    user_message: str | None = None,
) -> Extraction:
    """Ask for the delta of ``reply``, check it, and retry once with the error.

    Errors of the call itself (the model failing) propagate: the caller decides what a
    failed extraction call means for the turn.
    """
    fmt = response_format(schema)
    messages = request_messages(
        templates, schema=schema, state=state, reply=reply, user_message=user_message
    )
    attempts: list[Attempt] = []
    for _ in range(2):
        result = await call(messages, fmt)
        try:
            delta = parse_delta(result.text, schema, state)
        except ValueError as error:
            attempts.append(Attempt(result.text, str(error), result.usage, result.latency_ms))
            messages = [
                *messages,
                {"role": "assistant", "content": result.text},
                {
                    "role": "user",
                    "content": f"That is not a valid delta: {error}. "
                    'Answer again with only the corrected JSON {"operations": [...]}.',
                },
            ]
            continue
        attempts.append(Attempt(result.text, None, result.usage, result.latency_ms))
        return Extraction(delta, True, attempts, messages, fmt)
    return Extraction([], False, attempts, messages, fmt)


def unfinished(
    reason: str,
    templates: Templates,
    *,
    schema: StateSchema,
    state: Mapping[str, Any],
    reply: str,
    user_message: str | None = None,
) -> Extraction:
    """The record of an extraction that did not finish (``reason`` says why): no delta,
    no attempts, and the messages that were (or would have been) sent, for the trace."""
    messages = request_messages(
        templates, schema=schema, state=state, reply=reply, user_message=user_message
    )
    return Extraction([], False, [], messages, response_format(schema), stopped=reason)


def describe_failure(extraction: Extraction) -> str:
    """One line for the player when the state could not be updated."""
    if extraction.stopped:
        return f"the world state was not updated: {extraction.stopped}"
    return (
        f"the world state was not updated: the extracted delta was invalid twice "
        f"({extraction.error})"
    )
