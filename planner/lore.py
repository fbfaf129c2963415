"""The planner of a session with lorebooks: World Info keywords, Chroma, conditions.

:class:`LorePlanner` plans by rules (scan the newest messages; search by meaning for
what the player just said), or with a model call that proposes what to look up (its
reasoning kept), and retrieves in one World Info scan, with the entries
that the vector index finds similar activated the way SillyTavern's vector storage
activates them (still subject to every other rule: timers, groups, probability,
budget), and entries whose world-state condition does not hold held back.

As in SillyTavern, the search by meaning looks only at the entries marked ``vectorized``
unless the campaign says all entries (``[lore.vectors] all_entries = true``); a book with
no such entry plays exactly as with the search off. An entry that fires anyway (by its
keys, constant, sticky) keeps that reason and leaves its place for meaning to the next
nearest entry.

The scan runs in a worker thread (``asyncio.to_thread``), one at a time per planner:
it is CPU work (regex keys included, each bounded, see :mod:`._jsregex`), and on the
event loop it would hold up every other request of a server while it runs.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ._compile import parse_decorators
from .base import LoreHit, Plan, PlanCall, PlanContext, Retrieval
from .conditions import parse_condition
from .errors import ConditionError, RetrievalError
from .lorebook import Entry, Lorebook
from .worldinfo import ScanResult, ScanSettings, Similar, WorldInfo

if TYPE_CHECKING:
    from .vectors import LoreIndex

__all__ = ["LorePlanner", "VectorSettings", "entry_placement"]

_ROLES = {0: "system", 1: "user", 2: "assistant"}


class VectorSettings(BaseModel):
    """How lore is found by meaning (a campaign's ``[lore.vectors]``)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    enabled: bool = True
    all_entries: bool = False
    """Search every enabled entry by meaning, not only those marked ``vectorized``
    (SillyTavern's "Enabled for all entries"). An entry not marked ``vectorized`` that
    is found by meaning still needs its secondary keys."""
    hits: int = Field(3, ge=0)
    """At most this many entries come in by meaning per turn; entries that fire anyway
    (by their keys, constant, sticky) take none of these places."""
    max_distance: float = Field(0.8, ge=0, allow_inf_nan=False)
    """Entries farther than this from the query are not activated (cosine distance; 0.8
    is a similarity of 0.2, tuned for the local model, whose good matches score 0.15 to
    0.75: ``bench/lore_by_meaning.py``)."""
    query_messages: int = Field(2, ge=1)
    """The query is the newest this-many messages."""


MAX_QUERIES = 4

SPARE_HITS = 32
"""The search by meaning looks this many entries beyond ``hits`` further, so the places
that entries firing anyway leave go to the next nearest."""


def entry_placement(entry: Entry) -> dict[str, Any]:
    """Where SillyTavern's ``position`` puts an entry in our prompt.

    0 goes before the character, 4 at its ``depth`` with its ``role``, 7 into its
    outlet; the rest (after the character, the author's note and example-message
    positions, which Clotho's prompt does not have) after the character.
    """
    if entry.position == 0:
        return {"position": "before_char"}
    if entry.position == 4:
        return {
            "position": "at_depth",
            "depth": max(entry.depth, 0),
            "role": _ROLES.get(entry.role or 0, "system"),
        }
    if entry.position == 7:
        return {"position": "outlet", "outlet": entry.outlet_name}
    return {"position": "after_char"}


class LorePlanner:
    """Lore for a turn from a session's lorebooks.

    Args:
        books: the lorebooks, each with a name unique in the session.
        settings: World Info's global settings (SillyTavern's defaults if ``None``).
        index: the vector index, every book synced (``None``: keywords only).
        vectors: how the index is used.
        seed: the random seed of probability rolls and inclusion groups (``None``:
            a fresh one each turn; it is recorded in the trace either way).
        plan_call: plan with a model call (strategy ``model``): it proposes what to look up
            by meaning, with its reasoning; ``None`` plans by rules. A failed or
            unreadable answer falls back to the rules, and the plan says why.
    """

    def __init__(
        self,
        books: Sequence[Lorebook],
        settings: ScanSettings | None = None,
        *,
        index: LoreIndex | None = None,
        vectors: VectorSettings | None = None,
        seed: int | None = None,
        plan_call: PlanCall | None = None,
    ) -> None:
        self.books = list(books)
        self.settings = settings or ScanSettings()
        self.world = WorldInfo(self.books, self.settings)
        self.index = index
        self.vectors = vectors or VectorSettings()
        self.seed = seed
        self.plan_call = plan_call
        self._entries = {
            f"{book.name}:{entry.uid}": entry for book in self.books for entry in book.entries
        }
        self._by_meaning = {
            book.name: uids
            for book in self.books
            if (
                uids := [
                    entry.uid
                    for entry in book.entries
                    if not entry.disable and (entry.vectorized or self.vectors.all_entries)
                ]
            )
        }
        """Book -> the uids of its entries the search by meaning may find."""
        self._scanning = threading.Lock()
        """One scan at a time: :class:`WorldInfo`'s caches are not locked."""

    @property
    def entry_ids(self) -> list[str]:
        """Every entry's id (``book:uid``), book by book."""
        return list(self._entries)

    def entry(self, entry_id: str) -> Entry | None:
        """The entry whose id is ``entry_id`` (``book:uid``), if a book has it."""
        return self._entries.get(entry_id)

    @staticmethod
    def hit(
        book: str,
        entry: Entry,
        *,
        reason: str,
        via: str,
        content: str | None = None,
        similarity: float | None = None,
    ) -> LoreHit:
        """The hit of ``book``'s ``entry``, placed where the entry says: ``content`` is
        what goes in the prompt (``None``: the entry's, without its ``@@`` decorator
        lines, as a scan compiles it)."""
        return LoreHit(
            id=f"{book}:{entry.uid}",
            content=parse_decorators(entry.content)[1] if content is None else content,
            reason=reason,
            via=via,
            similarity=similarity,
            book=book,
            uid=entry.uid,
            comment=entry.comment,
            **entry_placement(entry),
        )

    async def plan(self, context: PlanContext) -> Plan:
        depth = self.settings.scan_depth
        entries = sum(1 for entry in self._entries.values() if not entry.disable)
        books = ", ".join(book.name for book in self.books)
        queries = _newest(context, self.vectors.query_messages) if self._searching else []
        reasoning = (
            f"scan the newest {depth} message(s) for the keys of {entries} enabled "
            f"entr{'y' if entries == 1 else 'ies'} in {books}"
        )
        if queries:
            reasoning += "; search by meaning for what the newest messages talk about"
        elif self._no_candidates:
            reasoning += "; no entry is marked for the search by meaning (vectorized)"
        rules = Plan("rules", reasoning, queries)
        if self.plan_call is None:
            return rules
        return await self._model_plan(context, rules)

    async def _model_plan(self, context: PlanContext, rules: Plan) -> Plan:
        topics = [
            entry.comment or ", ".join(entry.keys[:3])
            for entry in self._entries.values()
            if not entry.disable and (entry.comment or entry.keys)
        ][:60]
        recent = list(context.history)[-max(self.settings.scan_depth, 2) :]
        scope = {
            "topics": topics,
            "max_queries": MAX_QUERIES,
            "messages": [{"speaker": _speaker(m, context), "text": m.content} for m in recent],
        }
        assert self.plan_call is not None
        try:
            answer, call = await self.plan_call(scope)
        except Exception as error:  # noqa: BLE001 - any failure of the call: plan by rules
            return _fallback(rules, f"the planning call failed ({error})", None)
        parsed = _parse_plan(answer)
        if isinstance(parsed, str):
            return _fallback(rules, parsed, call)
        reasoning, queries = parsed
        if not self._searching:
            queries = []
            why = "no entry is marked vectorized" if self._no_candidates else "no vector index"
            reasoning += f" ({why}: keywords only)"
        return Plan("model", reasoning, queries, call)

    @property
    def _searching(self) -> bool:
        return self.index is not None and self.vectors.enabled and bool(self._by_meaning)

    @property
    def _no_candidates(self) -> bool:
        """The search by meaning is on, but no entry is one it may find."""
        return self.index is not None and self.vectors.enabled and not self._by_meaning

    async def retrieve(self, plan: Plan, context: PlanContext) -> Retrieval:
        details: dict[str, Any] = {}
        similar: list[Similar] = []
        if self._searching and plan.queries:
            similar, details["vector"] = await self._similar(plan.queries)
        seed = self.seed if self.seed is not None else secrets.randbits(32)
        details["seed"] = seed
        budget = self.settings.budget(context.context_window)
        result = await asyncio.to_thread(
            self._scan,
            messages=[(_speaker(m, context), m.content) for m in context.history],
            chat_length=len(context.history),
            trigger=context.trigger,
            char=context.char,
            user=context.user,
            character=context.character,
            character_tags=context.character_tags,
            budget_tokens=budget,
            count_tokens=context.count_tokens,
            timers=context.state.get("lore_timers") or {},
            rng=random.Random(seed),
            similar=similar,
            similar_slots=self.vectors.hits,
            held_back=lambda _id, entry: _held_back(entry, context.state),
        )
        details.update(
            {
                "budget": budget,
                "tokens": result.tokens,
                "tokenizer": context.tokenizer,
                "loops": result.loops,
            }
        )
        if result.slow_regexes:
            details["slow_regexes"] = result.slow_regexes
        hits = [
            self.hit(
                item.book,
                item.entry,
                reason=item.reason,
                via=item.via,
                content=item.content,
                similarity=item.similarity,
            )
            for item in result.activated
        ]
        skipped = [{"id": skip.id, "reason": skip.reason} for skip in result.skipped]
        return Retrieval(hits, skipped, dict(result.timers), details)

    def _scan(self, **arguments: Any) -> ScanResult:
        with self._scanning:
            return self.world.scan(**arguments)

    async def _similar(self, queries: list[str]) -> tuple[list[Similar], dict[str, Any]]:
        """The entries the search by meaning may find that are nearest to the queries,
        nearest first (``hits`` of them and :data:`SPARE_HITS` more, for the places
        entries firing anyway leave); a failing index leaves keywords to do the work (the
        trace says why)."""
        assert self.index is not None
        try:
            found = await asyncio.to_thread(
                self.index.query,
                [book for book in self.books if book.name in self._by_meaning],
                queries,
                n=self.vectors.hits + SPARE_HITS if self.vectors.hits else 0,
                max_distance=self.vectors.max_distance,
                only=self._by_meaning,
            )
        except RetrievalError as error:
            return [], {"queries": queries, "error": str(error)}
        shown = [
            {
                "id": hit.id,
                "distance": round(hit.distance, 4),
                "similarity": round(hit.similarity, 4),
            }
            for hit in found
        ]
        details = {"queries": queries, "hits": shown, "places": self.vectors.hits}
        return [Similar(hit.id, hit.distance) for hit in found], details


def _fallback(rules: Plan, why: str, call: dict[str, Any] | None) -> Plan:
    return Plan("rules", f"{why}: planned by rules instead; {rules.reasoning}", rules.queries, call)


def _parse_plan(answer: str) -> tuple[str, list[str]] | str:
    """The model's plan, or why it cannot be read."""
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return f"the planning call's answer is not JSON ({answer[:80]!r})"
    if not isinstance(document, dict):
        return "the planning call's answer is not a JSON object"
    reasoning, queries = document.get("reasoning"), document.get("queries", [])
    if not isinstance(reasoning, str) or not isinstance(queries, list):
        return "the planning call's answer lacks 'reasoning' (text) or 'queries' (a list)"
    kept = [q.strip() for q in queries if isinstance(q, str) and q.strip()][:MAX_QUERIES]
    return reasoning.strip(), kept


def _newest(context: PlanContext, count: int) -> list[str]:
    texts = [m.content for m in list(context.history)[-count:] if m.content.strip()]
    return ["\n".join(texts)] if texts else []


def _speaker(message: Any, context: PlanContext) -> str:
    if message.name:
        return str(message.name)
    return {"user": context.user, "assistant": context.char}.get(message.role, "System")


def _held_back(entry: Entry, state: Any) -> str | None:
    text = entry.condition
    if text is None:
        return None
    try:
        condition = parse_condition(text)
    except ConditionError as error:
        return f"its condition does not parse: {error}"
    holds, why = condition.check(state)
    return None if holds else f"condition {why}"
