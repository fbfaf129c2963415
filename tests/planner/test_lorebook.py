"""World Info files and character books: reading, SillyTavern's conversion, lossless export."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planner.errors import LorebookError, PlannerError
from planner.lorebook import (
    Entry,
    Lorebook,
    character_book_document,
    convert_character_book,
    dump_world_info,
    load_world_info,
    parse_character_book,
    parse_world_info,
    world_info_document,
)
from tests._fixtures import ELDORIA

ELDORIA_KEYS = {
    0: ["eldoria", "wood", "forest", "magical forest"],
    1: ["shadowfang", "beast", "monster", "monsters", "beasts"],
    2: ["glade", "safe haven", "refuge"],
    3: ["power", "magic", "ability"],
}


@pytest.fixture
def eldoria_text() -> str:
    return ELDORIA.read_text(encoding="utf-8")  # missing: the test fails, never skips


def _attributes(entry: Entry) -> dict[str, Any]:
    """The typed attributes of an entry, without ``extensions`` and unknown fields."""
    return {name: getattr(entry, name) for name in Entry.model_fields if name != "extensions"}


def test_eldoria_has_its_four_entries_and_their_keys(eldoria_text: str) -> None:
    book = load_world_info(eldoria_text.encode("utf-8"), "Eldoria")
    assert book.name == "Eldoria"
    assert book.kind == "world_info"
    assert {entry.uid: entry.keys for entry in book.entries} == ELDORIA_KEYS
    assert [entry.uid for entry in book.entries] == [0, 1, 2, 3]
    first = book.entry(0)
    assert first.content.startswith('{{user}}: "What is Eldoria?"')
    assert (first.order, first.position, first.selective, first.disable) == (100, 0, False, False)
    assert first.secondary_keys == []
    # fields the file leaves out take SillyTavern's defaults
    assert (first.probability, first.use_probability, first.depth) == (100, True, 4)
    with pytest.raises(KeyError):
        book.entry(4)


def test_a_world_info_file_comes_back_byte_for_byte(eldoria_text: str) -> None:
    book = load_world_info(eldoria_text, "Eldoria")
    assert dump_world_info(book) == eldoria_text
    document = world_info_document(book)
    assert json.dumps(document) == json.dumps(json.loads(eldoria_text))  # key order included


def test_unknown_and_absent_fields_survive_export() -> None:
    text = (
        '{"entries": {"7": {"key": ["moon"], "content": "The moon is red.", "zTool": {"x": [1]},'
        ' "extensions": {"clotho": {"condition": "hp < 10"}}, "uid": 7}},'
        ' "name": "custom", "myBookField": true}'
    )
    book = load_world_info(text, "custom")
    entry = book.entry(7)
    assert entry.model_extra == {"zTool": {"x": [1]}}
    assert entry.condition == "hp < 10"
    assert json.dumps(world_info_document(book)) == json.dumps(json.loads(text))
    assert "order" not in world_info_document(book)["entries"]["7"]  # not filled in on export


def test_the_export_is_a_copy_and_the_book_a_snapshot() -> None:
    document: dict[str, Any] = {"entries": {"0": {"uid": 0, "key": ["a"], "content": "A"}}}
    book = parse_world_info(document, "snap")
    document["entries"]["0"]["content"] = "changed by the caller"
    exported = world_info_document(book)
    assert exported["entries"]["0"]["content"] == "A"
    exported["entries"]["0"]["key"].append("b")
    assert world_info_document(book)["entries"]["0"]["key"] == ["a"]


def _st_book() -> dict[str, Any]:
    """A character book as SillyTavern writes one, every ST field under ``extensions``."""
    return {
        "name": "Moonfall",
        "entries": [
            {
                "id": 5,
                "keys": ["moon", "eclipse"],
                "secondary_keys": ["night"],
                "comment": "The moon",
                "content": "The moon is red.",
                "constant": False,
                "selective": True,
                "insertion_order": 40,
                "enabled": True,
                "position": "after_char",
                "use_regex": True,
                "extensions": {
                    "position": 4,
                    "probability": 35,
                    "useProbability": True,
                    "depth": 2,
                    "selectiveLogic": 3,
                    "group": "sky, weather",
                    "group_override": True,
                    "group_weight": 50,
                    "sticky": 2,
                    "cooldown": 3,
                    "delay": 1,
                    "scan_depth": 5,
                    "case_sensitive": True,
                    "match_whole_words": False,
                    "use_group_scoring": True,
                    "automation_id": "moon-auto",
                    "role": 1,
                    "vectorized": True,
                    "exclude_recursion": True,
                    "prevent_recursion": True,
                    "delay_until_recursion": 2,
                    "display_index": 9,
                    "triggers": ["normal", "swipe"],
                    "ignore_budget": True,
                    "match_scenario": True,
                    "match_persona_description": True,
                    "outlet_name": "sky",
                    "clotho": {"condition": "hp < 10"},
                    "other_tool": {"keep": [1, 2]},
                },
            },
            {
                "keys": ["tide"],
                "content": "Tides rise.",
                "enabled": False,
                "insertion_order": 10,
                "position": "before_char",
                "extensions": {},
            },
        ],
    }


def test_character_book_extensions_map_back_onto_entry_attributes() -> None:
    book = parse_character_book(_st_book(), "Moonfall")
    assert book.kind == "character_book"
    moon = book.entry(5)
    assert (moon.keys, moon.secondary_keys, moon.comment) == (
        ["moon", "eclipse"],
        ["night"],
        "The moon",
    )
    assert (moon.order, moon.position, moon.disable, moon.selective) == (40, 4, False, True)
    assert (moon.probability, moon.use_probability, moon.depth, moon.selective_logic) == (
        35,
        True,
        2,
        3,
    )
    assert moon.groups == ["sky", "weather"]
    assert (moon.group_override, moon.group_weight, moon.use_group_scoring) == (True, 50, True)
    assert (moon.sticky, moon.cooldown, moon.delay) == (2, 3, 1)
    assert (moon.scan_depth, moon.case_sensitive, moon.match_whole_words) == (5, True, False)
    assert (moon.automation_id, moon.role, moon.vectorized) == ("moon-auto", 1, True)
    assert (moon.exclude_recursion, moon.prevent_recursion, moon.delay_until_recursion) == (
        True,
        True,
        2,
    )
    assert (moon.display_index, moon.triggers, moon.ignore_budget) == (9, ["normal", "swipe"], True)
    assert (moon.match_scenario, moon.match_persona_description, moon.outlet_name) == (
        True,
        True,
        "sky",
    )
    assert moon.match_creator_notes is False
    # the entry's extensions come through whole: Clotho's own and another tool's
    assert moon.extensions == _st_book()["entries"][0]["extensions"]
    assert moon.condition == "hp < 10"
    # the original character book is kept as read
    assert book.raw == _st_book()


def test_character_book_defaults_follow_sillytavern() -> None:
    book = parse_character_book(_st_book(), "Moonfall")
    tide = book.entries[1]
    assert tide.uid == 1  # no id: its index
    assert (tide.position, tide.disable, tide.order) == (0, True, 10)  # before_char; enabled false
    assert (tide.probability, tide.use_probability, tide.selective) == (100, True, False)
    assert (tide.depth, tide.group_weight, tide.role, tide.scan_depth) == (4, 100, 0, None)
    assert tide.extensions == {}


@pytest.mark.parametrize(
    ("entry", "position", "disable"),
    [
        ({"position": "before_char", "enabled": True}, 0, False),
        ({"position": "after_char", "enabled": True}, 1, False),
        ({"enabled": True}, 1, False),  # ST: anything but 'before_char' is after
        ({"position": "before_char", "extensions": {"position": 6}, "enabled": True}, 6, False),
        ({"position": "before_char"}, 0, True),  # ST: no 'enabled' means disabled
    ],
)
def test_position_and_enabled_as_sillytavern_reads_them(
    entry: dict[str, Any], position: int, disable: bool
) -> None:
    book = parse_character_book({"entries": [{"keys": ["k"], "content": "c", **entry}]}, "b")
    assert (book.entries[0].position, book.entries[0].disable) == (position, disable)


def test_uids_are_the_ids_else_the_index_and_never_collide() -> None:
    entries = [
        {"id": 1, "keys": ["a"]},
        {"keys": ["b"]},  # index 1 is taken by the explicit id: the next free uid
        {"keys": ["c"]},
        {"id": 1, "keys": ["d"]},  # a duplicate id (SillyTavern would drop an entry)
        {"id": None, "keys": ["e"]},
    ]
    book = parse_character_book({"entries": entries}, "ids")
    assert [(entry.uid, entry.keys[0]) for entry in book.entries] == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
        (4, "d"),
        (5, "e"),
    ]
    assert list(convert_character_book({"entries": entries})["entries"]) == [
        "1",
        "2",
        "3",
        "4",
        "5",
    ]


def test_a_character_book_exports_as_sillytavern_converts_it() -> None:
    book = parse_character_book(_st_book(), "Moonfall")
    document = world_info_document(book)
    assert list(document) == ["entries", "originalData"]
    assert document["originalData"] == _st_book()
    moon = document["entries"]["5"]
    assert list(moon)[:3] == ["key", "keysecondary", "comment"]
    assert list(moon)[-3:] == ["uid", "displayIndex", "extensions"]
    assert (moon["order"], moon["disable"], moon["addMemo"], moon["probability"]) == (
        40,
        False,
        True,
        35,
    )
    assert moon["extensions"]["clotho"] == {"condition": "hp < 10"}
    tide = document["entries"]["1"]
    assert (tide["disable"], tide["addMemo"], tide["displayIndex"]) == (True, False, 1)
    # the converted document reads back as the same entries
    again = load_world_info(dump_world_info(book), "Moonfall")
    assert again.entries == book.entries
    document["entries"]["5"]["key"].append("changed")
    assert world_info_document(book)["entries"]["5"]["key"] == ["moon", "eclipse"]


def test_world_info_to_character_book_and_back_keeps_every_attribute(eldoria_text: str) -> None:
    world = load_world_info(eldoria_text, "Eldoria")
    card_book = character_book_document(world)
    assert card_book["name"] == "Eldoria"
    assert card_book["entries"][0]["insertion_order"] == 100
    assert card_book["entries"][0]["position"] == "before_char"
    assert card_book["entries"][0]["extensions"]["probability"] == 100  # written as an integer
    back = parse_character_book(card_book, "Eldoria")
    assert [entry.display_index for entry in back.entries] == [0, 1, 2, 3]  # None: the index
    assert [{**_attributes(entry), "display_index": None} for entry in back.entries] == [
        _attributes(entry) for entry in world.entries
    ]

    moon = parse_character_book(_st_book(), "Moonfall")
    assert character_book_document(moon) == _st_book()  # a card's book comes back as read
    as_world = parse_world_info(world_info_document(moon), "Moonfall")
    round_trip = parse_character_book(character_book_document(as_world), "Moonfall")
    assert [_attributes(entry) for entry in round_trip.entries] == [
        _attributes(entry) for entry in moon.entries
    ]
    assert round_trip.entry(5).condition == "hp < 10"


@pytest.mark.parametrize(
    ("book", "message"),
    [
        ([], "data.character_book: expected an object, got a list"),
        ({"entries": {"0": {}}}, "data.character_book.entries: expected a list, got an object"),
        ({"entries": [{}, "x"]}, "data.character_book.entries.1: expected an object, got a string"),
        (
            {"entries": [{}, {}, {"keys": 7}]},
            "data.character_book.entries.2.keys: expected a list of strings, got a number (7)",
        ),
        (
            {"entries": [{"secondary_keys": ["a", None]}]},
            "data.character_book.entries.0.secondary_keys.1: expected a string, got null",
        ),
        ({"entries": [{"id": "one"}]}, "data.character_book.entries.0.id: expected an integer"),
        ({"entries": [{"enabled": "yes"}]}, "data.character_book.entries.0.enabled: expected true"),
        (
            {"entries": [{"extensions": [1]}]},
            "data.character_book.entries.0.extensions: expected an object",
        ),
        (
            {"entries": [{"extensions": {"probability": "high"}}]},
            "data.character_book.entries.0.extensions.probability: Input should be a valid number",
        ),
        (
            {"entries": [{"insertion_order": "first"}]},
            "data.character_book.entries.0.insertion_order: Input should be a valid integer",
        ),
        (
            {"entries": [{"extensions": {"selectiveLogic": 9}}]},
            "data.character_book.entries.0.extensions.selectiveLogic: Input should be less than",
        ),
    ],
)
def test_a_wrong_field_in_a_character_book_is_named(book: Any, message: str) -> None:
    with pytest.raises(LorebookError) as caught:
        parse_character_book(book, "bad", "data.character_book")
    assert str(caught.value).startswith(message)
    assert isinstance(caught.value, PlannerError)
    assert isinstance(caught.value, ValueError)


def test_an_unknown_kind_of_book_is_refused() -> None:
    with pytest.raises(LorebookError, match="unknown kind of lorebook 'notes'"):
        world_info_document(Lorebook("odd", (), {"entries": {}}, kind="notes"))
