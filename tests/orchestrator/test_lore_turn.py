"""Lore in a turn: World Info entries placed in the prompt, recorded on the node (active
ids, timed effects that roll back with the story) and explained by the trace."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mnemosyne import Store
from orchestrator import Character, Engine, ModelConfig, TurnSetup, build_engine
from orchestrator.loopback import ModelServer
from planner.lore import LorePlanner
from planner.lorebook import parse_world_info

from .test_turn import Scripted, chat, delta, play

BOOK = parse_world_info(
    {
        "entries": {
            "0": {
                "uid": 0,
                "key": [],
                "constant": True,
                "position": 0,
                "content": "The valley of Eldoria is dying.",
            },
            "1": {"uid": 1, "key": ["goblin"], "position": 1, "content": "Goblins fear fire."},
            "2": {
                "uid": 2,
                "key": ["dragon"],
                "position": 4,
                "depth": 1,
                "role": 0,
                "sticky": 3,
                "content": "The dragon sleeps under the mountain.",
            },
            "3": {
                "uid": 3,
                "key": ["marla"],
                "position": 1,
                "content": "Marla owes {{user}} one.",
                "extensions": {"clotho": {"condition": "'met_marla' in flags"}},
            },
        }
    },
    "valley",
)


def engine_for(store: Store, server: ModelServer) -> Engine:
    setup = TurnSetup(
        model=ModelConfig("openai/gm", api_base=server.url, retries=0),
        character=Character(name="Seraphina", description="A forest guardian."),
        player="Hero",
    )
    return build_engine(
        store, setup, planner=lambda call: LorePlanner([BOOK], seed=7, plan_call=call)
    )


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


def test_lore_is_placed_where_its_entry_says_and_recorded(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["The goblin snarls."]))
    result = play(engine_for(store, server), sid, "say", text="A goblin attacks!")
    sent = contents(chat(server)[0].messages)
    before = next(i for i, text in enumerate(sent) if "Eldoria is dying" in text)
    character = next(i for i, text in enumerate(sent) if "A forest guardian." in text)
    after = next(i for i, text in enumerate(sent) if "Goblins fear fire." in text)
    assert 0 < before < character < after < len(sent) - 1
    assert sent[-1] == "A goblin attacks!"
    assert not any("dragon" in text for text in sent)

    state = store.state(sid)
    assert state.active_lore_ids == ["valley:0", "valley:1"]
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified
    reasons = {item["id"]: item["reason"] for item in trace.document["lore"]}
    assert reasons["valley:0"] == "constant"
    assert "goblin" in reasons["valley:1"]
    assert trace.document["retrieval"]["seed"] == 7


def test_lore_at_a_depth_goes_inside_the_history_and_the_trace_still_verifies(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["You look around.", "Smoke rises far away."]))
    engine = engine_for(store, server)
    play(engine, sid, "say", text="Hello there.")
    result = play(engine, sid, "say", text="I hear of a dragon.")
    sent = chat(server)[1].messages
    # depth 1: just before the newest message, as a system message
    assert sent[-2] == {"role": "system", "content": "The dragon sleeps under the mountain."}
    assert sent[-1] == {"role": "user", "content": "I hear of a dragon."}
    assert sent[-3] == {"role": "assistant", "content": "You look around."}
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified and trace.messages == sent


def test_sticky_lore_lasts_and_rolls_back_with_the_story(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["A shadow passes.", "Wind.", "Rain.", "Thunder."]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="Is that a dragon?")
    assert "valley:2" in store.state(sid).active_lore_ids
    timers = store.state(sid).lore_timers
    assert set(timers["sticky"]) == {"valley:2"}

    second = play(engine, sid, "say", text="I keep walking.")  # no key: sticky keeps it
    assert "valley:2" in store.state(sid).active_lore_ids
    trace = store.trace(sid, second.node.id)
    assert trace is not None
    assert "sticky" in {i["id"]: i["reason"] for i in trace.document["lore"]}["valley:2"]

    rerolled = play(engine, sid, "reroll")  # from the same parent: the same timers
    assert "valley:2" in store.state(sid).active_lore_ids
    assert rerolled.node.parent_id == second.node.parent_id
    # the story before the dragon has no timers and no dragon
    assert first.user_node is not None
    assert store.state(sid, first.user_node.id).lore_timers == {}
    assert store.state(sid, first.user_node.id).active_lore_ids == []


def test_a_condition_holds_an_entry_back_until_the_state_allows_it(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    met = delta({"op": "append", "path": "flags", "value": "met_marla"})
    server = serve(Scripted(["Marla nods.", "Marla smiles."], [met]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="Marla waves at me.")
    trace = store.trace(sid, first.node.id)
    assert trace is not None
    skipped = {item["id"]: item["reason"] for item in trace.document["lore_skipped"]}
    assert "valley:3" in skipped and "met_marla" in skipped["valley:3"]
    assert "valley:3" not in store.state(sid).active_lore_ids

    play(engine, sid, "say", text="Marla, my friend!")
    sent = contents(chat(server)[1].messages)
    assert any("Marla owes Hero one." in text for text in sent)  # {{user}} substituted
    assert "valley:3" in store.state(sid).active_lore_ids
    assert json.loads(json.dumps(store.state(sid).as_dict()))  # JSON all the way


class Planning(Scripted):
    """Also answers the planning call, with ``plans`` in order."""

    def __init__(self, story: list[str], plans: list[str]) -> None:
        super().__init__(story)
        self.plans = list(plans)

    def __call__(self, request: dict[str, Any]) -> Any:
        if request["messages"][0]["content"].startswith("You help the game master"):
            return self.plans.pop(0)
        return super().__call__(request)


def test_a_model_call_can_plan_and_its_reasoning_is_kept(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    plan = json.dumps(
        {"reasoning": "The hero meets a goblin: recall goblins.", "queries": ["goblins"]}
    )
    server = serve(Planning(["The goblin hisses.", "Quiet."], [plan, "no idea"]))
    engine = build_engine(
        store,
        TurnSetup(
            model=ModelConfig("openai/gm", api_base=server.url, retries=0),
            plan_by_model=True,
        ),
        planner=lambda call: LorePlanner([BOOK], seed=3, plan_call=call),
    )
    first = play(engine, sid, "say", text="A goblin!")
    trace = store.trace(sid, first.node.id)
    assert trace is not None
    planner = trace.document["planner"]
    assert planner["strategy"] == "model"
    assert planner["reasoning"].startswith("The hero meets a goblin: recall goblins.")
    assert planner["call"]["output"] == plan
    assert "goblin" in planner["call"]["messages"][0]["content"]  # the topics it was shown
    assert "plan" in trace.document["templates"]
    assert "valley:1" in store.state(sid).active_lore_ids  # keywords still fire

    second = play(engine, sid, "say", text="And then?")
    trace = store.trace(sid, second.node.id)
    assert trace is not None
    assert trace.document["planner"]["strategy"] == "rules"
    assert "not JSON" in trace.document["planner"]["reasoning"]
