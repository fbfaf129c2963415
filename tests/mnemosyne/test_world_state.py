"""World state on every node, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from mnemosyne import InvalidDeltaError, Store, schema_from_mapping
from mnemosyne import _queries as q
from mnemosyne import _worldstate as ws
from mnemosyne._schema import keyframes
from mnemosyne.state import apply_delta

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": "max_hp"},
            "max_hp": {"type": "int", "default": 100},
            "gold": {"type": "int", "default": 50, "min": 0, "out_of_bounds": "refuse"},
            "affinity": {"type": "map", "values": {"type": "int", "min": -100, "max": 100}},
            "flags": {"type": "set"},
            "weather": {"type": "enum", "choices": ["clear", "rain", "storm"]},
        }
    }
)


def hp(store: Store, sid: str, at: str | None = None) -> int:
    return store.state(sid, at).variables["hp"]


def test_the_story_rolls_back_with_the_dialogue(store: Store, database_url: str) -> None:
    sid = store.create_session(schema=SCHEMA).id
    store.append(sid, "system", "You are the narrator.")
    attack, _ = store.append(sid, "user", "I attack the goblin")
    hit, _ = store.append(
        sid, "assistant", "It hits you.", delta=[{"op": "inc", "path": "hp", "value": -10}]
    )
    shop, _ = store.append(
        sid, "user", "I buy a potion", delta=[{"op": "inc", "path": "gold", "value": -20}]
    )
    friend, _ = store.append(
        sid,
        "assistant",
        "Marla smiles.",
        delta=[{"op": "inc", "path": "affinity.marla", "value": 15}],
    )
    world = store.state(sid)
    assert (world.variables["hp"], world.variables["gold"]) == (90, 30)
    assert world.variables["affinity"] == {"marla": 15}

    # A reroll of the goblin's reply: this time it misses.
    miss, _ = store.add_sibling(sid, hit.id, "It misses.")
    assert store.state(sid).variables == {**SCHEMA.initial_state()["variables"]}
    # Swipe back: the hit, and everything after it, is what we see again.
    back, _ = store.switch_sibling(sid, "prev")
    assert back.id == friend.id
    assert store.state(sid).variables["affinity"] == {"marla": 15}
    assert hp(store, sid) == 90
    # Check out an old node: the world of that moment.
    store.checkout(sid, attack.id)
    assert hp(store, sid) == 100 and store.state(sid).variables["gold"] == 50
    assert hp(store, sid, shop.id) == 90 and hp(store, sid, miss.id) == 100
    # A restart: a new store on the same database sees the same.
    store.close()
    with Store.open(database_url) as again:
        assert hp(again, sid) == 100
        assert hp(again, sid, friend.id) == 90
        assert again.diff(sid, attack.id, friend.id) == {
            "affinity.marla": [None, 15],
            "gold": [50, 30],
            "hp": [100, 90],
        }
        blame = again.blame(sid, "hp", friend.id)
        assert (blame.value, blame.node_id) == (90, hit.id)
        assert again.blame(sid, "hp").node_id is None  # at HEAD (attack): never written
        start, changes = again.changes(sid, "gold", friend.id)
        assert start == 50 and [(c.node_id, c.value) for c in changes] == [(shop.id, 30)]


def test_a_refused_delta_stores_nothing(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    store.append(sid, "user", "start", delta=[{"op": "inc", "path": "gold", "value": -50}])
    before = store.tree(sid)
    bad = [
        {"op": "inc", "path": "gold", "value": -1},
        {"op": "set", "path": "mana", "value": 5},
        {"op": "set", "path": "weather", "value": 3},
    ]
    with pytest.raises(InvalidDeltaError) as caught:
        store.append(sid, "assistant", "You spend more.", delta=bad)
    assert [p.index for p in caught.value.problems] == [0, 1, 2]
    assert "below its min 0" in str(caught.value) and "unknown variable 'mana'" in str(caught.value)
    with pytest.raises(InvalidDeltaError):
        store.add_sibling(sid, before.nodes[0].id, "again", delta=bad)
    assert store.tree(sid) == before
    assert store.state(sid).variables["gold"] == 0


def test_a_session_without_a_campaign_takes_types_from_first_values(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "assistant", "ouch", delta=[{"op": "inc", "path": "hp", "value": -10}])
    assert store.state(sid).variables == {"hp": -10}
    with pytest.raises(InvalidDeltaError, match="cannot be set to str"):
        store.append(sid, "user", "x", delta=[{"op": "set", "path": "hp", "value": "full"}])
    assert store.schema(sid).permissive


def test_the_state_of_an_empty_session_is_the_initial_one(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    assert store.state(sid).as_dict() == SCHEMA.initial_state()
    assert store.blame(sid, "hp").as_dict() == {"path": "hp", "value": 100, "node_id": None}


def _keyframe_count(store: Store) -> int:
    with store.read() as conn:
        return conn.execute(select(func.count()).select_from(keyframes)).scalar_one()


def test_keyframes_are_spaced_and_only_a_cache(store: Store) -> None:
    every = store.keyframe_every
    sid = store.create_session(schema=SCHEMA).id
    with store.transaction(sid) as tx:
        for i in range(3 * every + 2):
            tx.append("user", f"{i}", delta=[{"op": "inc", "path": "gold", "value": 1}])
    assert _keyframe_count(store) == 4  # the root, then every `every` levels
    assert store.state(sid).variables["gold"] == 50 + 3 * every + 2
    root = store.tree(sid).nodes[0].id
    with store.transaction(sid) as tx:
        assert tx.invalidate_keyframes(root) == 4
    assert _keyframe_count(store) == 0
    assert store.state(sid).variables["gold"] == 50 + 3 * every + 2  # replayed from the root
    with store.transaction(sid) as tx:
        assert tx.rebuild_keyframes(root) == 4
    assert store.state(sid).variables["gold"] == 50 + 3 * every + 2


# --- the property: keyframes never change what a state is --------------------------------

safe_operations = st.one_of(
    st.builds(lambda v: {"op": "inc", "path": "hp", "value": v}, st.integers(-60, 60)),
    st.builds(lambda v: {"op": "set", "path": "max_hp", "value": v}, st.integers(1, 200)),
    st.builds(
        lambda k, v: {"op": "inc", "path": f"affinity.{k}", "value": v},
        st.sampled_from(["marla", "bob"]),
        st.integers(-80, 80),
    ),
    st.builds(
        lambda f: {"op": "append", "path": "flags", "value": f}, st.sampled_from(["a", "b", "c"])
    ),
    st.builds(
        lambda w: {"op": "set", "path": "weather", "value": w},
        st.sampled_from(["clear", "rain", "storm"]),
    ),
    st.builds(
        lambda p: {"op": "unset", "path": p}, st.sampled_from(["hp", "affinity.bob", "flags"])
    ),
    st.builds(lambda s: {"op": "set", "path": "summary", "value": s}, st.text(max_size=5)),
)
trees = st.lists(
    st.tuples(
        st.integers(min_value=-1, max_value=1000),  # parent: an index into earlier nodes, -1 root
        st.lists(safe_operations, max_size=3),
        st.booleans(),  # enabled
    ),
    min_size=1,
    max_size=30,
)


def _replay(path: list[tuple[list, bool]]) -> dict:
    """The reference: every enabled delta from the root, no keyframes."""
    state = SCHEMA.initial_state()
    for delta, enabled in path:
        if enabled:
            state = apply_delta(SCHEMA, state, delta)
    return state


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(shape=trees, every=st.integers(min_value=1, max_value=6), data=st.data())
def test_the_state_at_every_node_is_a_replay_from_the_root(
    store: Store, shape: list, every: int, data: st.DataObject
) -> None:
    sized = Store(store.engine, keyframe_every=every)
    sid = sized.create_session(schema=SCHEMA).id
    made: list[str] = []
    parents: dict[str, str | None] = {}
    content: dict[str, tuple[list, bool]] = {}
    with sized.transaction(sid) as tx:
        for parent_index, delta, enabled in shape:
            if parent_index < 0 or not made:
                if made:  # another root: a sibling of the first one
                    root = next(n for n in made if parents[n] is None)
                    node = tx.add_sibling(root, "root", delta=delta, enabled=enabled)
                else:
                    node = tx.append("system", "root", delta=delta, enabled=enabled)
                parents[node.id] = None
            else:
                parent = made[parent_index % len(made)]
                tx.checkout(parent)
                node = tx.append("user", "x", delta=delta, enabled=enabled)
                parents[node.id] = parent
            made.append(node.id)
            content[node.id] = (delta, enabled)

    def path_of(node_id: str) -> list[tuple[list, bool]]:
        out = []
        current: str | None = node_id
        while current is not None:
            out.append(content[current])
            current = parents[current]
        return out[::-1]

    def check() -> None:
        for node_id in made:
            assert sized.state(sid, node_id).as_dict() == _replay(path_of(node_id)), node_id
            # blame reads upwards to the nearest writer; changes replays the whole path
            for variable in ("hp", "gold", "affinity", "flags"):
                start, found = sized.changes(sid, variable, node_id)
                expected = (found[-1].value, found[-1].node_id) if found else (start, None)
                blamed = sized.blame(sid, variable, node_id)
                assert (blamed.value, blamed.node_id) == expected, (node_id, variable)
                with sized.read() as conn:  # chunks of two rows: every chunk border met
                    pk = q.resolve_node(conn, q.session_record(conn, sid), node_id)[0]
                    assert ws.last_writer(conn, pk, variable, chunk=2) == expected[1]

    check()
    with sized.read() as conn:  # the spacing: fewer than `every` deltas past a keyframe
        record = q.session_record(conn, sid)
        for node_id in made:
            pk = q.resolve_node(conn, record, node_id)[0]
            reached = ws.state_after(conn, SCHEMA, pk)
            assert reached.distance is not None and reached.distance < every
    dropped = data.draw(st.lists(st.sampled_from(made), max_size=3))
    with sized.transaction(sid) as tx:
        for node_id in dropped:
            tx.invalidate_keyframes(node_id)
    check()
    with sized.transaction(sid) as tx:
        for node_id in dropped:
            tx.rebuild_keyframes(node_id)
    check()


def test_stored_keyframes_are_json_states(store: Store) -> None:
    sid = store.create_session(schema=SCHEMA).id
    store.append(sid, "user", "x", delta=[{"op": "append", "path": "flags", "value": "a"}])
    with store.read() as conn:
        (text,) = conn.execute(select(keyframes.c.state)).one()
    assert json.loads(text)["variables"]["flags"] == ["a"]
