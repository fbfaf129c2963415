"""Compare two moments over HTTP (:mod:`orchestrator.tracediff`).

``GET /api/sessions/{session_id}/trace-diff?a=...&b=...``: how two generated nodes'
prompts, lore, settings, starting states and tokens differ, with the session's version
as ``ETag`` (304 for ``If-None-Match``): a comparison changes only when the session does.
A node that has no trace (a player's message, a reply written by hand): 404 ``no_trace``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from mnemosyne.edits import NodeRef
from orchestrator.tracediff import trace_diff

from .deps import ReadSession, StoreDep

__all__ = ["TraceDiffOut", "TraceDiffQuery", "router"]

router = APIRouter(tags=["reading"])


class TraceDiffQuery(BaseModel):
    """The two nodes to compare; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    a: NodeRef = Field(description="A generated node (any node name: an id, a tag...).")
    b: NodeRef = Field(description="Another generated node, named as `a`.")


class WordChangeOut(BaseModel):
    op: Literal["equal", "added", "removed"]
    text: str = Field(description="Words with the white space between them, as written.")


class MessagePairOut(BaseModel):
    """A message of A's prompt and its counterpart in B's, aligned in order."""

    status: Literal["equal", "added", "removed", "changed"]
    role: str
    a_index: int | None = Field(description="Its place in A's prompt (from 0); null: not in A.")
    b_index: int | None = Field(description="Its place in B's prompt (from 0); null: not in B.")
    a: str | None = Field(description="Its text in A's prompt.")
    b: str | None = Field(description="Its text in B's prompt.")
    words: list[WordChangeOut] = Field(
        description="A changed message: the word-level diff from A's text to B's."
    )
    whole: bool = Field(
        description="A changed message too long to compare word by word: `words` is A's "
        "text removed and B's added, whole."
    )


class LoreChangeOut(BaseModel):
    """A lore entry that fired in A, in B, or in both, and why in each."""

    id: str
    status: Literal["both", "only_a", "only_b"]
    reason_a: str | None
    reason_b: str | None
    reason_changed: bool
    content_changed: bool = Field(description="Fired in both, its text placed differs.")


class SettingChangeOut(BaseModel):
    """A setting that differs: `model`, `params.temperature`, `templates.system`..."""

    name: str
    a: Any
    b: Any


class StateChangeOut(BaseModel):
    """A path of the world state (maps as dotted paths) that differs between the states
    the two turns started from (each node's parent)."""

    path: str
    a: Any
    b: Any


class TokenUsageOut(BaseModel):
    prompt: int | None
    completion: int | None
    total: int | None


class TokensOut(BaseModel):
    a: TokenUsageOut
    b: TokenUsageOut
    difference: TokenUsageOut = Field(description="B minus A (null where either is unknown).")


class SideOut(BaseModel):
    node_id: str
    parent_id: str | None
    kind: str = Field(description="The turn that made it: say, reroll, edit, continue...")
    model: str
    created_at: str
    verified: bool = Field(description="Whether its trace's messages rebuild to what was sent.")
    problems: list[str]
    delta: list[dict[str, Any]] = Field(description="The node's own state delta.")


class CountsOut(BaseModel):
    messages_changed: int
    messages_added: int
    messages_removed: int
    lore_added: int = Field(description="Entries that fired in B only.")
    lore_removed: int = Field(description="Entries that fired in A only.")
    lore_reasons_changed: int
    settings: int
    state: int


class TraceDiffOut(BaseModel):
    """How B's trace differs from A's."""

    summary: str = Field(
        description="One line: `2 messages changed, lore: +1 -0, temperature 0.7 -> 1.0, "
        "state: 3 keys differ, tokens: 119+3 -> 130+5`."
    )
    counts: CountsOut
    a: SideOut
    b: SideOut
    messages: list[MessagePairOut] = Field(description="Both prompts aligned, in order.")
    lore: list[LoreChangeOut]
    settings: list[SettingChangeOut] = Field(description="Only the settings that differ.")
    state: list[StateChangeOut] = Field(description="Only the paths that differ.")
    tokens: TokensOut


@router.get(
    "/sessions/{session_id}/trace-diff",
    summary="Compare two generated nodes' traces",
    response_model=TraceDiffOut,
)
def compare(
    session: ReadSession, store: StoreDep, query: Annotated[TraceDiffQuery, Query()]
) -> Any:
    """What differed between two generated nodes of the session (rerolls, an edit's fork
    and its original, turns far apart): the prompts message by message (a changed one
    word by word; the system prompt and the lore placed in it are messages too), the
    lore that fired and why, the settings, the world state each started from, and the
    tokens. A node without a trace: 404 `no_trace` (orchestrator's NotGeneratedError)."""
    return trace_diff(store, session.id, query.a, query.b).as_dict()
