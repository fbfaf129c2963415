"""How full the next turn's prompt would be, measured without calling the model.

:meth:`orchestrator.Engine.preview_prompt` builds the prompt the next turn would send
(the player's draft as its message, at HEAD) the way a turn builds it, then measures it
here: the tokens it would use against the model's window, the tokens kept free for the
reply, how many messages were trimmed from the start of the story and whether a
summary stands in for them, the lore's tokens, and where the author's note went.
Nothing is generated and nothing is stored: the lore is planned by rules (a campaign
that plans by model would make a model call), and a summary a turn would write is
reported as such (``summary: "new"``), not written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mnemosyne import Message
from planner import Retrieval
from prompts import FRAMING, SYSTEM_PROMPT_PART, PlacedNote, Prompt

__all__ = ["PromptPreview", "measure"]

SummaryUse = Literal["none", "reused", "new"]


@dataclass(frozen=True)
class PromptPreview:
    """The next turn's prompt, measured."""

    window: int
    """The model's context window (tokens)."""
    reply_tokens: int
    """Kept free for the reply."""
    used: int
    """The tokens of the messages the turn would send (each with its framing)."""
    messages: int
    """The messages of the story on the path to HEAD (the draft included, if any)."""
    sent: int
    """How many of them would be sent (the newest)."""
    trimmed: int
    """How many would be left out (the oldest: from the start of the story)."""
    trimmed_through: str | None
    """The newest message left out (``None``: none is)."""
    summary: SummaryUse
    """What stands in for the trimmed messages: ``reused`` (the story's summary covers
    them), ``new`` (the turn would write one), ``none`` (nothing was trimmed)."""
    summary_tokens: int
    lore_entries: int
    lore_tokens: int
    system_prompt: Literal["template", "session"]
    persona: bool
    """Whether the persona's description is in the prompt."""
    author_note: PlacedNote | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "reply_tokens": self.reply_tokens,
            "used": self.used,
            "messages": self.messages,
            "sent": self.sent,
            "trimmed": self.trimmed,
            "trimmed_through": self.trimmed_through,
            "summary": self.summary,
            "summary_tokens": self.summary_tokens,
            "lore_entries": self.lore_entries,
            "lore_tokens": self.lore_tokens,
            "system_prompt": self.system_prompt,
            "persona": self.persona,
            "author_note": None if self.author_note is None else self.author_note.as_dict(),
        }


def measure(
    prompt: Prompt,
    history: Sequence[Message],
    retrieval: Retrieval,
    *,
    window: int,
    reply_tokens: int,
    count: Callable[[str], int],
    count_message: Callable[[Message], int],
    summary: dict[str, Any] | None,
    summary_text: str,
    note: PlacedNote | None,
) -> PromptPreview:
    """The preview of ``prompt`` (built from ``history``): ``count`` counts a text,
    ``count_message`` a history message (once per message: the turns' counts)."""
    used = 0
    for message, source in zip(prompt.messages, prompt.sources, strict=True):
        tokens = count_message(history[source]) if source is not None else count(message["content"])
        used += tokens + FRAMING
    sent = sum(1 for source in prompt.sources if source is not None)
    trimmed = sum(1 for message in history[: prompt.first_kept] if message.content.strip())
    use: SummaryUse = "none"
    if trimmed and summary is not None:
        use = "reused" if summary.get("reused") else "new"
    return PromptPreview(
        window=window,
        reply_tokens=reply_tokens,
        used=used,
        messages=sum(1 for message in history if message.content.strip()),
        sent=sent,
        trimmed=trimmed,
        trimmed_through=history[prompt.first_kept - 1].id if trimmed else None,
        summary=use,
        summary_tokens=count(summary_text) if summary_text else 0,
        lore_entries=len(retrieval.hits),
        lore_tokens=sum(count(hit.content) for hit in retrieval.hits),
        system_prompt="session" if SYSTEM_PROMPT_PART in prompt.parts else "template",
        persona="persona" in prompt.parts,
        author_note=note,
    )
