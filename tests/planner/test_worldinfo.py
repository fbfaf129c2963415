"""World Info activation, rule by rule, against SillyTavern's ``checkWorldInfo``.

Each test names the rule it checks and cites its section of ``docs/worldinfo.md``
(§1.1 what is scanned, §1.2 haystack, §1.3 key matching, §1.4 the scan loop, §1.5
recursion, §1.6 order, §1.7 timed effects, §1.8 settings; "check N" is rule N of §1.4);
where SillyTavern's source and its docs differ, the source (world-info.js, 1.15) is what
is checked, and the docstring says so.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner._jsregex import parse_regex_key
from planner._keys import Matcher, st_match_key
from planner.errors import LorebookError
from planner.lorebook import Lorebook, load_world_info, parse_world_info
from planner.worldinfo import ScanResult, ScanSettings, Similar, WorldInfo
from tests._fixtures import ELDORIA

BIG = 1_000_000


def make_book(*entries: dict[str, Any], name: str = "Lore") -> Lorebook:
    """A book whose entries get uids 0, 1, 2... and a content naming them."""
    document: dict[str, Any] = {"entries": {}}
    for uid, fields in enumerate(entries):
        entry = {"uid": uid, "key": [], "content": f"content {uid}", **fields}
        document["entries"][str(entry["uid"])] = entry
    return parse_world_info(document, name)


def run(
    source: WorldInfo | Sequence[dict[str, Any]],
    messages: Sequence[str | tuple[str, str]],
    *,
    scan: ScanSettings | None = None,
    **options: Any,
) -> ScanResult:
    """One scan with sensible defaults: plain strings are the player's messages."""
    world = source if isinstance(source, WorldInfo) else WorldInfo([make_book(*source)], scan)
    chat = [m if isinstance(m, tuple) else ("Player", m) for m in messages]
    arguments: dict[str, Any] = {
        "messages": chat,
        "chat_length": len(chat),
        "char": "Seraphina",
        "user": "Alice",
        "budget_tokens": BIG,
        "count_tokens": len,
        "rng": random.Random(0),
    }
    arguments.update(options)
    return world.scan(**arguments)


def ids(result: ScanResult) -> list[str]:
    return [activation.id for activation in result.activated]


def reasons(result: ScanResult) -> dict[str, str]:
    return {activation.id: activation.reason for activation in result.activated}


def skips(result: ScanResult) -> dict[str, tuple[str, str]]:
    return {skip.id: (skip.kind, skip.reason) for skip in result.skipped}


@pytest.fixture
def eldoria() -> Lorebook:
    return load_world_info(ELDORIA.read_bytes(), "Eldoria")  # missing: fails, never skips


# -- §1.8 settings --------------------------------------------------------------------------


def test_settings_default_to_a_new_sillytavern_install() -> None:
    """§1.8: default/content/settings.json: depth 2, 25 %, whole words and recursion on."""
    assert ScanSettings() == ScanSettings(
        scan_depth=2,
        budget_percent=25,
        budget_cap=0,
        include_names=True,
        recursive=True,
        case_sensitive=False,
        match_whole_words=True,
        use_group_scoring=False,
        min_activations=0,
        min_activations_depth_max=0,
        max_recursion_steps=0,
    )


def test_settings_from_a_campaign_table_keep_defaults_for_missing_keys() -> None:
    """§1.8: every global setting can be set per campaign; the rest keep their defaults."""
    chosen = ScanSettings.from_mapping({"scan_depth": 6, "budget_percent": 12.5})
    assert (chosen.scan_depth, chosen.budget_percent, chosen.recursive) == (6, 12.5, True)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"depth": 3}, "depth: unknown key (known: scan_depth, budget_percent,"),
        ({"scan_dept": 3}, "scan_dept: unknown key (did you mean 'scan_depth'?)"),
        ({"scan_depth": "4"}, "scan_depth: Input should be a valid integer (got '4')"),
        ({"scan_depth": True}, "scan_depth: Input should be a valid integer (got True)"),
        ({"recursive": 1}, "recursive: Input should be a valid boolean (got 1)"),
        ({"budget_percent": "25%"}, "budget_percent: Input should be a valid number"),
        ({"budget_percent": 0}, "budget_percent: Input should be greater than 0"),
        ({"budget_percent": float("inf")}, "budget_percent: Input should be a finite number"),
        ({"scan_depth": 1001}, "scan_depth: Input should be less than or equal to 1000 (got 1001)"),
        ({"budget_cap": -1}, "budget_cap: Input should be greater than or equal to 0 (got -1)"),
        ({"min_activations": 2, "max_recursion_steps": 3}, "(top): min_activations and max_recurs"),
    ],
)
def test_settings_errors_name_the_setting(table: dict[str, Any], message: str) -> None:
    """§1.8: a campaign's TOML gets a clear error for an unknown key or a wrong value."""
    with pytest.raises(LorebookError, match="^" + re.escape(message)):
        ScanSettings.from_mapping(table)


def test_budget_is_a_rounded_percent_of_the_context_at_least_one_and_capped() -> None:
    """§1.4: budget = round(percent * maxContext / 100) || 1, then the cap if set."""
    assert ScanSettings().budget(8192) == 2048
    assert ScanSettings(budget_percent=25).budget(10) == 3  # 2.5 rounds up, as Math.round
    assert ScanSettings(budget_percent=1).budget(10) == 1  # 0.1 -> 0 -> || 1
    assert ScanSettings(budget_cap=500).budget(8192) == 500
    assert ScanSettings(budget_cap=5000).budget(8192) == 2048


# -- §1.3 key matching ----------------------------------------------------------------------


def test_plain_keys_ignore_case_by_default() -> None:
    """§1.3: case-insensitive unless the entry or the campaign says otherwise."""
    assert ids(run([{"key": ["Dragon"]}], ["a DRAGON sleeps"])) == ["Lore:0"]


