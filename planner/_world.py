"""The compiled lorebooks a World Info scan reads (see :mod:`planner.worldinfo`).

:class:`CompiledWorld` holds what is compiled once for a set of books: the entries in
scan order, their plain keys in one matcher per mode, the keys with ``{{char}}`` /
``{{user}}`` per (char, user) pair (:class:`Variant`), and the caches kept across
scans. :class:`planner.worldinfo.WorldInfo` is a CompiledWorld that runs scans; a
scan (:mod:`planner._scan`) reads one, so it lives apart from both to keep the
imports one way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from mnemosyne.jsontext import preview
from mnemosyne.validation import problem_line

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
from .errors import LorebookError
from .lorebook import Lorebook

__all__ = ["CompiledWorld", "ScanSettings", "Variant"]

MAX_SCAN_DEPTH = 1000


class ScanSettings(BaseModel):
    """World Info's global settings; the defaults are those of a new SillyTavern install
    (``default/content/settings.json``). Constructed with a value of the wrong type or
    out of range, it raises pydantic's ``ValidationError``; :meth:`from_mapping` raises
    a :class:`LorebookError` naming the setting."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    scan_depth: int = Field(2, ge=0, le=MAX_SCAN_DEPTH)
    """How many of the newest messages are scanned (an entry's ``scan_depth`` overrides)."""
    budget_percent: float = Field(25, gt=0, le=100, allow_inf_nan=False)
    """The lore budget, in percent of the context window."""
    budget_cap: int = Field(0, ge=0)
    """The budget never exceeds this many tokens (0: no cap)."""
    include_names: bool = True
    """Messages are scanned as ``name: text``."""
    recursive: bool = True
    """Activated entries' contents are scanned for more keys."""
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    min_activations: int = Field(0, ge=0)
    """Scan ever older messages until this many entries are active (0: off)."""
    min_activations_depth_max: int = Field(0, ge=0)
    """... but never deeper than this many messages (0: the whole chat)."""
    max_recursion_steps: int = Field(0, ge=0)
    """At most this many scan loops (0: unlimited)."""

    @model_validator(mode="after")
    def _one_of_min_activations_and_recursion_steps(self) -> ScanSettings:
        if self.min_activations and self.max_recursion_steps:
            raise ValueError(
                "min_activations and max_recursion_steps exclude each other "
                "(SillyTavern resets one when the other is set)"
            )
        return self

    @classmethod
    def from_mapping(cls, data: Any) -> ScanSettings:
        """Settings from a mapping (a campaign's ``[lore]`` table); missing keys
        keep their defaults.

        Raises:
            LorebookError: not a mapping, an unknown key, or a value of the wrong type
                or out of range; the message names it.
        """
        if not isinstance(data, Mapping):
            raise LorebookError(f"expected a table of settings, got {preview(data)}")
        try:
            return cls.model_validate(dict(data))
        except ValidationError as error:
            raise LorebookError(problem_line(error, model=cls)) from None

    def budget(self, context_window: int) -> int:
        """The lore budget in tokens for a context window, as SillyTavern computes it
        (``round(percent * window / 100) || 1``, then the cap)."""
        budget = math.floor(self.budget_percent * context_window / 100 + 0.5) or 1
        if self.budget_cap > 0 and budget > self.budget_cap:
            budget = self.budget_cap
        return budget


class Variant:
    """The keys with ``{{char}}``/``{{user}}`` of every entry, for one (char, user) pair."""

    def __init__(self, world: CompiledWorld, char: str, user: str) -> None:
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


class CompiledWorld:
    """The lorebooks of a session, compiled for scanning (see
    :class:`planner.worldinfo.WorldInfo`, which adds the scan)."""

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
