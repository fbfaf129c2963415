"""SillyTavern's World Info activation: which lorebook entries a turn's prompt gets.

A compatible port of ``checkWorldInfo`` (SillyTavern 1.15, public/scripts/world-info.js):
keys matched in the newest messages (plain or ``/regex/flags``, case and whole-word
rules, secondary keys with their logic), constants, recursion through activated
entries' contents, timed effects (sticky, cooldown, delay), inclusion groups,
probability, the token budget, min activations. ``docs/worldinfo.md`` states the rules
in numbered sections; the test suite checks each of them and cites its section.

:class:`WorldInfo` compiles the keys of every entry of a set of books once (all plain
keys of one matching mode into one matcher, so a scan finds every key of a text in
one pass, and remembers what it found in a text for the next turns);
:meth:`WorldInfo.scan` runs one activation and says why each entry fired, and why
the notable others did not. Regex keys run with a bound on each match and on the
scan's total (:class:`._jsregex.RegexClock`): a key that backtracks catastrophically is
skipped for the scan and named in the misses instead of stalling the turn.

Clotho's additions: entries found by meaning (``similar``, the vector hits) activate as
SillyTavern's externally activated entries do, still subject to the checks before that
point, but only when nothing else fires them (constant, sticky, their keys keep their
reason and leave the places for meaning, ``similar_slots``, to the next nearest); a
``held_back`` callback (the world-state condition) can veto an entry right after its
character filter.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._compile import substitute_macros
from ._scan import VIA, Activation, Scan, ScanResult, Similar, Skip
from ._world import CompiledWorld, ScanSettings
from .errors import LorebookError
from .lorebook import Entry

__all__ = [
    "TRIGGERS",
    "VIA",
    "Activation",
    "ScanResult",
    "ScanSettings",
    "Similar",
    "Skip",
    "WorldInfo",
    "substitute_macros",
]

TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")
"""SillyTavern's generation types (an entry's ``triggers`` lists some of them)."""


class WorldInfo(CompiledWorld):
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
        similar: Sequence[Similar] = (),
        similar_slots: int | None = None,
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
            similar: the entries found by meaning, nearest first. One that nothing else
                fires comes in by meaning; one not marked ``vectorized`` still needs its
                secondary keys.
            similar_slots: at most this many entries come in by meaning (``None``: as
                many as ``similar`` holds); entries that fire anyway take none.
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
            similar=similar,
            similar_slots=len(similar) if similar_slots is None else similar_slots,
            held_back=held_back,
        ).run()