def test_entry_case_sensitivity_overrides_the_global_setting() -> None:
    """§1.3: entry.caseSensitive ?? world_info_case_sensitive."""
    entries = [{"key": ["Dragon"], "caseSensitive": True}, {"key": ["Dragon"]}]
    assert ids(run(entries, ["a dragon sleeps"])) == ["Lore:1"]
    strict = ScanSettings(case_sensitive=True)
    assert ids(run([{"key": ["Dragon"], "caseSensitive": False}], ["a dragon"], scan=strict))


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("the dragon sleeps", True),
        ("Dragon!", True),
        ("the dragon's hoard", True),
        ("dragon_lord", False),
        ("two dragons", False),
        ("snapdragon", False),
        ("dragon2", False),
    ],
)
def test_whole_word_single_key_needs_non_word_characters_around_it(text: str, fires: bool) -> None:
    """§1.3: one-word keys match ``(?:^|\\W)key(?:$|\\W)`` with whole words on (default)."""
    assert bool(ids(run([{"key": ["dragon"]}], [text]))) is fires


def test_whole_word_boundaries_are_ascii_so_accented_letters_count_as_boundaries() -> None:
    """§1.3: ``\\W`` is JavaScript's ASCII class: 'caf' stands alone in 'café'."""
    assert ids(run([{"key": ["caf"]}], ["a café"])) == ["Lore:0"]
    assert ids(run([{"key": ["東京"]}], ["東京に行く"])) == ["Lore:0"]
    assert ids(run([{"key": ["東京"]}], ["é東京"])) == ["Lore:0"]
    assert not ids(run([{"key": ["東京"]}], ["x東京"]))


def test_whole_word_multiword_key_is_a_plain_substring() -> None:
    """§1.3: a key of several words is matched with includes(): no boundary check."""
    assert ids(run([{"key": ["red dragon"]}], ["the bored dragons"])) == ["Lore:0"]
    assert not ids(run([{"key": ["red dragon"]}], ["a red  dragon"]))


def test_without_whole_words_every_key_is_a_substring() -> None:
    """§1.3: with whole words off (entry or campaign), plain keys are includes()."""
    loose = [{"key": ["dragon"], "matchWholeWords": False}]
    assert ids(run(loose, ["snapdragons"])) == ["Lore:0"]
    assert ids(run([{"key": ["ragon"]}], ["dragons"], scan=ScanSettings(match_whole_words=False)))


def test_keys_with_punctuation_keep_sillytavern_boundaries() -> None:
    """§1.3: the key is escaped and must stand between non-word characters at its ends."""
    entries = [{"key": ["o'brien"]}, {"key": ["dr."]}, {"key": ["c++"]}]
    assert ids(run(entries, ["O'Brien and Dr. Who use C++"])) == ["Lore:2", "Lore:1", "Lore:0"]
    assert not ids(run(entries, ["do'brien dr.x xc++"]))


def test_keys_are_trimmed_and_an_empty_key_never_matches() -> None:
    """§1.3: substituteParams(key).trim(); an empty key is falsy and never matches."""
    assert ids(run([{"key": ["  dragon  "]}], ["a dragon"])) == ["Lore:0"]
    assert not ids(run([{"key": [""]}], ["anything"]))


def test_a_blank_key_matches_any_text_as_in_sillytavern() -> None:
    """§1.3 (source): ' ' is truthy, trims to '', and matchKeys(text, '') is true."""
    result = run([{"key": [" "]}], ["anything"])
    assert reasons(result) == {"Lore:0": "blank key ' ' (SillyTavern matches it in any text)"}


def test_macros_in_keys_are_replaced_for_each_character_and_user() -> None:
    """§1.3: substituteParams replaces {{char}} and {{user}} before matching."""
    world = WorldInfo([make_book({"key": ["{{char}}"]}, {"key": ["<USER>"]})])
    assert ids(run(world, ["Seraphina waves at Alice"])) == ["Lore:1", "Lore:0"]
    assert ids(run(world, ["Seraphina waves at Alice"], char="Bob", user="Eve")) == []
    assert ids(run(world, ["Bob waves"], char="Bob")) == ["Lore:0"]
    assert len(world._variants) == 3  # compiled once per (char, user) pair


def test_regex_keys_ignore_the_case_and_whole_word_settings() -> None:
    """§1.3: a /regex/ key is tested on the raw haystack; only its own flags count."""
    assert not ids(run([{"key": ["/Dragon/"]}], ["a dragon"]))
    assert ids(run([{"key": ["/Dragon/"]}], ["a Dragon"])) == ["Lore:0"]
    result = run([{"key": ["/dra(g|k)on/i"]}], ["old DRAKONS"])
    assert reasons(result) == {"Lore:0": "regex /dra(g|k)on/i in message 0"}


def test_a_key_with_an_unescaped_slash_inside_is_plain_text() -> None:
    """§1.3: the pattern must not contain an unescaped '/': '/a/b/' is no regex."""
    assert ids(run([{"key": ["/a/b/"]}], ["path /a/b/ here"])) == ["Lore:0"]
    assert ids(run([{"key": ["/a\\/b/"]}], ["path a/b here"])) == ["Lore:0"]


def test_a_regex_that_does_not_compile_is_reported_and_matched_as_text() -> None:
    """§1.3: new RegExp throws, parseRegexFromString returns null: the key is plain text."""
    world = WorldInfo([make_book({"key": ["/dra(gon/"]})])
    assert world.problems == (
        "Lore:0: regex /dra(gon/ does not compile (missing ), unterminated group); "
        "matched as plain text",
    )
    missed = run(world, ["a dragon"])
    assert skips(missed) == {
        "Lore:0": (
            "regex",
            "regex /dra(gon/ does not compile (missing ), unterminated group); "
            "matched as plain text",
        )
    }
    assert ids(run(world, ["type /dra(gon/ here"])) == ["Lore:0"]


def test_a_regex_can_match_the_message_marker_as_in_the_docs() -> None:
    """§1.3: '\\x01' starts each message: /\\x01{{user}}:[^\\x01]*?hello/ (docs example)."""
    entries = [{"key": ["/\\x01{{user}}:[^\\x01]*?hello/"]}]
    said = run(entries, [("Alice", "well, hello"), ("Bob", "hi")])
    assert ids(said) == ["Lore:0"]
    assert not ids(run(entries, [("Alice", "hi"), ("Bob", "hello")]))


