"""SillyTavern's World Info activation: which lorebook entries a turn's prompt gets.

A compatible port of ``checkWorldInfo`` (SillyTavern 1.15, public/scripts/world-info.js):
keys matched in the newest messages (plain or ``/regex/flags``, case and whole-word
rules, secondary keys with their logic), constants, recursion through activated
entries' contents, timed effects (sticky, cooldown, delay), inclusion groups,
probability, the token budget, min activations. ``shared/notes/sillytavern.md``
section 1 states the rules; the test suite checks each of them.

:class:`WorldInfo` compiles the keys of every entry of a set of books once (all plain
keys of one matching mode into one matcher, so a scan finds every key of a text in
one pass, and remembers what it found in a text for the next turns);
:meth:`WorldInfo.scan` runs one activation and says why each entry fired, and why
the notable others did not. Regex keys run with a bound on each match and on the
scan's total (:class:`._jsregex.RegexClock`): a key that backtracks catastrophically is
skipped for the scan and named in the misses instead of stalling the turn.

Clotho's additions: ``forced`` entries (vector hits) activate where SillyTavern's
externally activated entries do, still subject to the checks before that point; a
``held_back`` callback (the world-state condition) can veto an entry right after its
character filter.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ._compile import (
    Item,
    Layer,
    js_order,
    key_index,
    make_item,
    resolve,
    substitute_macros,
)
from ._jsregex import RegexKey
from ._scan import Activation, Scan, ScanResult, Skip
from .errors import LorebookError
from .lorebook import Entry, Lorebook

__all__ = [
    "TRIGGERS",
    "Activation",
    "ScanResult",
    "ScanSettings",
    "Skip",
    "WorldInfo",
    "substitute_macros",
]

TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")
"""SillyTavern's generation types (an entry's ``triggers`` lists some of them)."""
MAX_SCAN_DEPTH = 1000


@dataclass(frozen=True)
class ScanSettings:
    """World Info's global settings; the defaults are those of a new SillyTavern install.

    Raises:
        LorebookError: a value of the wrong type or out of range (named).
    """

    scan_depth: int = 2
    """How many of the newest messages are scanned (an entry's ``scan_depth`` overrides)."""
    budget_percent: float = 25
    """The lore budget, in percent of the context window."""
    budget_cap: int = 0
    """The budget never exceeds this many tokens (0: no cap)."""
    include_names: bool = True
    """Messages are scanned as ``name: text``."""
    recursive: bool = True
    """Activated entries' contents are scanned for more keys."""
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    min_activations: int = 0
    """Scan ever older messages until this many entries are active (0: off)."""
    min_activations_depth_max: int = 0
    """... but never deeper than this many messages (0: the whole chat)."""
    max_recursion_steps: int = 0
    """At most this many scan loops (0: unlimited)."""

    def __post_init__(self) -> None:
        for item in fields(self):
            _check_type(item.name, getattr(self, item.name), str(item.type))
        _check_range("scan_depth", self.scan_depth, 0, MAX_SCAN_DEPTH)
        if not 0 < self.budget_percent <= 100:
            raise LorebookError(
                f"budget_percent: expected more than 0 and at most 100, got {self.budget_percent!r}"
            )
        for name in ("budget_cap", "min_activations", "min_activations_depth_max"):
            _check_range(name, getattr(self, name), 0, None)
        _check_range("max_recursion_steps", self.max_recursion_steps, 0, None)
        if self.min_activations and self.max_recursion_steps:
            raise LorebookError(
                "min_activations and max_recursion_steps exclude each other "
                "(SillyTavern resets one when the other is set)"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ScanSettings:
        """Settings from a mapping (a campaign's ``[lore]`` table); missing keys
        keep their defaults.

        Raises:
            LorebookError: not a mapping, an unknown key, or a value of the wrong type
                or out of range; the message names it.
        """
        if not isinstance(data, Mapping):
            raise LorebookError(f"expected a table of settings, got {data!r}")
        known = [item.name for item in fields(cls)]
        for key in data:
            if key not in known:
                raise LorebookError(f"{key}: unknown setting (known: {', '.join(known)})")
        return cls(**dict(data))

    def budget(self, context_window: int) -> int:
        """The lore budget in tokens for a context window, as SillyTavern computes it
        (``round(percent * window / 100) || 1``, then the cap)."""
        budget = math.floor(self.budget_percent * context_window / 100 + 0.5) or 1
        if self.budget_cap > 0 and budget > self.budget_cap:
            budget = self.budget_cap
        return budget


def _check_type(name: str, value: Any, kind: str) -> None:
    if kind == "bool":
        ok, wanted = isinstance(value, bool), "true or false"
    elif kind == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok, wanted = ok and math.isfinite(value), "a number"
    else:
        ok, wanted = isinstance(value, int) and not isinstance(value, bool), "an integer"
    if not ok:
        raise LorebookError(f"{name}: expected {wanted}, got {value!r}")


def _check_range(name: str, value: int, low: int, high: int | None) -> None:
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise LorebookError(f"{name}: expected {bound}, got {value!r}")


class Variant:
    """The keys with ``{{char}}``/``{{user}}`` of every entry, for one (char, user) pair."""

    def __init__(self, world: WorldInfo, char: str, user: str) -> None:
        self.layer = Layer(world.static.offset + world.static.size)
        self.keys: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        self.problems: dict[int, tuple[str, ...]] = {}
        """Entry index -> its keys in regex form that do not compile."""
        for item in world.dynamic_items:
            found: list[str] = []

            def compiled(raws: list[str], item: Item = item, found: list[str] = found) -> Any:
                return tuple(
                    resolve(self.layer, substitute_macros(raw, char, user), item.mode, found)
                    for raw in raws
                )

            self.keys[item.index] = (compiled(item.entry.keys), compiled(item.entry.secondary_keys))
            if found:
                self.problems[item.index] = tuple(found)
        self.layer.freeze()
        self.index, self.always = key_index(
            (world.items[index], keys) for index, (keys, _) in self.keys.items()
        )


class WorldInfo:
    """The lorebooks of a session, compiled for scanning.

    Entries are ordered as SillyTavern's "evenly" strategy orders them: by ``order``,
    higher first; ties by book, then by uid (the order JavaScript gives a book's
    entries). An entry's id is ``book:uid``. Keys with ``{{char}}``/``{{user}}`` are
    compiled at the first scan with a given (char, user) pair, and kept. What a scan
    finds in a text (a message, an entry's content) is remembered for the next scans,
    so a turn mostly pays for its new messages. One scan at a time: the caches are not
    locked.

    Args:
        books: the lorebooks (names unique).
        settings: the global settings (SillyTavern's defaults if omitted).

    Raises:
        LorebookError: two books share a name.
    """

    def __init__(self, books: Sequence[Lorebook], settings: ScanSettings | None = None) -> None:
        self.books = tuple(books)
        self.settings = settings or ScanSettings()
        names = [book.name for book in self.books]
        for name in names:
            if names.count(name) > 1:
                raise LorebookError(f"two lorebooks are named {name!r}")
        ordered = [(book, entry) for book in self.books for entry in js_order(book)]
        ordered.sort(key=lambda pair: -pair[1].order)
        case, whole = self.settings.case_sensitive, self.settings.match_whole_words
        self.items: tuple[Item, ...] = tuple(
            make_item(index, book, entry, case, whole)
            for index, (book, entry) in enumerate(ordered)
        )
        self.by_id = {item.id: item for item in self.items}
        problems: list[str] = []
        self.static = Layer(0)
        self.dynamic_items = [item for item in self.items if item.dynamic]
        for item in self.items:
            if item.dynamic:
                continue
            found: list[str] = []
            item.keys = tuple(
                resolve(self.static, raw, item.mode, found) for raw in item.entry.keys
            )
            item.secondary = tuple(
                resolve(self.static, raw, item.mode, found) for raw in item.entry.secondary_keys
            )
            item.problems = tuple(found)
            problems.extend(f"{item.id}: {problem}" for problem in found)
        self.static.freeze()
        self.index, self.always = key_index(
            (item, item.keys) for item in self.items if not item.dynamic
        )
        self.problems: tuple[str, ...] = tuple(problems)
        """Keys in regex form that do not compile (matched as plain text, as SillyTavern
        does), each named ``book:uid: regex /.../ does not compile (why)``."""
        enabled = [item for item in self.items if not item.entry.disable]
        self.wheres = sorted({item.where for item in enabled}, key=repr)
        """The kinds of haystack the enabled entries scan."""
        self.by_hash = {item.hash: item for item in self.items if item.hash is not None}
        self.delayed = [item for item in self.items if item.delay]
        self.delay_levels = sorted({item.delay_level for item in self.items if item.delay_level})
        self._variants: dict[tuple[str, str], Variant] = {}
        self.problem_items = [item for item in enabled if item.problems]
        self.regex_cache: dict[tuple[RegexKey, str], bool] = {}
        """(regex key, text) -> whether it matches, kept across scans."""

    def variant(self, char: str, user: str) -> Variant | None:
        """The compiled keys with macros for this character and user (cached)."""
        if not self.dynamic_items:
            return None
        found = self._variants.get((char, user))
        if found is None:
            if len(self._variants) >= 16:
                del self._variants[next(iter(self._variants))]
            found = self._variants[(char, user)] = Variant(self, char, user)
        return found

    def entry(self, id: str) -> Entry:
        """The entry with this id (``book:uid``).

        Raises:
            KeyError: no such entry.
        """
        return self.by_id[id].entry

    def scan(
        self,
        *,
        messages: Sequence[tuple[str, str]],
        chat_length: int,
        trigger: str = "normal",
        char: str = "",
        user: str = "",
        character: Mapping[str, str] | None = None,
        character_tags: Sequence[str] = (),
        budget_tokens: int,
        count_tokens: Callable[[str], int],
        timers: Mapping[str, Any] | None = None,
        rng: random.Random | None = None,
        forced: Mapping[str, str] | None = None,
        held_back: Callable[[str, Entry], str | None] | None = None,
    ) -> ScanResult:
        """One World Info activation for a turn.

        Args:
            messages: (speaker name, text), oldest first: the enabled messages of the
                path, with the player's new message if there is one. Reasons name a
                message by its index here (``message 0`` is the oldest).
            chat_length: SillyTavern's ``chat.length`` (the number of messages the
                scan sees), for timed effects, ``delay`` and min activations.
            trigger: the generation type (normal, continue, impersonate, swipe,
                regenerate, quiet), for entries' ``triggers``.
            char: the character's name (``{{char}}``); ``characterFilter.names`` is
                compared with ``character["file_name"]`` if given, else with it.
            user: the player's name (``{{user}}``).
            character: the texts entries may also scan (``persona``, ``description``,
                ``personality``, ``depth_prompt``, ``scenario``, ``creator_notes``).
            character_tags: the character's tags, for ``characterFilter.tags``
                (none: tag filters are not applied, as for an untagged character).
            budget_tokens: the lore budget (:meth:`ScanSettings.budget`).
            count_tokens: counts the tokens of a text.
            timers: the timed-effects state stored on the previous node.
            rng: draws probability and inclusion-group rolls (seed it to replay a turn).
            forced: entry id -> reason, for entries activated from outside (vector hits).
            held_back: (entry id, entry) -> a reason when the entry must not fire.

        Raises:
            LorebookError: an unknown trigger.
        """
        if trigger not in TRIGGERS:
            raise LorebookError(f"unknown trigger {trigger!r} (known: {', '.join(TRIGGERS)})")
        return Scan(
            self,
            messages=messages,
            chat_length=chat_length,
            trigger=trigger,
            char=char,
            user=user,
            character=character or {},
            character_tags=character_tags,
            budget=budget_tokens,
            count_tokens=count_tokens,
            timers=timers or {},
            rng=rng if rng is not None else random.Random(),
            forced=forced or {},
            held_back=held_back,
        ).run()
