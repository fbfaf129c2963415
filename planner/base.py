"""The planner's interface: what the turn loop gives it and what it gets back.

The turn loop calls :meth:`Planner.plan` (what to look up, with its reasoning) then
:meth:`Planner.retrieve` (the entries for the prompt, each with the reason it was
chosen, the notable misses with theirs, and the lore's timed effects to store on the
new node). A planner that plans with a model call is given that call (a
:data:`PlanCall`) when it is made: the planner knows nothing of models or gateways.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "LoreHit",
    "Plan",
    "PlanCall",
    "PlanContext",
    "Planner",
    "Retrieval",
    "RuleBasedPlanner",
]


#: The model call a planner may plan with: given the ``plan`` template's context, the
#: model's answer (text) and a record of the call (model, messages, output, usage) for
#: the trace. ``orchestrator.build_engine`` makes it from the turn's gateway and
#: templates, and hands it to the planner it builds.
PlanCall = Callable[[dict[str, Any]], Awaitable[tuple[str, dict[str, Any]]]]


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass(frozen=True)
class PlanContext:
    """What the planner sees of a turn."""

    history: Sequence[Any]
    """The messages the reply follows, oldest first (mnemosyne.Message: ``role``,
    ``name``, ``content``); for say/edit it ends with the player's new message."""
    state: Mapping[str, Any]
    """The world state the reply starts from (``variables``, ``lore_timers``...)."""
    user_text: str | None = None
    """The player's new message, when the turn has one."""
    trigger: str = "normal"
    """SillyTavern's generation type: normal, continue, impersonate, swipe, regenerate."""
    char: str = "Narrator"
    user: str = "Player"
    character: Mapping[str, str] = field(default_factory=dict)
    """The card's texts a World Info entry may also scan (description, personality,
    scenario, depth_prompt, creator_notes)."""
    character_tags: Sequence[str] = ()
    context_window: int = 8192
    count_tokens: Callable[[str], int] = _bytes
    """Counts tokens for the lore budget (a byte count when no tokenizer is given)."""
    tokenizer: str = "bytes (no tokenizer given)"
    """What :attr:`count_tokens` counts with, for people (``tiktoken cl100k_base``)."""


@dataclass(frozen=True)
class Plan:
    strategy: str
    """``rules`` or ``model``."""
    reasoning: str
    queries: list[str] = field(default_factory=list)
    """What to look up by meaning."""
    call: dict[str, Any] | None = None
    """The model call that made the plan (strategy ``model``): messages, output, usage."""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "strategy": self.strategy,
            "reasoning": self.reasoning,
            "queries": self.queries,
        }
        if self.call is not None:
            out["call"] = self.call
        return out


@dataclass(frozen=True)
class LoreHit:
    """One lore entry chosen for the prompt."""

    id: str
    """``book:uid``."""
    content: str
    reason: str
    """Why it was chosen (the key that fired, the similarity, constant, sticky...)."""
    via: str = "key"
    """Which way it came in: ``key`` (in the newest messages or the character's texts),
    ``recursion`` (a key in what other entries brought in), ``constant``, ``sticky``,
    ``decorator`` (``@@activate``) or ``meaning`` (found by the search by meaning)."""
    similarity: float | None = None
    """For ``meaning``: its similarity to the query (1 best)."""
    book: str | None = None
    uid: int | None = None
    comment: str = ""
    position: str = "after_char"
    """``before_char``, ``after_char``, ``at_depth`` or ``outlet``."""
    depth: int = 4
    """For ``at_depth``: how many messages from the end of the history."""
    role: str = "system"
    """For ``at_depth``: the role of the message it is sent as."""
    outlet: str = ""

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "book": self.book,
            "uid": self.uid,
            "comment": self.comment,
            "reason": self.reason,
            "via": self.via,
            "position": self.position,
        }
        if self.similarity is not None:
            out["similarity"] = self.similarity
        if self.position == "at_depth":
            out["depth"], out["role"] = self.depth, self.role
        if self.position == "outlet":
            out["outlet"] = self.outlet
        return out


@dataclass(frozen=True)
class Retrieval:
    """What a retrieval found, and everything a trace needs to explain it."""

    hits: list[LoreHit] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """Entries that could have fired and did not, each ``{"id", "reason"}`` (a failed
    probability roll, the budget, an inclusion group, a condition...)."""
    timers: dict[str, Any] | None = None
    """The lore's timed effects after this turn (``None``: no lorebook, nothing kept)."""
    details: dict[str, Any] = field(default_factory=dict)
    """Budget, scan loops, the random seed, vector hits, regex keys skipped for taking
    too long (``slow_regexes``)..."""


class Planner(Protocol):
    """Chooses a turn's lore: :meth:`plan` what to look up, then :meth:`retrieve` it."""

    async def plan(self, context: PlanContext) -> Plan: ...

    async def retrieve(self, plan: Plan, context: PlanContext) -> Retrieval: ...


class RuleBasedPlanner:
    """The planner of a session with no lorebook: finds nothing, and says why."""

    async def plan(self, context: PlanContext) -> Plan:
        return Plan("rules", "this session has no lorebook: there is nothing to look up")

    async def retrieve(self, plan: Plan, context: PlanContext) -> Retrieval:
        return Retrieval()