def test_regex_keys_keep_javascript_semantics() -> None:
    """§1.3: JavaScript's ASCII \\b and \\w, '$' at the very end, [^] for any character."""
    assert not ids(run([{"key": ["/\\bcafé\\b/"]}], ["un café noir"]))
    assert ids(run([{"key": ["/\\bcaf/"]}], ["un café noir"]))
    late = {"key": ["/night$/"], "matchScenario": True}
    assert not ids(run([late], ["x"], character={"scenario": "a long night\n"}))
    assert ids(run([late], ["x"], character={"scenario": "a long night"}))
    assert ids(run([{"key": ["/a[^]b/"]}], ["a\nb"]))
    assert ids(run([{"key": ["/(?<w>ha)\\k<w>/"]}], ["hahaha"]))


def test_regex_flags_are_javascript_flags() -> None:
    """§1.3: flags [gimsuy]: i ignores case, s lets '.' match newlines, m makes ^/$ per
    line, y anchors at the start of the haystack, g changes nothing for test()."""
    chat = ["Dragon\nrider", "a dragon"]
    assert ids(run([{"key": ["/dragon/g"]}], chat))
    assert not ids(run([{"key": ["/DRAGON/"]}], chat))
    assert ids(run([{"key": ["/DRAGON/i"]}], chat))
    assert not ids(run([{"key": ["/Dragon.rider/"]}], chat))
    assert ids(run([{"key": ["/Dragon.rider/s"]}], chat))
    assert not ids(run([{"key": ["/^\\x01Player: Dragon/"]}], chat))
    assert ids(run([{"key": ["/^\\x01Player: Dragon/m"]}], chat))
    assert ids(run([{"key": ["/\\x01Player: a/y"]}], chat))
    assert not ids(run([{"key": ["/Player: a/y"]}], chat))


# -- §1.2 the haystack ----------------------------------------------------------------------


def test_scan_depth_counts_messages_from_the_newest() -> None:
    """§1.2: depth N scans the N newest messages (default 2)."""
    chat = ["a dragon", "nothing", "still nothing"]
    assert not ids(run([{"key": ["dragon"]}], chat))
    result = run([{"key": ["dragon"]}], chat, scan=ScanSettings(scan_depth=3))
    assert reasons(result) == {"Lore:0": "key 'dragon' in message 0"}


def test_entry_scan_depth_overrides_the_global_depth() -> None:
    """§1.2: entry.scanDepth replaces (is not added to) the global depth."""
    chat = ["a dragon", "nothing", "still nothing"]
    entries = [{"key": ["dragon"], "scanDepth": 3}, {"key": ["dragon"], "scanDepth": 1}]
    assert ids(run(entries, chat, scan=ScanSettings(scan_depth=5))) == ["Lore:0"]


def test_scan_depth_zero_scans_nothing_not_even_recursion() -> None:
    """§1.2/§1.5: get() returns '' for depth <= 0, so no key (even recursed) can match."""
    entries = [
        {"key": ["dragon"], "content": "the glade burns"},
        {"key": ["glade"], "scanDepth": 0},
        {"key": ["glade"]},
    ]
    assert ids(run(entries, ["dragon at the glade"])) == ["Lore:2", "Lore:0"]


def test_messages_are_scanned_as_name_colon_text_when_names_are_included() -> None:
    """§1.1: include_names scans `${name}: ${mes}` (default on)."""
    assert ids(run([{"key": ["Alice"]}], [("Alice", "hello")])) == ["Lore:0"]
    off = ScanSettings(include_names=False)
    assert not ids(run([{"key": ["Alice"]}], [("Alice", "hello")], scan=off))


def test_match_flags_add_the_character_texts_to_the_haystack() -> None:
    """§1.1: 1.15's global scan data: a text is scanned only by entries that ask for it."""
    entries = [{"key": ["storm"], "matchScenario": True}, {"key": ["storm"]}]
    result = run(entries, ["calm"], character={"scenario": "a storm rises"})
    assert reasons(result) == {"Lore:0": "key 'storm' in the scenario"}
    persona = [{"key": ["knight"], "matchPersonaDescription": True}]
    assert ids(run(persona, ["calm"], character={"persona": "a knight"})) == ["Lore:0"]


# -- §1.4 the scan loop ---------------------------------------------------------------------


def test_disabled_entries_never_fire() -> None:
    """§1.4 check 2: disable."""
    assert not ids(
        run([{"key": ["dragon"], "disable": True}, {"constant": True, "disable": True}], ["dragon"])
    )


def test_triggers_limit_an_entry_to_some_generation_types() -> None:
    """§1.4 check 3 (1.15): triggers non-empty and the generation type not in it."""
    entries = [{"key": ["dragon"], "triggers": ["continue"]}]
    normal = run(entries, ["dragon"])
    assert skips(normal) == {"Lore:0": ("triggers", "triggers: fires on continue, not on 'normal'")}
    assert ids(run(entries, ["dragon"], trigger="continue")) == ["Lore:0"]
    with pytest.raises(LorebookError, match="unknown trigger 'retry'"):
        run(entries, ["dragon"], trigger="retry")


def test_character_filter_names_include_or_exclude_the_character() -> None:
    """§1.4 check 4: characterFilter.names against the character (its file name)."""
    only = [{"key": ["dragon"], "characterFilter": {"names": ["Seraphina"]}}]
    assert ids(run(only, ["dragon"])) == ["Lore:0"]
    assert skips(run(only, ["dragon"], char="Bob")) == {
        "Lore:0": ("character_filter", "character filter does not include 'Bob'")
    }
    assert ids(run(only, ["dragon"], char="Bob", character={"file_name": "Seraphina"}))
    excluded = [{"key": ["dragon"], "characterFilter": {"names": ["Seraphina"], "isExclude": True}}]
    assert not ids(run(excluded, ["dragon"]))
    assert ids(run(excluded, ["dragon"], char="Bob")) == ["Lore:0"]


def test_character_filter_tags_apply_when_the_character_has_tags() -> None:
    """§1.4 check 5: characterFilter.tags, only if the character has a tag entry."""
    villains = [{"key": ["dragon"], "characterFilter": {"tags": ["villain"]}}]
    assert not ids(run(villains, ["dragon"], character_tags=["hero"]))
    assert ids(run(villains, ["dragon"], character_tags=["villain"])) == ["Lore:0"]
    assert ids(run(villains, ["dragon"])) == ["Lore:0"]


