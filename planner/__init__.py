"""The planner: which lore a turn needs, and finding it.

The turn loop calls :meth:`Planner.plan` (what to look up, with its reasoning) then
:meth:`Planner.retrieve` (the entries, each with the reason it was chosen). This is
the interface; lorebooks, SillyTavern-compatible World Info and Chroma retrieval fill
it in with the planner issue. Until then :class:`RuleBasedPlanner` plans from the
newest messages and, with no lorebook loaded, finds nothing, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["LoreHit", "Plan", "PlanContext", "Planner", "RuleBasedPlanner"]


@dataclass(frozen=True)
class PlanContext:
    """What the planner sees of a turn."""

    history: Sequence[Any]
    """The messages the reply follows (mnemosyne.Message: ``role``, ``content``)."""
    state: Mapping[str, Any]
    """The world state the reply starts from."""
    user_text: str | None = None
    """The player's new message, when the turn has one."""


@dataclass(frozen=True)
class Plan:
    strategy: str
    """``rules`` or ``model``."""
    reasoning: str
    queries: list[str] = field(default_factory=list)
    """What to look up (texts to scan for keys and to search by meaning)."""

    def as_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "reasoning": self.reasoning, "queries": self.queries}


@dataclass(frozen=True)
class LoreHit:
    """One lore entry chosen for the prompt."""

    id: str
    content: str
    reason: str
    """Why it was chosen (the key that fired, the similarity, constant...)."""
    book: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "book": self.book, "reason": self.reason}


class Planner(Protocol):
    async def plan(self, context: PlanContext) -> Plan: ...

    async def retrieve(self, plan: Plan, context: PlanContext) -> list[LoreHit]: ...


class RuleBasedPlanner:
    """Looks up what the newest messages talk about, in no lorebook yet."""

    scan_depth = 4

    async def plan(self, context: PlanContext) -> Plan:
        recent = [m.content for m in list(context.history)[-self.scan_depth :]]
        if context.user_text:
            recent.append(context.user_text)
        return Plan(
            "rules",
            f"scan the newest {len(recent)} message(s) for lore; this campaign has no "
            "lorebook, so nothing can be found",
            recent[-1:],
        )

    async def retrieve(self, plan: Plan, context: PlanContext) -> list[LoreHit]:
        return []
