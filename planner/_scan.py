"""One World Info activation: SillyTavern's ``checkWorldInfo`` loop over compiled entries.

Each loop SillyTavern walks every entry in order and, for each, the first rule that
applies decides (already active, disabled, triggers, character filter, [Clotho's
condition], delay, cooldown, delay until recursion, exclude recursion, decorators,
constant, found by meaning, sticky, keys). Here the same rules run, in the same order
but for one (found by meaning is looked at after sticky and the keys, so an entry that
fires anyway keeps its reason and leaves its place for meaning to another), and only
on the entries that could fire this loop: those that always need a look (constants,
decorators, found by meaning, sticky, regexes without a literal...) and those with a primary
key present in their haystack (found for all entries at once, see :mod:`._keys`).
An entry with no key present would end at "no match" anyway, so the outcome is the
same; notable misses are recorded only for entries that would otherwise have fired.

Regex keys run on a :class:`~._jsregex.RegexClock`: a key whose match takes too long, or
that comes after the scan's time for regexes is spent, matches nothing for the rest
of the scan, and the entries it kept from firing say so (kind ``slow_regex``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._compile import (
    ALWAYS,
    NEVER,
    PLAIN,
    REGEX,
    Item,
    Key,
    js_key_order,
    substitute_macros,
)
from ._haystack import FOUND_ELSEWHERE, Haystack, Label, Piece
from ._jsregex import RegexClock, RegexKey, js_trim
from ._keys import st_match_key
from ._timed import TimedEffects
from ._world import MAX_SCAN_DEPTH, CompiledWorld
from .lorebook import Entry, SelectiveLogic

__all__ = ["VIA", "Activation", "Scan", "ScanResult", "Similar", "Skip"]

NONE, INITIAL, RECURSION, MIN_ACTIVATIONS = 0, 1, 2, 3
_FIELD_NAMES = {
    "persona": "the persona description",
    "description": "the character description",
    "personality": "the character personality",
    "depth_prompt": "the character's depth prompt",
    "scenario": "the scenario",
    "creator_notes": "the creator notes",
}
_LOGIC = {0: "AND ANY", 1: "NOT ALL", 2: "NOT ANY", 3: "AND ALL"}
_UNKNOWN: Any = object()

VIA = ("decorator", "constant", "sticky", "key", "recursion", "meaning")
"""Which way an entry came in: its ``@@activate`` decorator, constant, sticky, a key in
the scanned messages (or the character's texts), a key in what other entries brought in
(recursion), or found by meaning (the vector search)."""


@dataclass(frozen=True)
class Similar:
    """An entry the search by meaning found (given to a scan nearest first)."""

    id: str
    """``book:uid``."""
    distance: float
    """Cosine distance to the query (0 best, 2 worst)."""

    @property
    def similarity(self) -> float:
        """``1 - distance`` (1 best)."""
        return 1.0 - self.distance


@dataclass(frozen=True)
class Decided:
    """Why an entry fires this loop (before groups, probability and the budget)."""

    reason: str
    via: str
    """One of :data:`VIA`."""
    key: str | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class Activation:
    """An entry that goes in the prompt."""

    id: str
    """``book:uid``."""
    book: str
    entry: Entry
    """The entry (``position``, ``depth``, ``role``, ``order``... say where it goes)."""
    reason: str
    """Why it fired: ``key 'dragon' in message 2``, ``constant``, ``sticky (until
    message 12)``, ``key 'glade' in recursion from 'Eldoria:0'``..."""
    loop: int
    """The scan loop that activated it (1: the first pass over the messages)."""
    content: str
    """What goes in the prompt: the content without its ``@@`` decorators, with
    ``{{char}}`` and ``{{user}}`` replaced."""
    key: str | None = None
    """The primary key that matched (after macros), when a key activated it."""
    via: str = "key"
    """Which way it came in (one of :data:`VIA`)."""
    similarity: float | None = None
    """Its similarity to the query, when it came in by meaning."""


@dataclass(frozen=True)
class Skip:
    """A notable entry that did not fire, and why."""

    id: str
    reason: str
    kind: str
    """``probability``, ``budget``, ``group``, ``held_back``, ``cooldown``, ``delay``,
    ``delay_until_recursion``, ``exclude_recursion``, ``triggers``,
    ``character_filter``, ``decorator``, ``secondary``, ``regex`` (does not compile),
    ``slow_regex`` (skipped for taking too long) or ``meaning_slots`` (found by meaning,
    but the places for entries found by meaning went to nearer ones)."""


@dataclass(frozen=True)
class ScanResult:
    """One World Info activation."""

    activated: list[Activation]
    """In prompt order: filtered by ``entry.position`` (and by ``depth`` and ``role``
    for @depth entries), the contents joined with ``\\n`` give SillyTavern's text for
    that place (lower ``order`` first, higher nearer the end; SillyTavern fills
    outlets, position 7, the other way round)."""
    skipped: list[Skip]
    """Notable misses, in entry order: entries that would have fired but for a rule,
    or whose roll, group or budget went against them."""
    timers: dict[str, Any]
    """The timed effects to store on the new node (JSON-able)."""
    tokens: int
    """Tokens of the activated contents (each followed by a newline)."""
    loops: int
    overflowed: bool = False
    """The budget ran out (entries were cut)."""
    slow_regexes: list[str] = field(default_factory=list)
    """The regex keys skipped for taking too long, each saying so."""


class Scan:
    """One activation (see :meth:`planner.worldinfo.WorldInfo.scan` for the arguments)."""

    def __init__(
        self,
        world: CompiledWorld,
        *,
        messages: Sequence[tuple[str, str]],
        chat_length: int,
        trigger: str,
        char: str,
        user: str,
        character: Mapping[str, str],
        character_tags: Sequence[str],
        budget: int,
        count_tokens: Callable[[str], int],
        timers: Mapping[str, Any],
        rng: random.Random,
        similar: Sequence[Similar],
        similar_slots: int,
        held_back: Callable[[str, Entry], str | None] | None,
    ) -> None:
        self.world = world
        self.settings = world.settings
        self.items = world.items
        self.messages = messages
        self.chat_length = chat_length
        self.trigger = trigger
        self.char, self.user = char, user
        self.character = character
        self.file_name = character.get("file_name") or char
        self.tags = tuple(character_tags)
        self.budget = budget
        self.count = count_tokens
        self.rng = rng
        self.similar = {hit.id: (rank, hit) for rank, hit in enumerate(similar)}
        """Entry id -> (its rank, nearest first; the hit) for the entries found by meaning."""
        self.slots = similar_slots
        self.slots_taken = 0
        self.held_back = held_back
        self.variant = world.variant(char, user)
        self.layers = [world.static] + ([self.variant.layer] if self.variant else [])
        self.timed = TimedEffects(timers, chat_length, world.by_hash, world.delayed)
        self.segments: list[str] = []
        self.recurse: list[str] = []
        self.recurse_pieces: list[list[Piece]] = []
        """The pieces of each part of the recursion buffer (one per entry content)."""
        self.all_text = ""
        self.activated: dict[int, Activation] = {}
        self.failed: set[int] = set()
        self.skips: dict[int, Skip] = {}
        self.contents: dict[int, str] = {}
        self.overflowed = False
        self.spent = 0
        self.hays: dict[Any, Haystack] = {}
        self.current: dict[Any, Haystack] = {}
        """This loop's haystack of each kind of entry."""
        self.cands: dict[Any, tuple[Haystack, list[int], set[int]]] = {}
        """Kind of entry -> (its haystack, key ids looked up so far, entries they name)."""
        self.gates: dict[int, tuple[str, str] | None] = {}
        self.settled: set[int] = set()
        """Entries stopped by a rule that holds for the whole scan, their miss recorded."""
        self.piece_hits: dict[str, frozenset[int]] = {}
        self.regex_cache = world.regex_cache
        self.clock = RegexClock()
        self.slow: dict[int, str] = {}
        """Entry index -> why a regex key of it was skipped (the first one)."""
        self.state = INITIAL
        self.skew = 0
        self.level = 0
        always = set(world.always)
        if self.variant is not None:
            always |= self.variant.always
        always.update(world.by_id[id].index for id in self.similar if id in world.by_id)
        for hash in self.timed.active["sticky"]:
            always.add(world.by_hash[hash].index)
        self.always = always

    # -- the loop -----------------------------------------------------------------------

    def run(self) -> ScanResult:
        with self.clock.running():
            return self._run()

    def _run(self) -> ScanResult:
        settings = self.settings
        levels = list(self.world.delay_levels)
        self.level = levels.pop(0) if levels else 0
        count = 0
        while self.state:
            if settings.max_recursion_steps and settings.max_recursion_steps <= count:
                break
            count += 1
            found: list[tuple[Item, Decided]] = []
            for index in self._candidates():
                item = self.items[index]
                decided = self._decide(item)
                if decided is not None:
                    found.append((item, decided))
            found = self._meaning_slots(found)
            sticky = [entry for entry in found if self._sticky(entry[0])]
            found = sticky + [entry for entry in found if not self._sticky(entry[0])]
            new = [item for item, _ in found]
            why = {item.index: decided for item, decided in found}
            notes = self._groups(new)
            for item in new:
                if item.index in self.slow:
                    notes.setdefault(item.index, []).append(self.slow[item.index])
            self._admit(new, why, notes, count)
            successful = [item for item in new if item.index not in self.failed]
            recursing = [item for item in successful if not item.entry.prevent_recursion]
            self._next(recursing, levels)
        self._slow_regexes()
        self._regex_problems()
        for index in self.activated:
            self.skips.pop(index, None)
        activated = list(self.activated.values())
        activated.sort(key=lambda activation: -activation.entry.order)
        text = "".join(activation.content + "\n" for activation in activated)
        timers = self.timed.finish(self.items[index] for index in self.activated)
        return ScanResult(
            activated=activated[::-1],
            skipped=[self.skips[index] for index in sorted(self.skips)],
            timers=timers,
            tokens=self.count(text) if text else 0,
            loops=count,
            overflowed=self.overflowed,
            slow_regexes=list(self.clock.skipped.values()),
        )

    def _slow_regexes(self) -> None:
        """Entries a skipped regex key may have kept from firing (a secondary verdict
        that counted it absent is replaced; a later rule's miss is kept)."""
        for index, reason in self.slow.items():
            known = self.skips.get(index)
            if index not in self.activated and (known is None or known.kind == "secondary"):
                self.skips[index] = Skip(self.items[index].id, reason, "slow_regex")

    def _regex_problems(self) -> None:
        """Entries with a regex key that does not compile, when nothing else explains them."""
        found = {item.index: item.problems for item in self.world.problem_items}
        if self.variant is not None:
            found.update(self.variant.problems)
        for index, problems in found.items():
            if index not in self.activated and index not in self.skips:
                self._skip(self.items[index], "regex", "; ".join(problems))

    def _next(self, recursing: list[Item], levels: list[int]) -> None:
        """The next scan state, and the recursion text (SillyTavern's order of rules)."""
        settings = self.settings
        state, following = self.state, NONE
        if settings.recursive and not self.overflowed and recursing:
            following = RECURSION
        if settings.recursive and not self.overflowed and state == MIN_ACTIVATIONS and self.recurse:
            following = RECURSION
        short = settings.min_activations > 0 and len(self.activated) < settings.min_activations
        if not following and not self.overflowed and short:
            depth = settings.scan_depth + self.skew
            limit = settings.min_activations_depth_max
            if not ((limit > 0 and depth > limit) or depth > self.chat_length):
                following = MIN_ACTIVATIONS
                self.skew += 1
        if not following and levels:
            following = RECURSION
            self.level = levels.pop(0)
        self.state = following
        if following:
            sources = [(item, self.contents.get(item.index, item.content)) for item in recursing]
            text = "\n".join(content for _, content in sources)
            if text:
                self.recurse.append(text)
                self.recurse_pieces.append(
                    [
                        (
                            "" if number else "\x01",
                            content,
                            ("recursion", item.id),
                            self._hits(content),
                        )
                        for number, (item, content) in enumerate(sources)
                    ]
                )
                self.all_text = text + "\n" + self.all_text

    # -- candidates and haystacks ---------------------------------------------------------

    def _candidates(self) -> list[int]:
        """The entries that could fire this loop, in order (see the module's docstring)."""
        found = set(self.always)
        world, variant = self.world, self.variant
        self.current = {}
        for where in world.wheres:
            hay = self.current[where] = self._hay(where)
            known = self.cands.get(where)
            if known is None or known[0] is not hay:
                known = self.cands[where] = (hay, [0], set())
            _, seen, entries = known
            kids = hay.kids
            if seen[0] < len(kids):
                for index in (
                    world.index.get(where),
                    variant.index.get(where) if variant else None,
                ):
                    if index:
                        for kid in kids[seen[0] :]:
                            listed = index.get(kid)
                            if listed:
                                entries.update(listed)
                seen[0] = len(kids)
            found |= entries
        found.difference_update(self.activated, self.failed, self.settled)
        return sorted(found)

    def _hay(self, where: tuple[int | None, tuple[str, ...]]) -> Haystack:
        """An entry kind's haystack this loop (kept, and grown, across loops)."""
        own, scanned = where
        depth = own if own is not None else self.settings.scan_depth + self.skew
        depth = min(depth, MAX_SCAN_DEPTH)
        recursion = self.state != MIN_ACTIVATIONS
        key = (depth, scanned, recursion)
        hay = self.hays.get(key)
        if hay is None:
            hay = self.hays[key] = self._base(depth, scanned)
        if recursion and not hay.empty:
            while hay.rounds < len(self.recurse):
                hay.add(self.recurse[hay.rounds], self.recurse_pieces[hay.rounds])
                hay.rounds += 1
        return hay

    def _base(self, depth: int, scanned: tuple[str, ...]) -> Haystack:
        """The messages (newest first) and the character texts an entry kind scans."""
        if depth <= 0:
            return Haystack(empty=True)
        hay = Haystack()
        count = min(depth, len(self.messages))
        while len(self.segments) < count:
            name, text = self.messages[-1 - len(self.segments)]
            line = f"{name}: {text}" if self.settings.include_names else text
            self.segments.append(js_trim(line))
        last = len(self.messages) - 1
        for number in range(count):
            segment = self.segments[number]
            label: Label = ("message", last - number)
            hay.add(segment, [("\x01", segment, label, self._hits(segment))])
        if not count:
            hay.add("", [("\x01", "", ("message", None), frozenset())])
        for name in scanned:
            value = self.character.get(name)
            if value:
                hay.add(value, [("\x01", value, ("field", name), self._hits(value))])
        return hay

    def _hits(self, text: str) -> frozenset[int]:
        """The ids of the plain keys (and regex literals) found in a text."""
        found = self.piece_hits.get(text)
        if found is not None:
            return found
        lowered: str | None = None
        parts = []
        for layer in self.layers:
            for mode in layer.matchers:
                if mode[0]:
                    parts.append(layer.hits(mode, text))
                else:
                    if lowered is None:
                        lowered = text.lower()
                    parts.append(layer.hits(mode, lowered))
        found = parts[0] if len(parts) == 1 else frozenset().union(*parts)
        self.piece_hits[text] = found
        return found

    def _test(self, regex: RegexKey, text: str) -> bool:
        """A regex on a text, remembered across scans (a skipped key's miss is not)."""
        cache = self.regex_cache
        key = (regex, text)
        found = cache.get(key)
        if found is None:
            found = regex.test(text)
            if regex.source in self.clock.skipped:
                return False
            if len(cache) >= 16384:
                del cache[next(iter(cache))]
            cache[key] = found
        return found

    # -- one entry ------------------------------------------------------------------------

    def _sticky(self, item: Item) -> bool:
        return self.timed.sticky_until(item) is not None

    def _decide(self, item: Item) -> Decided | None:
        """SillyTavern's checks for one entry, in its order: why, if it fires.

        An entry found by meaning that fires anyway (constant, sticky, by its keys) keeps
        that reason and leaves the places for meaning to others: the search by meaning is
        looked at last, where SillyTavern looks at its external activations before sticky
        and the keys (the outcome is the same, the reason the true one)."""
        entry = item.entry
        if entry.disable:
            return None
        hay = self.current[item.where]
        gate = self.gates.get(item.index, _UNKNOWN)
        if gate is _UNKNOWN:
            gate = self._gate(item)
        if gate is not None:
            self._pre_skip(item, hay, gate[0], gate[1])
            if item.index in self.skips:
                self.settled.add(item.index)  # recorded, and it cannot change in this scan
            return None
        state = self.state
        sticky_end = self.timed.sticky_until(item)
        sticky = sticky_end is not None
        level = item.delay_level
        if level and not sticky:
            if state != RECURSION:
                reason = f"delayed until recursion (level {level})"
                self._pre_skip(item, hay, "delay_until_recursion", reason)
                return None
            if level > self.level:
                reason = f"delayed until recursion level {level} (the scan is at {self.level})"
                self._pre_skip(item, hay, "delay_until_recursion", reason)
                return None
        recursive = self.settings.recursive
        if state == RECURSION and recursive and entry.exclude_recursion and not sticky:
            reason = "excluded from recursion, and found only by a recursion pass"
            self._pre_skip(item, hay, "exclude_recursion", reason)
            return None
        if "@@activate" in item.decorators:
            return Decided("@@activate decorator", "decorator")
        if "@@dont_activate" in item.decorators:
            self._pre_skip(item, hay, "decorator", "@@dont_activate decorator")
            return None
        if entry.constant:
            return Decided("constant", "constant")
        if sticky:
            return Decided(f"sticky (until message {sticky_end})", "sticky")
        decided = self._by_keys(item, hay, record=True)
        if decided is None and item.id in self.similar:
            return self._by_meaning(item, hay)
        return decided

    def _by_meaning(self, item: Item, hay: Haystack) -> Decided | None:
        """An entry the search by meaning found, that nothing else fires.

        Found by meaning stands in for the primary keys. An entry marked ``vectorized``
        fires as SillyTavern's vector storage activates it, whatever its secondary keys
        say; any other entry (a candidate only when the campaign searches all entries by
        meaning) still needs its secondary keys, as its author wrote them."""
        _, hit = self.similar[item.id]
        found = f"found by meaning (similarity {hit.similarity:.2f} to the newest messages)"
        entry = item.entry
        _, secondary = self._keys(item)
        if not entry.vectorized and entry.selective and secondary:
            passed, hits = self._secondary(item, hay)
            if not passed:
                self._skip(item, "secondary", self._secondary_miss(found, item, hits))
                return None
        return Decided(found, "meaning", similarity=round(hit.similarity, 4))

    def _meaning_slots(self, found: list[tuple[Item, Decided]]) -> list[tuple[Item, Decided]]:
        """The entries that would come in only by meaning get the places left for them,
        nearest first; the others are left out, and say so."""
        by_meaning = [pair for pair in found if pair[1].via == "meaning"]
        if not by_meaning:
            return found
        by_meaning.sort(key=lambda pair: self.similar[pair[0].id][0])
        free = max(self.slots - self.slots_taken, 0)
        self.slots_taken += min(free, len(by_meaning))
        for item, decided in by_meaning[free:]:
            reason = (
                f"{decided.reason}, but the {self.slots} place(s) for entries found by "
                "meaning went to nearer ones"
            )
            self._skip(item, "meaning_slots", reason)
        left_out = {item.index for item, _ in by_meaning[free:]}
        return [pair for pair in found if pair[0].index not in left_out]

    def _gate(self, item: Item) -> tuple[str, str] | None:
        """The checks that do not change during a scan (SillyTavern's 3 to 7, and Clotho's
        condition after the character filter): (kind, reason) if one stops the entry."""
        entry = item.entry
        gate: tuple[str, str] | None = None
        rule = entry.character_filter
        sticky = self.timed.sticky_until(item) is not None
        if entry.triggers and self.trigger not in entry.triggers:
            wanted = ", ".join(entry.triggers)
            gate = ("triggers", f"triggers: fires on {wanted}, not on {self.trigger!r}")
        elif rule.names and (self.file_name in rule.names) == rule.is_exclude:
            how = "excludes" if rule.is_exclude else "does not include"
            gate = ("character_filter", f"character filter {how} {self.file_name!r}")
        elif (
            rule.tags
            and self.tags
            and any(tag in rule.tags for tag in self.tags) == rule.is_exclude
        ):
            how = "excludes the tags" if rule.is_exclude else "wants one of the tags"
            gate = ("character_filter", f"character filter {how} {', '.join(rule.tags)}")
        elif self.held_back is not None and (why := self.held_back(item.id, entry)):
            gate = ("held_back", f"held back: {why}")
        elif self.timed.is_delayed(item):
            gate = ("delay", f"delay {item.delay}: the chat has {self.chat_length} message(s)")
        elif (cooldown := self.timed.cooldown_until(item)) is not None and not sticky:
            gate = ("cooldown", f"cooldown (until message {cooldown})")
        self.gates[item.index] = gate
        return gate

    def _pre_skip(self, item: Item, hay: Haystack, kind: str, reason: str) -> None:
        """A rule before the keys stopped the entry: notable if it would have fired."""
        known = self.skips.get(item.index)
        if known is not None and known.kind == kind:
            return None  # recorded in an earlier loop
        if (
            item.entry.constant
            or self.timed.sticky_until(item) is not None
            or item.id in self.similar
            or "@@activate" in item.decorators
            or self._by_keys(item, hay, record=False) is not None
        ):
            self._skip(item, kind, reason)
        return None

    def _skip(self, item: Item, kind: str, reason: str) -> None:
        """Record a miss; of two of the same kind (loop after loop) the first is kept."""
        known = self.skips.get(item.index)
        if known is None or known.kind != kind:
            self.skips[item.index] = Skip(item.id, reason, kind)

    def _keys(self, item: Item) -> tuple[tuple[Key, ...], tuple[Key, ...]]:
        if item.dynamic and self.variant is not None:
            return self.variant.keys[item.index]
        return item.keys, item.secondary

    def _by_keys(self, item: Item, hay: Haystack, record: bool) -> Decided | None:
        """Primary then secondary keys (SillyTavern's checks 15 to 17)."""
        entry = item.entry
        if not entry.keys:
            return None
        primary, secondary = self._keys(item)
        present = hay.present
        first = None
        for key in primary:
            if key.kid in present if key.kind == PLAIN else self._hit(key, item, hay):
                first = key
                break
        if first is None:
            return None
        if not record:
            passed = not (entry.selective and secondary) or self._secondary(item, hay)[0]
            return Decided("", "key", first.text) if passed else None
        reason, via = self._reason(first, item, hay)
        if not (entry.selective and secondary):
            return Decided(reason, via, first.text)
        passed, hits = self._secondary(item, hay)
        if not passed:
            known = self.skips.get(item.index)
            if known is None or known.kind != "secondary":
                self._skip(item, "secondary", self._secondary_miss(reason, item, hits))
            return None
        logic = entry.selective_logic
        last = secondary[len(hits) - 1]
        shown = ", ".join(_show(key) for key in secondary)
        decided = {
            SelectiveLogic.AND_ANY: f"AND ANY {_show(last)}",
            SelectiveLogic.NOT_ALL: f"NOT ALL ({_show(last)} absent)",
            SelectiveLogic.NOT_ANY: f"NOT ANY (none of {shown})",
        }.get(logic, f"AND ALL ({shown})")
        return Decided(f"{reason}; secondary: {decided}", via, first.text)

    def _secondary(self, item: Item, hay: Haystack) -> tuple[bool, list[bool]]:
        """Whether the secondary keys let the entry fire by its logic, and which of them
        were looked at and found (AND ANY and NOT ALL stop at the deciding key)."""
        _, secondary = self._keys(item)
        logic = item.entry.selective_logic
        present = hay.present
        hits: list[bool] = []
        passed = False
        for key in secondary:
            hit = key.kid in present if key.kind == PLAIN else self._hit(key, item, hay)
            hits.append(hit)
            if (logic == SelectiveLogic.AND_ANY and hit) or (
                logic == SelectiveLogic.NOT_ALL and not hit
            ):
                passed = True  # AND ANY: the first present key; NOT ALL: the first absent
                break
        if logic == SelectiveLogic.NOT_ANY:
            passed = not any(hits)
        elif logic == SelectiveLogic.AND_ALL:
            passed = all(hits)
        return passed, hits

    def _secondary_miss(self, found: str, item: Item, hits: list[bool]) -> str:
        """Why the secondary keys refused an entry ``found`` (by a key, or by meaning)."""
        logic = item.entry.selective_logic
        _, secondary = self._keys(item)
        present = [_show(key) for key, hit in zip(secondary, hits, strict=False) if hit]
        absent = [_show(key) for key, hit in zip(secondary, hits, strict=False) if not hit]
        if logic == SelectiveLogic.AND_ANY:
            detail = f"none of {', '.join(absent)} present"
        elif logic == SelectiveLogic.NOT_ALL:
            detail = f"all of {', '.join(present)} present"
        elif logic == SelectiveLogic.NOT_ANY:
            detail = f"{present[0]} present"
        else:
            detail = f"{absent[0]} absent"
        return f"{found}, but secondary {_LOGIC[logic]}: {detail}"

    def _hit(self, key: Key, item: Item, hay: Haystack) -> bool:
        kind = key.kind
        if kind == PLAIN:
            return key.kid in hay.present
        if kind == REGEX:
            if key.kid >= 0 and key.kid not in hay.present:
                return False
            assert key.regex is not None
            if hay.find_regex(key.regex, key.kid, self._test) is not None:
                return True
            skipped = self.clock.skipped.get(key.regex.source)
            if skipped is not None:
                self.slow.setdefault(item.index, skipped)
            return False
        if kind == ALWAYS:
            return True
        if kind == NEVER:
            return False
        return st_match_key(hay.text, key.text, *item.mode)

    # -- reasons --------------------------------------------------------------------------

    def _reason(self, key: Key, item: Item, hay: Haystack) -> tuple[str, str]:
        """Why a key fired an entry, and which way (``key``, or ``recursion`` when it was
        found in what other entries brought in)."""
        if key.kind == ALWAYS:
            return f"blank key {key.text!r} (SillyTavern matches it in any text)", "key"
        if hay.empty:
            return f"{_show(key, 'key ')} in the empty text of scan depth 0", "key"
        if key.kind == PLAIN:
            piece = hay.present[key.kid]
        else:
            found = None
            if key.kind == REGEX:
                assert key.regex is not None
                found = hay.find_regex(key.regex, key.kid, self._test)
            if found is None or found == FOUND_ELSEWHERE:
                piece = hay.piece_at(self._offset(key, item, hay))
            else:
                piece = found
        label = hay.pieces[piece][2]
        via = "recursion" if label[0] == "recursion" else "key"
        return f"{_show(key, 'key ')} in {_label(label)}", via

    def _offset(self, key: Key, item: Item, hay: Haystack) -> int:
        if key.regex is not None:
            return key.regex.first(hay.text) or 0
        case = item.mode[0]
        text = hay.text if case else hay.lower
        return max(text.find(key.text if case else key.text.lower()), 0)

    # -- inclusion groups ---------------------------------------------------------------

    def _groups(self, new: list[Item]) -> dict[int, list[str]]:
        """SillyTavern's ``filterByInclusionGroups``: removes the losers from ``new``."""
        grouped: dict[str, list[Item]] = {}
        for item in new:
            for group_name in item.groups:
                grouped.setdefault(group_name, []).append(item)
        notes: dict[int, list[str]] = {}
        if not grouped:
            return notes
        names = js_key_order(grouped)

        def remove(item: Item, reason: str) -> None:
            if item in new:
                new.remove(item)
                self._skip(item, "group", reason)

        held: set[str] = set()
        for name in names:
            group = grouped[name]
            sticky = [item for item in group if self._sticky(item)]
            if sticky:
                holders = ", ".join(repr(item.id) for item in sticky)
                for item in group:
                    if item not in sticky:
                        remove(item, f"inclusion group {name!r}: sticky {holders} holds it")
                held.add(name)
            for item in group:
                if self.timed.cooldown_until(item) is not None:
                    remove(item, f"inclusion group {name!r}: on cooldown")
                elif self.timed.is_delayed(item):
                    remove(item, f"inclusion group {name!r}: delayed")
        for name in names:
            group = grouped[name]
            scoring = self.settings.use_group_scoring
            if name in held or not (scoring or any(item.entry.use_group_scoring for item in group)):
                continue
            scores = [self._score(item) for item in group]
            best = max(scores)
            kept = []
            for item, score in zip(group, scores, strict=True):
                scored = item.entry.use_group_scoring
                if (scored if scored is not None else scoring) and score < best:
                    remove(item, f"inclusion group {name!r}: score {score}, the best is {best}")
                else:
                    kept.append(item)
            grouped[name] = kept
        activated = [activation.entry.group for activation in self.activated.values()]
        for name in names:
            group = grouped[name]
            if name in held:
                continue
            if name in activated:
                owner = next(a.id for a in self.activated.values() if a.entry.group == name)
                for item in group:
                    remove(item, f"inclusion group {name!r} already has {owner!r}")
                continue
            if len(group) <= 1:
                continue
            first = [item for item in group if item.entry.group_override]
            winner: Item | None
            if first:
                first.sort(key=lambda item: -item.entry.order)
                winner = first[0]
                note = f"prioritized, order {winner.entry.order}"
            else:
                total = sum(item.entry.group_weight for item in group)
                roll = self.rng.random() * total
                reached = 0.0
                winner = None
                for item in group:
                    reached += item.entry.group_weight
                    if roll <= reached:
                        winner = item
                        break
                if winner is None:
                    continue
                note = f"roll {roll:.1f} of {total:g}"
            for item in group:
                if item is not winner:
                    remove(item, f"inclusion group {name!r}: {winner.id!r} won ({note})")
            notes.setdefault(winner.index, []).append(f"won inclusion group {name!r} ({note})")
        return notes

    def _score(self, item: Item) -> int:
        """SillyTavern's ``getScore``: keys as written (no macros, no trimming) that match."""
        entry = item.entry
        if not entry.keys:
            return 0
        hay = self.current[item.where]
        primary, secondary = self._keys(item)
        pairs = zip(entry.keys, primary, strict=True)
        found = sum(self._raw_hit(raw, key, item, hay) for raw, key in pairs)
        if not entry.secondary_keys:
            return found
        pairs = zip(entry.secondary_keys, secondary, strict=True)
        extra = sum(self._raw_hit(raw, key, item, hay) for raw, key in pairs)
        if entry.selective_logic == SelectiveLogic.AND_ANY:
            return found + extra
        if entry.selective_logic == SelectiveLogic.AND_ALL:
            return found + extra if extra == len(entry.secondary_keys) else found
        return found

    def _raw_hit(self, raw: str, key: Key, item: Item, hay: Haystack) -> bool:
        if raw == key.text and key.kind in (PLAIN, REGEX):
            return self._hit(key, item, hay)
        return st_match_key(hay.text, raw, *item.mode)

    # -- probability and budget -----------------------------------------------------------

    def _admit(
        self,
        new: list[Item],
        why: dict[int, Decided],
        notes: dict[int, list[str]],
        loop: int,
    ) -> None:
        """Probability rolls and the budget, in order (SillyTavern 1.15: an overflow skips
        the rest, but entries that ignore the budget still get in)."""
        before: int | None = None
        content_so_far = ""
        for item in new:
            entry = item.entry
            if self.overflowed and not entry.ignore_budget:
                reason = f"budget: {self.spent} tokens spent of {self.budget}"
                self._skip(item, "budget", reason)
                continue
            probability = entry.probability
            if entry.use_probability and probability != 100 and not self._sticky(item):
                roll = self.rng.random() * 100
                if not roll <= (probability or 0):
                    self.failed.add(item.index)
                    shown = f"{probability:g}" if probability is not None else "unset (0)"
                    self._skip(item, "probability", f"probability {shown}: rolled {roll:.1f}")
                    continue
            content = substitute_macros(item.content, self.char, self.user)
            self.contents[item.index] = content
            content_so_far += content + "\n"
            if not entry.ignore_budget:
                if before is None:
                    before = self.count(self.all_text)
                spent = before + self.count(content_so_far)
                if spent >= self.budget:
                    if not self.overflowed:
                        self.overflowed, self.spent = True, spent
                    self._skip(item, "budget", f"budget: {spent} tokens spent of {self.budget}")
                    continue
            decided = why[item.index]
            reason = decided.reason
            extra = notes.get(item.index)
            if extra:
                reason = "; ".join([reason, *extra])
            self.activated[item.index] = Activation(
                item.id,
                item.book,
                entry,
                reason,
                loop,
                content,
                decided.key,
                decided.via,
                decided.similarity,
            )


def _label(label: Label) -> str:
    kind, value = label
    if kind == "message":
        return f"message {value}" if value is not None else "the empty chat"
    if kind == "field":
        return _FIELD_NAMES[value]
    return f"recursion from {value!r}"


def _show(key: Key, prefix: str = "") -> str:
    if key.kind == REGEX:
        return f"{'regex ' if prefix else ''}{key.text}"
    return f"{prefix}{key.text!r}"