def test_held_back_vetoes_after_the_character_filter_and_before_constant_and_sticky() -> None:
    """Clotho: the world-state condition runs right after the character filter."""
    calls: list[str] = []

    def locked(id: str, entry: Any) -> str | None:
        calls.append(id)
        return "the door is locked" if entry.comment == "door" else None

    entries = [
        {"constant": True, "comment": "door"},
        {"key": ["dragon"], "comment": "door", "characterFilter": {"names": ["Bob"]}},
        {"key": ["dragon"]},
        {"key": ["never"], "comment": "door"},
    ]
    result = run(entries, ["dragon"], held_back=locked)
    assert ids(result) == ["Lore:2"]
    assert skips(result) == {
        "Lore:0": ("held_back", "held back: the door is locked"),
        "Lore:1": ("character_filter", "character filter does not include 'Seraphina'"),
    }
    assert sorted(calls) == ["Lore:0", "Lore:2"]  # only entries that could fire are asked
    world = WorldInfo([make_book({"key": ["relic"], "sticky": 3, "comment": "vault"})])
    first = run(world, ["the relic"], chat_length=1)
    assert reasons(run(world, ["x"], chat_length=2, timers=first.timers)) == {
        "Lore:0": "sticky (until message 4)"
    }
    vault = run(world, ["x"], chat_length=2, timers=first.timers, held_back=lambda i, e: "sealed")
    assert skips(vault) == {"Lore:0": ("held_back", "held back: sealed")}


def test_decorators_activate_or_suppress_an_entry() -> None:
    """§1.4 check 11: @@activate / @@dont_activate at the top of the content."""
    entries = [
        {"content": "@@activate\nAlways here."},
        {"key": ["dragon"], "content": "@@dont_activate\nNever here."},
    ]
    result = run(entries, ["dragon"])
    assert [(a.id, a.reason, a.content) for a in result.activated] == [
        ("Lore:0", "@@activate decorator", "Always here.")
    ]
    assert skips(result) == {"Lore:1": ("decorator", "@@dont_activate decorator")}


def test_constant_entries_fire_without_keys() -> None:
    """§1.4 check 12: constant."""
    assert reasons(run([{"constant": True}], ["nothing"])) == {"Lore:0": "constant"}


def test_entries_found_by_meaning_fire_but_obey_the_rules_before_them() -> None:
    """§1.4 check 13: external (vector) activations still go through checks 1-10 (#4320)."""
    similar = [Similar(f"Lore:{uid}", 0.2) for uid in range(3)] + [Similar("Nope:9", 0.1)]
    entries = [{"key": ["dragon"]}, {"key": ["wolf"], "triggers": ["swipe"]}, {"disable": True}]
    result = run(entries, ["nothing"], similar=similar)
    assert reasons(result) == {
        "Lore:0": "found by meaning (similarity 0.80 to the newest messages)"
    }
    assert [(a.via, a.similarity) for a in result.activated] == [("meaning", 0.8)]
    assert skips(result) == {"Lore:1": ("triggers", "triggers: fires on swipe, not on 'normal'")}


def test_entries_without_primary_keys_only_fire_another_way() -> None:
    """§1.4 check 15: no primary keys -> skip (secondary keys alone do nothing)."""
    assert not ids(run([{"keysecondary": ["dragon"]}], ["dragon"]))


def test_the_first_primary_key_in_order_is_the_one_reported() -> None:
    """§1.4 check 16: entry.key.find(...) - the first key (in the entry's order) that matches."""
    result = run([{"key": ["wolf", "dragon", "night"]}], ["night dragon"])
    assert reasons(result) == {"Lore:0": "key 'dragon' in message 0"}
    assert result.activated[0].key == "dragon"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("dragon in the cave", "key 'dragon' in message 0; secondary: AND ANY 'cave'"),
        ("dragon at night", "key 'dragon' in message 0; secondary: AND ANY 'night'"),
        ("dragon", None),
    ],
)
def test_secondary_and_any_activates_on_the_first_matching_key(text: str, reason: str) -> None:
    """§1.4 check 17, AND_ANY (0): one secondary key is enough."""
    result = run([{"key": ["dragon"], "keysecondary": ["cave", "night"]}], [text])
    assert reasons(result) == ({"Lore:0": reason} if reason else {})
    if reason is None:
        assert skips(result)["Lore:0"] == (
            "secondary",
            "key 'dragon' in message 0, but secondary AND ANY: none of 'cave', 'night' present",
        )


def test_secondary_not_all_activates_on_first_non_matching_key() -> None:
    """§1.4 check 17, NOT_ALL (1): fires as soon as one secondary key is missing."""
    entries = [{"key": ["dragon"], "keysecondary": ["cave", "night"], "selectiveLogic": 1}]
    result = run(entries, ["dragon in the cave"])
    assert reasons(result) == {
        "Lore:0": "key 'dragon' in message 0; secondary: NOT ALL ('night' absent)"
    }
    assert not ids(run(entries, ["dragon in the cave at night"]))


def test_secondary_not_any_activates_when_no_secondary_key_matches() -> None:
    """§1.4 check 17, NOT_ANY (2)."""
    entries = [{"key": ["dragon"], "keysecondary": ["cave", "night"], "selectiveLogic": 2}]
    result = run(entries, ["dragon"])
    assert reasons(result) == {
        "Lore:0": "key 'dragon' in message 0; secondary: NOT ANY (none of 'cave', 'night')"
    }
    assert not ids(run(entries, ["dragon at night"]))


def test_secondary_and_all_needs_every_secondary_key() -> None:
    """§1.4 check 17, AND_ALL (3)."""
    entries = [{"key": ["dragon"], "keysecondary": ["cave", "night"], "selectiveLogic": 3}]
    assert not ids(run(entries, ["dragon in the cave"]))
    result = run(entries, ["dragon in the cave at night"])
    assert reasons(result) == {
        "Lore:0": "key 'dragon' in message 0; secondary: AND ALL ('cave', 'night')"
    }


def test_secondary_keys_are_ignored_when_the_entry_is_not_selective() -> None:
    """§1.4 check 17: only if entry.selective and keysecondary.length."""
    entries = [{"key": ["dragon"], "keysecondary": ["cave"], "selective": False}]
    assert ids(run(entries, ["dragon"])) == ["Lore:0"]


# -- §1.5 recursion -------------------------------------------------------------------------


