"""The PromptTrace of a turn: everything about the model call but the messages
themselves (mnemosyne stores those by reference, see :mod:`mnemosyne.traces`).

Texts that repeat from turn to turn (template sources, lore entries) are stored as
blobs and named by their hash in the document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from planner import Plan, Retrieval
from postprocess import Extraction
from prompts import PlacedNote

from .gateway import Completion
from .setup import TurnSetup

__all__ = ["TRACE_VERSION", "TraceBuilder", "call_record", "postprocess_record"]

TRACE_VERSION = 1


class TraceBuilder:
    """Collects a turn's trace as the graph runs."""

    def __init__(self, kind: str, setup: TurnSetup) -> None:
        self.kind = kind
        self.setup = setup
        self.templates: list[str] = []
        self.trimmed: dict[str, Any] = {}
        self.author_note: PlacedNote | None = None
        """The author's note of the turn, where it went (or why not), if there is one."""

    def template(self, name: str) -> None:
        """Record that a template was rendered for this turn."""
        if name not in self.templates:
            self.templates.append(name)

    def node_metadata(
        self, completion: Completion, extraction: Extraction | None
    ) -> dict[str, Any]:
        """What the generated node itself keeps (shown with the node, exported with it)."""
        meta: dict[str, Any] = {
            "generated": self.kind,
            "model": completion.model,
            "params": dict(self.setup.model.params),
            "usage": completion.usage,
            "latency_ms": round(completion.latency_ms, 2),
            "finish_reason": completion.finish_reason,
        }
        if completion.reasoning:
            meta["reasoning"] = completion.reasoning
        if completion.incomplete:
            meta["incomplete"] = True
            meta["stopped_by"] = completion.stopped_by
        if extraction is not None and not extraction.ok:
            meta["delta_error"] = extraction.error
        return meta

    def document(
        self,
        put_blob: Callable[[str], str],
        *,
        plan: Plan,
        retrieval: Retrieval,
        completion: Completion,
        extraction: Extraction | None,
        delta: list[dict[str, Any]],
    ) -> dict[str, Any]:
        """The trace document (JSON), large texts stored through ``put_blob``."""
        templates = {}
        for name in self.templates:
            used = self.setup.templates.used(name)
            templates[name] = {"origin": used.origin, "blob": put_blob(used.source)}
        return {
            "version": TRACE_VERSION,
            "kind": self.kind,
            **call_record(self.setup, completion),
            "planner": plan.as_dict(),
            "lore": [{**hit.as_dict(), "content": put_blob(hit.content)} for hit in retrieval.hits],
            "lore_skipped": retrieval.skipped,
            "retrieval": retrieval.details,
            "templates": templates,
            "trimmed": self.trimmed,
            "system_prompt": {"origin": "session", "blob": put_blob(self.setup.system_prompt)}
            if self.setup.system_prompt and self.setup.system_prompt.strip()
            else None,
            "author_note": None
            if self.author_note is None
            else {**self.author_note.as_dict(), "text": put_blob(self.author_note.text)},
            "postprocess": postprocess_record(self.setup, completion, extraction),
            "delta": delta,
        }


def call_record(setup: TurnSetup, completion: Completion) -> dict[str, Any]:
    """What a trace tells of the model call: the model, its server and settings, and
    how the call went (usage, times, why it ended, the reasoning)."""
    return {
        "model": setup.model.model,
        "api_base": setup.model.api_base,
        "params": dict(setup.model.params),
        "usage": completion.usage,
        "latency_ms": round(completion.latency_ms, 2),
        "first_token_ms": None
        if completion.first_token_ms is None
        else round(completion.first_token_ms, 2),
        "finish_reason": completion.finish_reason,
        "incomplete": completion.incomplete,
        "stopped_by": completion.stopped_by,
        "reasoning": completion.reasoning or None,
    }


def postprocess_record(
    setup: TurnSetup, completion: Completion, extraction: Extraction | None
) -> dict[str, Any] | None:
    """What a trace tells of the state extraction: its call, or why there was none."""
    if extraction is not None:
        return {
            "model": setup.extractor.model,
            "messages": extraction.messages,
            "response_format": extraction.response_format,
            **extraction.as_dict(),
        }
    if completion.incomplete:
        return {"skipped": "the reply is incomplete: no delta"}
    return None
