"""Deltas and schemas on their own (no database): what each operation does."""

from __future__ import annotations

import copy

import pytest

from mnemosyne import PERMISSIVE, InvalidDeltaError, SchemaError, schema_from_mapping
from mnemosyne.state import apply_delta, diff_states, flatten

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": "max_hp"},
            "max_hp": {"type": "int", "default": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
            "speed": {"type": "float", "default": 1.5},
            "alive": {"type": "bool", "default": True},
            "name": {"type": "str"},
            "weather": {"type": "enum", "choices": ["clear", "rain", "storm"]},
            "flags": {"type": "set"},
            "inventory": {"type": "list"},
            "affinity": {"type": "map", "values": {"type": "int", "min": -100, "max": 100}},
        }
    }
)


def apply(*ops: dict, state: dict | None = None) -> dict:
    return apply_delta(SCHEMA, state or SCHEMA.initial_state(), list(ops))


def op(kind: str, path: str, value: object = None) -> dict:
    return (
        {"op": kind, "path": path}
        if kind == "unset"
        else {"op": kind, "path": path, "value": value}
    )


def test_the_initial_state_holds_every_default() -> None:
    assert SCHEMA.initial_state() == {
        "variables": {
            "hp": 100,
            "max_hp": 100,
            "gold": 10,
            "speed": 1.5,
            "alive": True,
            "name": "",
            "weather": "clear",
            "flags": [],
            "inventory": [],
            "affinity": {},
        },
        "active_lore_ids": [],
        "summary": "",
        "lore_timers": {},
        "author_note": None,
        "present": None,
    }


def test_built_ins_keep_their_types_in_the_permissive_schema() -> None:
    state = apply_delta(
        PERMISSIVE, PERMISSIVE.initial_state(), [op("set", "active_lore_ids", ["b:2", "a:1"])]
    )
    assert state["active_lore_ids"] == ["a:1", "b:2"]
    with pytest.raises(InvalidDeltaError, match=r"a set holds a list of strings"):
        apply_delta(PERMISSIVE, state, [op("set", "active_lore_ids", [1])])


def test_lore_timers_are_only_set_whole_or_unset() -> None:
    timers = {"sticky": {"book:1": {"hash": "ab", "start": 3, "end": 6, "protected": False}}}
    state = apply(op("set", "lore_timers", timers))
    assert state["lore_timers"] == timers
    assert apply(op("unset", "lore_timers"), state=state)["lore_timers"] == {}
    for bad in (
        op("inc", "lore_timers", 1),
        op("set", "lore_timers.sticky", {}),
        op("set", "lore_timers", [1]),
    ):
        with pytest.raises(InvalidDeltaError, match="lore_timers"):
            apply(bad, state=state)


def test_numbers_are_set_incremented_and_clamped() -> None:
    state = apply(op("inc", "hp", -30), op("inc", "speed", 1), op("inc", "affinity.marla", 150))
    assert state["variables"]["hp"] == 70
    assert state["variables"]["speed"] == 2.5 and isinstance(state["variables"]["speed"], float)
    assert state["variables"]["affinity"] == {"marla": 100}  # clamped to the entries' max
    assert apply(op("inc", "hp", 500))["variables"]["hp"] == 100  # max is max_hp
    lowered = apply(op("set", "max_hp", 50), op("inc", "hp", 0))
    assert lowered["variables"]["hp"] == 50  # the bound is read from the state so far
    assert apply(op("set", "hp", -5))["variables"]["hp"] == 0


def test_refusing_bounds_refuse() -> None:
    with pytest.raises(InvalidDeltaError, match=r"gold = -5 is below its min 0"):
        apply(op("inc", "gold", -15))


def test_collections() -> None:
    state = apply(
        op("append", "flags", "met_marla"),
        op("append", "flags", "met_marla"),
        op("append", "flags", "a_first"),
        op("append", "inventory", {"item": "sword"}),
        op("append", "inventory", "rope"),
        op("remove", "inventory", "rope"),
        op("append", "active_lore_ids", "cave"),
        op("set", "summary", "They met Marla."),
    )
    assert state["variables"]["flags"] == ["a_first", "met_marla"]
    assert state["variables"]["inventory"] == [{"item": "sword"}]
    assert state["active_lore_ids"] == ["cave"]
    assert state["summary"] == "They met Marla."
    emptied = apply(op("remove", "flags", "a_first"), op("unset", "summary"), state=state)
    assert emptied["variables"]["flags"] == ["met_marla"]
    assert emptied["summary"] == ""