def test_recursion_scans_activated_contents_for_more_keys() -> None:
    """§1.5: activated contents go to the recursion buffer, scanned in the next loop."""
    entries = [{"key": ["dragon"], "content": "It guards the glade."}, {"key": ["glade"]}]
    result = run(entries, ["a dragon"])
    assert [(a.id, a.loop, a.reason) for a in result.activated] == [
        ("Lore:1", 2, "key 'glade' in recursion from 'Lore:0'"),
        ("Lore:0", 1, "key 'dragon' in message 0"),
    ]
    assert result.loops == 3
    assert ids(run(entries, ["a dragon"], scan=ScanSettings(recursive=False))) == ["Lore:0"]


def test_exclude_recursion_entries_fire_only_from_the_messages() -> None:
    """§1.4 check 10: excludeRecursion skips the entry in recursion loops."""
    entries = [
        {"key": ["dragon"], "content": "It guards the glade."},
        {"key": ["glade"], "excludeRecursion": True},
    ]
    result = run(entries, ["a dragon"])
    assert ids(result) == ["Lore:0"]
    assert skips(result) == {
        "Lore:1": (
            "exclude_recursion",
            "excluded from recursion, and found only by a recursion pass",
        )
    }
    assert ids(run(entries, ["a dragon in the glade"])) == ["Lore:1", "Lore:0"]


def test_prevent_recursion_keeps_an_entry_content_out_of_the_buffer() -> None:
    """§1.5: preventRecursion: the content is not added to the recursion buffer."""
    entries = [
        {"key": ["dragon"], "content": "It guards the glade.", "preventRecursion": True},
        {"key": ["glade"]},
    ]
    assert ids(run(entries, ["a dragon"])) == ["Lore:0"]


def test_delay_until_recursion_waits_for_a_recursion_pass() -> None:
    """§1.4 check 8: delayUntilRecursion skips the entry outside RECURSION loops."""
    delayed = {"key": ["glade"], "delayUntilRecursion": True}
    alone = run([delayed], ["the glade"])
    assert skips(alone) == {
        "Lore:0": ("delay_until_recursion", "delayed until recursion (level 1)")
    }
    result = run([delayed, {"key": ["dragon"]}], ["a dragon in the glade"])
    assert [(a.id, a.loop) for a in result.activated] == [("Lore:0", 2), ("Lore:1", 1)]


def test_delay_until_recursion_levels_open_in_ascending_order() -> None:
    """§1.4 checks 8-9 and next state: levels open one by one once nothing else is pending."""
    entries = [
        {"key": ["dragon"]},
        {"key": ["glade"], "delayUntilRecursion": 1, "content": "one"},
        {"key": ["glade"], "delayUntilRecursion": 3, "content": "three"},
    ]
    result = run(entries, ["a dragon in the glade"])
    assert {a.id: a.loop for a in result.activated} == {"Lore:0": 1, "Lore:1": 2, "Lore:2": 4}
    assert result.loops == 5  # loop 3 finds nothing and opens level 3; loop 5 finds nothing


def test_max_recursion_steps_limits_the_loops() -> None:
    """§1.4: if max_recursion_steps && count >= max_recursion_steps, break."""
    entries = [{"key": ["dragon"], "content": "the glade"}, {"key": ["glade"]}]
    result = run(entries, ["a dragon"], scan=ScanSettings(max_recursion_steps=1))
    assert (ids(result), result.loops) == (["Lore:0"], 1)


def test_recursion_rescans_messages_and_the_whole_buffer() -> None:
    """§1.5: each loop scans chat + all recursion text so far, for secondary keys too."""
    entries = [
        {"key": ["dragon"], "content": "the cave"},
        {"key": ["cave"], "content": "the night"},
        {"key": ["dragon"], "keysecondary": ["cave", "night"], "selectiveLogic": 3, "order": 10},
    ]
    result = run(entries, ["a dragon"])
    assert {a.id: a.loop for a in result.activated} == {"Lore:0": 1, "Lore:1": 2, "Lore:2": 3}


def test_an_anchored_regex_is_tested_again_when_recursion_lengthens_the_haystack() -> None:
    """§1.5: each loop tests the whole new haystack: '$' sees the recursion text's end."""
    entries = [
        {"key": ["wolf"], "content": "a glade"},
        {"key": ["wolf"], "keysecondary": ["/night$/"], "selectiveLogic": 2},
    ]
    result = run(entries, ["a wolf at night"])
    assert [(a.id, a.loop) for a in result.activated] == [("Lore:1", 2), ("Lore:0", 1)]


def test_min_activations_scans_older_messages_without_the_recursion_buffer() -> None:
    """§1.4 next state: MIN_ACTIVATIONS widens the depth by one until enough are active."""
    chat = ["the dragon", "nothing", "still nothing"]
    result = run([{"key": ["dragon"]}], chat, scan=ScanSettings(scan_depth=1, min_activations=1))
    assert [(a.id, a.loop, a.reason) for a in result.activated] == [
        ("Lore:0", 3, "key 'dragon' in message 0")
    ]


def test_min_activations_stops_past_the_maximum_depth() -> None:
    """§1.4: no further skew once getDepth() > min_activations_depth_max (checked before)."""
    chat = ["the dragon", "nothing", "still nothing"]
    capped = ScanSettings(scan_depth=1, min_activations=1, min_activations_depth_max=1)
    result = run([{"key": ["dragon"]}], chat, scan=capped)
    assert (ids(result), result.loops) == ([], 2)


# -- inclusion groups -----------------------------------------------------------------------


def _weather(**extra: Any) -> list[dict[str, Any]]:
    return [{"key": ["rain"], "group": "weather", **extra} for _ in range(3)]


def test_inclusion_group_keeps_one_member_by_a_weighted_roll() -> None:
    """§1.4 groups f: roll = random() * Σ weights; the first with cumulative ≥ roll wins."""
    roll = random.Random(5).random() * 300
    assert 100 < roll <= 200
    result = run(_weather(), ["rain"], rng=random.Random(5))
    assert reasons(result) == {
        "Lore:1": f"key 'rain' in message 0; won inclusion group 'weather' (roll {roll:.1f} of 300)"
    }
    assert skips(result) == {
        id: ("group", f"inclusion group 'weather': 'Lore:1' won (roll {roll:.1f} of 300)")
        for id in ("Lore:0", "Lore:2")
    }


