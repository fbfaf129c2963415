"""Who is present (the ``present`` built-in): the cast as world state, so a checkout
or an undo brings the scene back as it was. Operations on their own, then on both
databases."""

from __future__ import annotations

import pytest

from mnemosyne import PERMISSIVE, InvalidDeltaError, SchemaError, Store, schema_from_mapping
from mnemosyne.state import apply_delta, diff_states

SCHEMA = schema_from_mapping({"variables": {"hp": {"type": "int", "default": 100}}})


def op(kind: str, value: object = None) -> dict:
    if kind == "unset":
        return {"op": "unset", "path": "present"}
    return {"op": kind, "path": "present", "value": value}


def test_present_is_everyone_until_a_list_is_set_then_joins_and_leaves_change_it() -> None:
    start = SCHEMA.initial_state()
    assert start["present"] is None  # everyone: no one has come or gone
    scene = apply_delta(SCHEMA, start, [op("set", ["Marla", "Ann", "Bram"])])
    left = apply_delta(SCHEMA, scene, [op("remove", "Ann")])
    assert left["present"] == ["Marla", "Bram"]
    back = apply_delta(SCHEMA, left, [op("append", "Ann"), op("append", "Marla")])
    assert back["present"] == ["Marla", "Bram", "Ann"]  # in the order they came; once
    assert scene["present"] == ["Marla", "Ann", "Bram"]  # the state given never changes
    assert apply_delta(SCHEMA, back, [op("unset")])["present"] is None
    assert diff_states(scene, left) == {"present": [["Marla", "Ann", "Bram"], ["Marla", "Bram"]]}
    # a built-in whatever the schema: the permissive one too
    free = apply_delta(PERMISSIVE, PERMISSIVE.initial_state(), [op("set", ["Ann"])])
    assert free["present"] == ["Ann"] and free["variables"] == {}


@pytest.mark.parametrize(
    ("operation", "state", "says"),
    [
        (op("remove", "Ann"), None, "present is everyone"),
        (op("append", "Ann"), None, "set the list of those present"),
        (op("remove", "Cid"), ["Ann"], "'Cid' is not present (present: Ann)"),
        (op("set", ["Ann", "Ann"]), None, "present names 'Ann' more than once"),
        (op("set", "Ann"), None, "present is a list of names"),
        (op("set", ["Ann", ""]), None, "a character's name is a non-empty text"),
        (op("append", 3), ["Ann"], "a character's name is a non-empty text"),
        (op("inc", 1), ["Ann"], "present takes set, append, remove or unset"),
        ({"op": "set", "path": "present.Ann", "value": True}, None, "present has no entries"),
    ],
)
def test_a_wrong_change_of_who_is_present_is_refused_whole(
    operation: dict, state: list[str] | None, says: str
) -> None:
    before = {**SCHEMA.initial_state(), "present": state}
    with pytest.raises(InvalidDeltaError, match=f"(?s){says.replace('(', '.').replace(')', '.')}"):
        apply_delta(SCHEMA, before, [{"op": "inc", "path": "hp", "value": -5}, operation])
    assert before["variables"]["hp"] == 100


def test_a_variable_cannot_be_named_present() -> None:
    with pytest.raises(SchemaError, match="built-in part of every state"):
        schema_from_mapping({"variables": {"present": {"type": "str"}}})