def test_unset_goes_back_to_the_default_and_removes_map_entries() -> None:
    state = apply(op("inc", "hp", -50), op("set", "affinity.bob", 5), op("set", "weather", "rain"))
    state = apply(
        op("unset", "hp"), op("unset", "affinity.bob"), op("unset", "weather"), state=state
    )
    assert state == SCHEMA.initial_state()


def test_every_bad_operation_is_listed_and_nothing_is_applied() -> None:
    before = apply(op("append", "flags", "x"))
    kept = copy.deepcopy(before)
    bad = [
        op("inc", "hp", -1),  # fine on its own
        op("set", "mana", 3),
        op("set", "hp", "ten"),
        op("inc", "hp", 1.5),
        op("remove", "flags", "never"),
        op("set", "weather", "snow"),
        op("append", "hp", 1),
        op("set", "affinity.bob", "friend"),
        op("set", "hp.x", 1),
        {"op": "delete", "path": "hp"},
        {"op": "set", "path": "hp"},
        {"op": "set", "path": "", "value": 1},
        {"op": "set", "path": "hp", "value": 1, "extra": True},
        "not an object",
        op("set", "a.b.c", 1),
    ]
    with pytest.raises(InvalidDeltaError) as caught:
        apply_delta(SCHEMA, before, bad)
    problems = caught.value.problems
    assert [p.index for p in problems] == list(range(1, len(bad)))
    reasons = " | ".join(p.reason for p in problems)
    for expected in (
        "unknown variable 'mana'",
        "expected int, got str 'ten'",
        "cannot add 1.5",
        "'never' is not there to remove",
        "'snow' is not one of clear, rain, storm",
        "append is for lists and sets",
        "affinity.bob: expected int",
        "not a map",
        "op must be one of",
        "set needs a 'value'",
        "non-empty string",
        "unknown field(s): extra",
        "an operation is an object",
        "a map's 'name.key'",
    ):
        assert expected in reasons, expected
    assert before == kept  # the given state was not touched


def test_the_permissive_schema_takes_types_from_first_values() -> None:
    state = apply_delta(
        PERMISSIVE,
        PERMISSIVE.initial_state(),
        [
            op("inc", "hp", -10),
            op("set", "name", "Ayla"),
            op("append", "bag", "rope"),
            op("set", "affinity.marla", 5),
            op("inc", "affinity.marla", 5),
        ],
    )
    assert state["variables"] == {
        "hp": -10,
        "name": "Ayla",
        "bag": ["rope"],
        "affinity": {"marla": 10},
    }
    with pytest.raises(InvalidDeltaError, match="holds an int, cannot be set to str"):
        apply_delta(PERMISSIVE, state, [op("set", "hp", "lots")])
    with pytest.raises(InvalidDeltaError, match="hp holds an int, not a map"):
        apply_delta(PERMISSIVE, state, [op("set", "hp.max", 3)])
    again = apply_delta(PERMISSIVE, state, [op("unset", "hp"), op("set", "hp", "lots")])
    assert again["variables"]["hp"] == "lots"  # unset: the type is free again


def test_diff_and_flatten_name_entries_by_path() -> None:
    before = SCHEMA.initial_state()
    after = apply(op("inc", "hp", -10), op("set", "affinity.marla", 20), state=before)
    assert flatten(after)["affinity.marla"] == 20
    assert diff_states(before, after) == {"affinity.marla": [None, 20], "hp": [100, 90]}
    assert diff_states(after, after) == {}


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"hp": {"type": "int", "default": "x"}}, "variables.hp: default: expected int"),
        ({"hp": {"type": "integer"}}, "variables.hp.type"),
        ({"hp": {"type": "int", "max": "max_hp"}}, "hp.max = 'max_hp': not a number variable"),
        ({"w": {"type": "enum"}}, "an enum needs a non-empty 'choices'"),
        ({"m": {"type": "map"}}, "a map needs 'values'"),
        ({"s": {"type": "str", "min": 1}}, "bounds are for numbers"),
        ({"hp": {"type": "int", "min": 5, "max": 1}}, "min 5 is above max 1"),
        ({"summary": {"type": "str"}}, "built-in"),
        ({"a b": {"type": "int"}}, "letters, digits"),
        ({"hp": {"type": "int", "colour": "red"}}, "variables.hp.colour"),
    ],
)
def test_schema_errors_name_the_source_and_the_key(variables: dict, expected: str) -> None:
    with pytest.raises(SchemaError) as caught:
        schema_from_mapping({"variables": variables}, source="campaign.toml [state]")
    assert "campaign.toml [state]" in str(caught.value)
    assert expected in str(caught.value)