def test_inclusion_group_weights_shift_the_roll() -> None:
    """§1.4 groups f: groupWeight (default 100) is each member's share."""
    entries = [{"key": ["rain"], "group": "weather", "groupWeight": w} for w in (1, 1, 1000)]
    assert ids(run(entries, ["rain"], rng=random.Random(5))) == ["Lore:2"]


def test_group_override_prioritizes_the_highest_order() -> None:
    """§1.4 groups e: groupOverride members win, the one with the highest order first."""
    entries = [
        {"key": ["rain"], "group": "weather", "groupOverride": True, "order": 100},
        {"key": ["rain"], "group": "weather", "groupOverride": True, "order": 200},
        {"key": ["rain"], "group": "weather", "order": 300},
    ]
    rng = random.Random(1)
    result = run(entries, ["rain"], rng=rng)
    assert ids(result) == ["Lore:1"]
    assert skips(result)["Lore:2"] == (
        "group",
        "inclusion group 'weather': 'Lore:1' won (prioritized, order 200)",
    )
    assert rng.random() == random.Random(1).random()  # no roll was drawn


def test_group_scoring_keeps_the_members_with_most_keys_matched() -> None:
    """§1.4 groups b: score = primary keys matched (+ secondary for AND_ANY/AND_ALL)."""
    entries = [
        {"key": ["dragon"], "group": "beasts"},
        {"key": ["dragon", "cave"], "group": "beasts"},
        {"key": ["dragon"], "keysecondary": ["cave"], "group": "beasts", "selectiveLogic": 3},
    ]
    result = run(entries, ["dragon in the cave"], scan=ScanSettings(use_group_scoring=True))
    assert skips(result)["Lore:0"] == ("group", "inclusion group 'beasts': score 1, the best is 2")
    assert len(ids(result)) == 1 and ids(result)[0] in ("Lore:1", "Lore:2")
    per_entry = [dict(entry, useGroupScoring=True) for entry in entries[:2]]
    assert ids(run(per_entry, ["dragon in the cave"])) == ["Lore:1"]


def test_a_group_filled_in_an_earlier_loop_takes_no_more_members() -> None:
    """§1.4 groups c: an entry already active with group === key removes all members."""
    entries = [
        {"key": ["dragon"], "group": "beasts", "content": "a wolf"},
        {"key": ["wolf"], "group": "beasts"},
    ]
    result = run(entries, ["a dragon"])
    assert ids(result) == ["Lore:0"]
    assert skips(result) == {"Lore:1": ("group", "inclusion group 'beasts' already has 'Lore:0'")}


def test_an_entry_can_belong_to_several_groups() -> None:
    """§1.4 groups: group is split on /,\\s*/; 'already active' compares the whole string.

    The winner of groups 'a' and 'b' has group 'a, b', which is neither 'a' nor 'b', so
    in the next (recursion) loop the losers come back as the only members of their
    groups: SillyTavern's ``x.group === key`` quirk, kept.
    """
    entries = [
        {"key": ["rain"], "group": "a, b", "groupOverride": True},
        {"key": ["rain"], "group": "a"},
        {"key": ["rain"], "group": "b"},
    ]
    once = run(entries, ["rain"], scan=ScanSettings(recursive=False))
    assert ids(once) == ["Lore:0"]
    assert reasons(once)["Lore:0"].endswith(
        "won inclusion group 'a' (prioritized, order 100); "
        "won inclusion group 'b' (prioritized, order 100)"
    )
    assert skips(once)["Lore:2"] == (
        "group",
        "inclusion group 'b': 'Lore:0' won (prioritized, order 100)",
    )
    again = run(entries, ["rain"])
    assert [(a.id, a.loop) for a in again.activated] == [
        ("Lore:2", 2),
        ("Lore:1", 2),
        ("Lore:0", 1),
    ]


def test_a_sticky_member_holds_its_group() -> None:
    """§1.4 groups a / §1.7: sticky entries win inclusion groups."""
    book = make_book(*_weather(sticky=3))
    world = WorldInfo([book])
    first = run(world, ["rain"], chat_length=4, rng=random.Random(5))
    assert ids(first) == ["Lore:1"]
    second = run(world, ["sunny"], chat_length=5, timers=first.timers)
    assert reasons(second) == {"Lore:1": "sticky (until message 7)"}
    third = run(world, ["rain"], chat_length=6, timers=second.timers, rng=random.Random(0))
    assert ids(third) == ["Lore:1"]
    assert skips(third)["Lore:0"] == (
        "group",
        "inclusion group 'weather': sticky 'Lore:1' holds it",
    )


# -- probability ----------------------------------------------------------------------------


def test_probability_roll_is_recorded_and_a_failure_is_final() -> None:
    """§1.4: pass iff random()*100 <= probability; failures are never re-evaluated."""
    entries = [{"key": ["dragon"], "probability": 30, "content": "dragon again"}]
    rng = random.Random(0)
    result = run(entries, ["a dragon"], rng=rng)
    assert skips(result) == {"Lore:0": ("probability", "probability 30: rolled 84.4")}
    expected = random.Random(0)
    expected.random()
    assert rng.random() == expected.random()  # one roll in all
    assert ids(run(entries, ["a dragon"], rng=random.Random(1))) == ["Lore:0"]  # rolled 13.4


def test_probability_100_or_unused_draws_no_roll() -> None:
    """§1.4: !useProbability || probability === 100 passes without Math.random()."""
    entries = [{"key": ["dragon"]}, {"key": ["dragon"], "probability": 5, "useProbability": False}]
    rng = random.Random(3)
    assert len(ids(run(entries, ["dragon"], rng=rng))) == 2
    assert rng.random() == random.Random(3).random()


def test_unset_probability_counts_as_zero_as_in_sillytavern() -> None:
    """§1.4 (source): probability null: rollValue <= null is rollValue <= 0."""
    result = run([{"key": ["dragon"], "probability": None}], ["dragon"])
    assert skips(result) == {"Lore:0": ("probability", "probability unset (0): rolled 84.4")}


def test_sticky_entries_skip_the_probability_roll() -> None:
    """§1.7: a sticky entry does not need to re-roll probability."""
    world = WorldInfo([make_book({"key": ["dragon"], "probability": 50, "sticky": 2})])
    first = run(world, ["dragon"], chat_length=1, rng=random.Random(1))
    assert ids(first) == ["Lore:0"]
    rng = random.Random(0)
    again = run(world, ["dragon"], chat_length=2, timers=first.timers, rng=rng)
    assert reasons(again) == {"Lore:0": "sticky (until message 3)"}
    assert rng.random() == random.Random(0).random()