def test_who_is_present_rolls_back_with_the_story(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    start, _ = store.append(
        sid, "system", "The tavern.", delta=[op("set", ["Marla", "Ann", "Bram"])]
    )
    store.append(sid, "user", "Ann, wait here.")
    leaves, _ = store.append(sid, "system", "Ann leaves.", delta=[op("remove", "Ann")])
    store.append(sid, "assistant", "Marla lowers her voice.")
    back, _ = store.append(sid, "system", "Ann comes back.", delta=[op("append", "Ann")])
    assert store.state(sid).present == ["Marla", "Bram", "Ann"]
    assert store.state(sid, leaves.id).present == ["Marla", "Bram"]
    assert store.diff(sid, start.id, leaves.id) == {
        "present": [["Marla", "Ann", "Bram"], ["Marla", "Bram"]]
    }
    store.checkout(sid, start.id)  # rolled back across the leave: as it was there
    assert store.state(sid).present == ["Marla", "Ann", "Bram"]
    assert store.state(sid).as_dict()["present"] == ["Marla", "Ann", "Bram"]
    before = (store.session(sid), len(store.tree(sid).nodes))
    with pytest.raises(InvalidDeltaError, match="'Cid' is not present"):
        store.append(sid, "system", "Cid leaves.", delta=[op("remove", "Cid")])
    assert (store.session(sid), len(store.tree(sid).nodes)) == before  # nothing stored
    assert store.state(sid, back.id).present == ["Marla", "Bram", "Ann"]


def test_scenes_say_who_was_present_along_the_path_in_one_read(store: Store) -> None:
    from mnemosyne.edits import Toggle

    schema = schema_from_mapping(
        {"variables": {"hp": {"type": "int", "default": 100}, "mood": {"type": "str"}}}
    )
    sid = store.create_session(schema=schema).id
    store.append(sid, "user", "Hello, all.")
    leaves, _ = store.append(sid, "system", "Ann leaves.", delta=[op("set", ["Marla", "Bram"])])
    # a delta whose text has "present" (the read's LIKE picks it) but that sets a
    # variable is no change of who is
    mood = {"op": "set", "path": "mood", "value": "present"}
    store.append(sid, "assistant", "Marla is all ears.", delta=[mood])
    back, _ = store.append(sid, "system", "Ann joins.", delta=[op("append", "Ann")])
    store.append(sid, "assistant", "Welcome back.")
    scenes = store.scenes(sid)
    assert scenes.messages == store.messages(sid)
    # the read did pick the mood's delta as a possible change (and then let it go)
    tips = [tip for entry in store.paths._entries.values() for tip in entry.tips.values()]
    assert any('"mood"' in text for tip in tips for _, text in tip.scenes)
    assert [(c.index, scenes.messages[c.index].id, c.present) for c in scenes.changes] == [
        (1, leaves.id, ["Marla", "Bram"]),
        (3, back.id, ["Marla", "Bram", "Ann"]),
    ]
    assert scenes.changes[-1].present == store.state(sid).present
    assert [c.index for c in store.scenes(sid, leaves.id).changes] == [1]
    # read again: from the store's memory of the path, changes and all
    hits = store.paths.hits
    assert store.scenes(sid).changes == scenes.changes
    assert store.paths.hits == hits + 1
    # a disabled node's change does not count (its delta is not applied)
    store.edit(sid, Toggle(node_id=back.id))
    assert store.state(sid).present == ["Marla", "Bram"]
    assert [c.index for c in store.scenes(sid).changes] == [1]
    assert store.scenes(sid).messages == store.messages(sid)


def test_the_last_speaker_is_the_name_on_the_newest_named_reply(store: Store) -> None:
    from mnemosyne.edits import Toggle

    sid = store.create_session(schema=SCHEMA).id
    assert store.last_speaker(sid) is None  # an empty story
    store.append(sid, "user", "Hello.", name="Player")
    assert store.last_speaker(sid) is None  # no reply yet
    ann, _ = store.append(sid, "assistant", "Hi.", name="Ann")
    store.append(sid, "assistant", "An old reply with no name.")
    store.append(sid, "system", "Bram leaves the scene.")
    store.append(sid, "user", "And you?", name="Player")
    assert store.last_speaker(sid) == "Ann"
    bram, _ = store.append(sid, "assistant", "Me?", name="Bram")
    assert store.last_speaker(sid) == "Bram"
    assert store.last_speaker(sid, ann.id) == "Ann"  # at a node of the path
    store.edit(sid, Toggle(node_id=bram.id))  # a disabled reply is not in the story
    assert store.last_speaker(sid) == "Ann"
