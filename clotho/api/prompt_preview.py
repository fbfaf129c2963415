"""The context meter: how full the next turn's prompt would be, before it is sent.

``POST /api/sessions/{id}/prompt/preview`` builds the prompt the next turn would send
with the player's draft as its message (:meth:`orchestrator.Engine.preview_prompt`):
no model call, nothing stored. The page calls it when the story changes and, debounced,
while the player types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from clotho.wiring import NoModelError, session_engine

from .deps import ContextDep
from .etags import ETAG_HEADER, etag

if TYPE_CHECKING:
    from orchestrator import Engine

__all__ = ["NotePlacementOut", "PreviewBody", "PromptPreviewOut", "router"]

router = APIRouter(tags=["reading"])  # it plays no model: no 503


class PreviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: Annotated[
        str,
        Field(max_length=100_000, description="The player's draft (may be empty)."),
    ] = ""


class NotePlacementOut(BaseModel):
    text: str = Field(description="The note, its {{char}} and {{user}} substituted.")
    position: Literal["in_chat", "after_story", "before_story"]
    depth: int
    role: Literal["system", "user", "assistant"]
    interval: int
    inserted: bool = Field(description="Whether the next turn's prompt holds it.")
    reason: str = Field(description="Why (every N player messages) and where it goes.")


class PromptPreviewOut(BaseModel):
    window: int = Field(description="The model's context window, in tokens.")
    reply_tokens: int = Field(description="Tokens kept free for the reply.")
    used: int = Field(description="Tokens of the messages the next turn would send.")
    messages: int = Field(description="Messages on the path to HEAD, the draft included.")
    sent: int = Field(description="How many of them would be sent (the newest).")
    trimmed: int = Field(description="How many would be left out, from the start.")
    trimmed_through: str | None = Field(description="The newest message left out.")
    summary: Literal["none", "reused", "new"] = Field(
        description="What stands in for the trimmed messages: the story's summary "
        "(`reused`), one the turn would write (`new`), or nothing was trimmed (`none`)."
    )
    summary_tokens: int
    lore_entries: int = Field(description="Lore entries that would fire (planned by rules).")
    lore_tokens: int
    system_prompt: Literal["template", "session"] = Field(
        description="`session`: the session's own system prompt replaces the default."
    )
    persona: bool = Field(description="Whether the persona's description is in the prompt.")
    author_note: NotePlacementOut | None = Field(
        description="The author's note at HEAD and where it would go; null: no note."
    )


@router.post(
    "/sessions/{session_id}/prompt/preview",
    summary="How full the next turn's prompt would be",
    response_model=PromptPreviewOut,
    responses={200: {"headers": {"ETag": ETAG_HEADER}}},
)
async def prompt_preview(
    response: Response, ctx: ContextDep, session_id: str, body: PreviewBody
) -> Any:
    """The prompt the next turn would send with `text` as the player's message at HEAD,
    built as a turn builds it and measured: tokens `used` of the `window`, `reply_tokens`
    kept free, messages `trimmed` from the start of the story and whether a `summary`
    stands in for them, the lore's tokens, the author's note. No model call (the lore
    is planned by rules; a summary a turn would write is not written), nothing stored;
    the ETag is the session's version the preview was built from."""
    session = await run_in_threadpool(ctx.store.session, session_id)
    own: Engine | None = None
    try:  # the session's engine as its turns use it (kept), else one for the preview
        engine: Engine = await ctx.engine(session.id)
    except NoModelError:
        own = engine = await run_in_threadpool(
            lambda: session_engine(
                ctx.settings, ctx.store, session.id, require_model=False, close_clients=False
            )
        )
    try:
        preview = await engine.preview_prompt(session.id, body.text)
    finally:
        if own is not None:
            await own.aclose()
    response.headers["ETag"] = etag(session.version)
    return preview.as_dict()