# -- budget ---------------------------------------------------------------------------------


def test_budget_overflow_skips_the_rest_but_ignore_budget_entries_still_fire() -> None:
    """§1.4 (1.15): overflow -> continue; ignoreBudget entries are still added."""
    entries = [
        {"constant": True, "content": "a" * 40, "order": 300},
        {"constant": True, "content": "b" * 40, "order": 200},
        {"constant": True, "content": "c" * 40, "order": 100, "ignoreBudget": True},
        {"constant": True, "content": "d" * 10, "order": 50},
    ]
    result = run(entries, ["x"], budget_tokens=70)
    assert ids(result) == ["Lore:2", "Lore:0"]
    assert skips(result) == {
        "Lore:1": ("budget", "budget: 82 tokens spent of 70"),
        "Lore:3": ("budget", "budget: 82 tokens spent of 70"),
    }
    assert result.overflowed and result.tokens == 82


def test_constants_are_not_exempt_from_the_budget() -> None:
    """§1.4: only ignoreBudget is exempt; a constant can be cut."""
    result = run([{"constant": True, "content": "x" * 99}], ["x"], budget_tokens=100)
    assert ids(result) == [] and skips(result)["Lore:0"][0] == "budget"


def test_budget_counts_the_text_of_earlier_loops_and_overflow_stops_recursion() -> None:
    """§1.4: tokens(allActivatedText) + tokens(newContent) >= budget; no recursion after."""
    entries = [
        {"key": ["dragon"], "content": "glade " + "x" * 54},
        {"key": ["glade"], "content": "wolf " + "y" * 25},
        {"key": ["wolf"]},
    ]
    result = run(entries, ["a dragon"], budget_tokens=80)
    assert ids(result) == ["Lore:0"]
    assert skips(result) == {"Lore:1": ("budget", "budget: 92 tokens spent of 80")}
    assert result.loops == 2
    assert ids(run(entries, ["a dragon"], budget_tokens=200)) == ["Lore:2", "Lore:1", "Lore:0"]


# -- §1.7 timed effects ---------------------------------------------------------------------


def test_timed_effects_sticky_3_cooldown_2_delay_2_chained_across_turns() -> None:
    """§1.7: the docs' example entry (sticky 3, cooldown 2, delay 2), turn after turn.

    The source's arithmetic: delay while chat.length < 2; activated at length 2, when
    sticky [2, 5) and cooldown [2, 4) start; sticky at 3 and 4; at 5 the sticky ends and
    starts a protected cooldown [5, 7); free again at 7. The docs' table (sticky on
    messages 2-4, cooldown on 5-6) counts one message more than the code does; the code
    is what SillyTavern runs.
    """
    world = WorldInfo([make_book({"key": ["relic"], "sticky": 3, "cooldown": 2, "delay": 2})])
    timers: dict[str, Any] = {}
    seen = []
    for length in range(1, 9):
        result = run(world, ["the relic"], chat_length=length, timers=timers)
        seen.append(
            reasons(result).get("Lore:0") or skips(result).get("Lore:0", ("", "nothing"))[1]
        )
        timers = result.timers
    assert seen == [
        "delay 2: the chat has 1 message(s)",
        "key 'relic' in message 0",
        "sticky (until message 5)",
        "sticky (until message 5)",
        "cooldown (until message 7)",
        "cooldown (until message 7)",
        "key 'relic' in message 0",
        "sticky (until message 10)",
    ]
    json.dumps(timers)
    assert timers["sticky"]["Lore:0"]["start"] == 7


def test_sticky_keeps_an_entry_without_its_key_and_cooldown_blocks_it_after() -> None:
    """§1.7: sticky activates with no key present; cooldown blocks even with the key."""
    world = WorldInfo([make_book({"key": ["relic"], "sticky": 2, "cooldown": 1})])
    first = run(world, ["the relic"], chat_length=1)
    kept = run(world, ["nothing"], chat_length=2, timers=first.timers)
    assert reasons(kept) == {"Lore:0": "sticky (until message 3)"}
    blocked = run(world, ["the relic"], chat_length=3, timers=kept.timers)
    assert skips(blocked) == {"Lore:0": ("cooldown", "cooldown (until message 4)")}
    assert ids(run(world, ["the relic"], chat_length=4, timers=blocked.timers)) == ["Lore:0"]


def test_effects_are_dropped_when_the_chat_has_not_advanced() -> None:
    """§1.7: chat.length <= start and not protected -> deleted (a swipe rolls it back)."""
    world = WorldInfo([make_book({"key": ["relic"], "sticky": 3, "cooldown": 2})])
    first = run(world, ["the relic"], chat_length=4)
    again = run(world, ["nothing"], chat_length=4, timers=first.timers)
    assert ids(again) == [] and again.timers == {"sticky": {}, "cooldown": {}}
    ended = run(world, ["nothing"], chat_length=7, timers=first.timers)
    assert ended.timers["cooldown"]["Lore:0"]["protected"] is True
    same = run(world, ["the relic"], chat_length=7, timers=ended.timers)
    assert skips(same) == {"Lore:0": ("cooldown", "cooldown (until message 9)")}


def test_editing_an_entry_ends_its_effects() -> None:
    """§1.7: the effect is tied to the entry's hash; an edited entry is not sticky."""
    before = WorldInfo([make_book({"key": ["relic"], "sticky": 5, "content": "old"})])
    after = WorldInfo([make_book({"key": ["relic"], "sticky": 5, "content": "new"})])
    first = run(before, ["the relic"], chat_length=1)
    assert ids(run(before, ["nothing"], chat_length=2, timers=first.timers)) == ["Lore:0"]
    edited = run(after, ["nothing"], chat_length=2, timers=first.timers)
    assert ids(edited) == []
    # SillyTavern keeps the stale record until its end (the entry "could be elsewhere")
    assert edited.timers["sticky"]["Lore:0"] == first.timers["sticky"]["Lore:0"]
    assert run(after, ["nothing"], chat_length=6, timers=first.timers).timers["sticky"] == {}


def test_timers_are_json_and_the_stored_state_is_not_modified() -> None:
    """§1.7: the state is SillyTavern's timedWorldInfo shape, stored on the node."""
    world = WorldInfo([make_book({"key": ["relic"], "sticky": 2, "cooldown": 3})])
    stored = {"sticky": {"Other:1": {"hash": "x", "start": 0, "end": 9, "protected": False}}}
    kept = copy.deepcopy(stored)
    result = run(world, ["the relic"], chat_length=1, timers=stored)
    assert stored == kept
    assert json.loads(json.dumps(result.timers)) == result.timers
    record = result.timers["sticky"]["Lore:0"]
    assert (record["start"], record["end"], record["protected"]) == (1, 3, False)
    assert len(record["hash"]) == 16
    assert result.timers["sticky"]["Other:1"] == stored["sticky"]["Other:1"]


# -- §1.6 order -----------------------------------------------------------------------------


def test_entries_are_ordered_evenly_by_order_then_book_then_uid() -> None:
    """§1.1 'evenly' and §1.6: sort by order (higher first, stable), prompt ascending."""
    first = parse_world_info(
        {
            "entries": {
                "10": {"uid": 10, "constant": True, "order": 100},
                "2": {"uid": 2, "constant": True, "order": 200},
                "1": {"uid": 1, "constant": True, "order": 100},
            }
        },
        "A",
    )
    second = make_book({"constant": True, "order": 200}, name="B")
    world = WorldInfo([first, second])
    assert [item.id for item in world.items] == ["A:2", "B:0", "A:1", "A:10"]
    assert ids(run(world, ["x"])) == ["A:10", "A:1", "B:0", "A:2"]


def test_books_need_distinct_names() -> None:
    """Entry ids are book:uid, so two books cannot share a name."""
    with pytest.raises(LorebookError, match="two lorebooks are named 'Lore'"):
        WorldInfo([make_book(), make_book()])


def test_contents_lose_their_decorators_and_get_their_macros() -> None:
    """§1.4: content = substituteParams(content) after parseDecorators."""
    result = run([{"constant": True, "content": "@@activate\n{{user}} meets {{char}}."}], ["x"])
    assert result.activated[0].content == "Alice meets Seraphina."


# -- the real Eldoria book ------------------------------------------------------------------


def test_eldoria_plural_shadowfangs_does_not_fire_with_whole_words(eldoria: Lorebook) -> None:
    """§1.3 on a real book: 'Shadowfangs' is not the whole word 'shadowfang'."""
    result = run(WorldInfo([eldoria]), ["the Shadowfangs attacked"])
    assert ids(result) == [] and result.skipped == []


def test_eldoria_plural_fires_without_whole_words(eldoria: Lorebook) -> None:
    """§1.3: with whole words off, 'shadowfang' is a substring of 'Shadowfangs'."""
    world = WorldInfo([eldoria], ScanSettings(match_whole_words=False, recursive=False))
    assert reasons(run(world, ["the Shadowfangs attacked"])) == {
        "Eldoria:1": "key 'shadowfang' in message 0"
    }


def test_eldoria_shadowfang_fires_and_recursion_brings_the_rest(eldoria: Lorebook) -> None:
    """§1.5 on a real book: entry 1's content names the forest, the glade and power."""
    result = run(WorldInfo([eldoria]), ["the Shadowfang attacked"])
    assert [(a.id, a.loop, a.reason) for a in result.activated] == [
        ("Eldoria:3", 2, "key 'power' in recursion from 'Eldoria:1'"),
        ("Eldoria:2", 2, "key 'glade' in recursion from 'Eldoria:1'"),
        ("Eldoria:0", 2, "key 'forest' in recursion from 'Eldoria:1'"),
        ("Eldoria:1", 1, "key 'shadowfang' in message 0"),
    ]
    assert result.activated[-1].content.startswith('Alice: "What are Shadowfangs?"')
    assert result.tokens == sum(len(a.content) + 1 for a in result.activated)


def test_eldoria_keys_in_the_entry_order_and_names(eldoria: Lorebook) -> None:
    """§1.3/§1.4: 'woods' is not 'wood'; the first key that matches is 'forest'."""
    world = WorldInfo([eldoria], ScanSettings(recursive=False))
    assert reasons(run(world, ["We walk the woods of the magical forest"])) == {
        "Eldoria:0": "key 'forest' in message 0"
    }
    assert ids(run(world, ["a safe haven"])) == ["Eldoria:2"]
    assert ids(run(world, ["the woods"])) == []


# -- the matchers against SillyTavern's one-key-at-a-time rule -----------------------------

_PIECES = st.sampled_from([*"abé' .-\n", "ab", "ba", "a b"])
_TEXT = st.lists(_PIECES, max_size=12).map("".join)
_KEYS = st.lists(
    st.lists(_PIECES, min_size=1, max_size=3).map("".join).map(str.strip).filter(bool),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(keys=_KEYS, text=_TEXT, whole=st.booleans())
def test_one_pass_matcher_finds_exactly_the_keys_sillytavern_finds(
    keys: list[str], text: str, whole: bool
) -> None:
    """§1.3: the combined matcher agrees with matchKeys on every key, text and mode."""
    unique = {key: number for number, key in enumerate(dict.fromkeys(keys))}
    found = Matcher(unique, whole).hits(text)
    expected = {n for key, n in unique.items() if st_match_key("\x01" + text, key, True, whole)}
    assert found == expected


_REGEXES = ["/a.b/", "/a\\sb/i", "/b\\W+a/", "/^\\x01P/", "/\\ba[^x]*b$/", "/ab?\\b/"]


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.text(st.sampled_from(list("ab \n.é")), max_size=8), min_size=1, max_size=4
    ),
    key=st.sampled_from(_REGEXES),
)
def test_regex_keys_searched_by_pieces_agree_with_the_joined_haystack(
    messages: list[str], key: str
) -> None:
    """§1.2/§1.3: a regex matches the entry iff it matches SillyTavern's joined text."""
    trimmed = [message.strip() for message in messages]
    joined = "\x01" + "\n\x01".join(f"P: {m}".strip() for m in reversed(trimmed))
    regex = parse_regex_key(key)
    assert regex is not None and not isinstance(regex, str)
    result = run([{"key": [key]}], messages, scan=ScanSettings(scan_depth=4, recursive=False))
    assert bool(ids(result)) is regex.test(joined)  # type: ignore[union-attr]
