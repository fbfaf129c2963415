"""A cascade: an early message edited as a fork, the rest of its old branch played again
on it (SQLite and PostgreSQL, the model a real server on loopback)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import Store, schema_from_mapping
from orchestrator import Character, Engine, ModelConfig, TurnRequest, TurnSetup, build_engine
from orchestrator.cascade import (
    CASCADE,
    Cascade,
    CascadeError,
    CascadeOutcome,
    CascadePlan,
    plan_cascade,
)
from orchestrator.loopback import ModelServer
from tests._cast import chat

SCHEMA = schema_from_mapping(
    {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
)


class Story:
    """Numbered replies; each extraction takes ``hit`` hp (the old branch 10, the new 3)."""

    def __init__(self) -> None:
        self.count = 0
        self.hit = 10

    def __call__(self, request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": [{"op": "inc", "path": "hp", "value": -self.hit}]})
        self.count += 1
        return f"Reply {self.count}."


def engine_for(store: Store, server: ModelServer, **setup: Any) -> Engine:
    model = ModelConfig("openai/gm", api_base=server.url, retries=0)
    return build_engine(store, TurnSetup(model=model, **setup), rng=random.Random(3))


def turn(engine: Engine, sid: str, kind: str, **kwargs: Any) -> Any:
    return asyncio.run(engine.run(sid, TurnRequest(kind, **kwargs)))  # type: ignore[arg-type]


def cascade(
    engine: Engine,
    store: Store,
    plan: CascadePlan,
    stop_after: int | None = None,
    events: list[tuple[int, int, str]] | None = None,
) -> CascadeOutcome:
    runner = Cascade(engine, store)

    def begun(number: int, total: int, old: Any) -> None:
        if events is not None:
            events.append((number, total, old.id))

    def made(step: Any) -> None:
        if stop_after is not None and step.number >= stop_after:
            runner.stop()

    async def run() -> CascadeOutcome:
        return await runner.run(plan, on_begin=begun, on_step=made)

    return asyncio.run(run())


def snapshot(store: Store, sid: str, ids: list[str]) -> list[Any]:
    """The old branch as it stands: each node and the state after it."""
    return [
        (store.node(sid, i).as_dict(), store.state(sid, i).as_dict(), store.trace(sid, i) is None)
        for i in ids
    ]


def old_story(store: Store, engine: Engine, sid: str) -> list[str]:
    """Three exchanges: the ids of the six nodes, the first the player's."""
    ids = []
    for text in ("I enter the cave.", "I light a torch.", "I call out."):
        result = turn(engine, sid, "say", text=text)
        ids += [result.user_node.id, result.node.id]
    return ids


def test_a_cascade_mirrors_the_old_branch_on_the_fork_and_leaves_it_untouched(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    story = Story()
    server = serve(story)
    engine = engine_for(store, server)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    assert store.state(sid).variables["hp"] == 70
    before = snapshot(store, sid, old)
    fork, _ = store.add_sibling(sid, old[0], "I walk around the cave.")
    story.hit = 3

    plan = plan_cascade(store, sid)  # HEAD: the fork; the original: its earlier sibling
    assert (plan.fork.id, plan.original.id, plan.leaf_id) == (fork.id, old[0], old[-1])
    assert [node.id for node in plan.old] == old[1:] and plan.done == 0
    events: list[tuple[int, int, str]] = []
    outcome = cascade(engine, store, plan, events=events)
    assert events == [(n, 5, old[n]) for n in range(1, 6)]
    assert outcome.complete and not outcome.stopped
    assert [step.generated for step in outcome.made] == [True, False, True, False, True]

    # the new branch: the player's messages copied, each reply generated again
    new = [fork] + [step.new for step in outcome.made]
    for parent, child in itertools.pairwise(new):
        assert child.parent_id == parent.id
    assert [n.role for n in new] == ["user", "assistant"] * 3
    assert [n.content for n in new[2::2]] == ["I light a torch.", "I call out."]
    assert [n.content for n in new[1::2]] == ["Reply 4.", "Reply 5.", "Reply 6."]
    for step in outcome.made:
        assert step.new.metadata[CASCADE] == {"from": old[0], "of": step.old.id}
    # each reply through the engine's own turn: its trace, its delta extracted
    assert all(store.trace(sid, n.id) is not None for n in new[1::2])
    assert store.state(sid, new[-1].id).variables["hp"] == 91
    assert store.session(sid).head_id == new[-1].id
    # the prompt of the last reply: the edited message, then the new replies
    last = [m["content"] for m in chat(server)[-1].messages if m["role"] != "system"]
    assert last == ["I walk around the cave.", "Reply 4.", "I light a torch.", "Reply 5.",
                    "I call out."]  # fmt: skip

    # how the states diverged, at the leaves
    assert (outcome.old_id, outcome.new_id) == (old[-1], new[-1].id)
    assert outcome.divergence["hp"] == [70, 91]
    assert snapshot(store, sid, old) == before

    # run again: nothing left to do, nothing made twice
    again = plan_cascade(store, sid, fork.id)
    assert again.done == 5 and again.tip == new[-1].id
    assert cascade(engine, store, again).made == []
    assert len(store.tree(sid).nodes) == 12


def test_a_stopped_cascade_resumes_where_it_stopped(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    story = Story()
    engine = engine_for(store, serve(story))
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    before = snapshot(store, sid, old)
    story.hit = 3
    # an edit as the player makes it: the fork and its reply, HEAD on the reply
    edited = turn(engine, sid, "edit", node=old[0], text="I walk around the cave.")
    plan = plan_cascade(store, sid)
    assert plan.fork.id == edited.user_node.id and plan.original.id == old[0]
    assert [m.id for m in plan.mirrors] == [edited.node.id]  # the edit's reply counts

    stopped = cascade(engine, store, plan, stop_after=3)
    assert stopped.stopped and not stopped.complete and stopped.done == 3
    assert [s.number for s in stopped.made] == [2, 3]
    assert stopped.old_id == old[3] and stopped.new_id == stopped.made[-1].new.id
    assert stopped.divergence["hp"] == [80, 94]

    resumed = plan_cascade(store, sid, edited.user_node.id)
    assert resumed.done == 3 and resumed.tip == stopped.made[-1].new.id
    outcome = cascade(engine, store, resumed)
    assert [s.number for s in outcome.made] == [4, 5] and outcome.complete
    # never a step twice: one child on each node of the new branch
    children = store.tree(sid).children()
    node = edited.user_node.id
    for _ in range(5):
        (child,) = children[node]
        node = child.id
    assert node == outcome.new_id
    assert snapshot(store, sid, old) == before


def test_a_cast_story_keeps_its_speakers_and_scene_changes(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    cast = (
        Character(name="Ann", talkativeness=0.0),
        Character(name="Bram", talkativeness=0.0),
    )
    engine = engine_for(store, serve(Story()), character=cast[0], cast=cast, extract=False)
    sid = store.create_session().id
    first = turn(engine, sid, "say", text="Hello.", speaker="Bram")
    turn(engine, sid, "reply", speaker="Ann")
    leaves = {"op": "set", "path": "present", "value": ["Bram"]}
    scene, _ = store.append(
        sid, "system", "Ann leaves.", metadata={"scene": {"leaves": "Ann"}}, delta=[leaves]
    )
    turn(engine, sid, "say", text="Where did she go?", speaker="Bram")
    store.add_sibling(sid, first.user_node.id, "Good evening.")
    outcome = cascade(engine, store, plan_cascade(store, sid))
    assert outcome.complete
    new = [step.new for step in outcome.made]
    assert [(n.role, n.name) for n in new] == [
        ("assistant", "Bram"),
        ("assistant", "Ann"),
        ("system", None),
        ("user", "Player"),
        ("assistant", "Bram"),
    ]
    assert new[2].content == scene.content and new[2].metadata["scene"] == {"leaves": "Ann"}
    assert store.state(sid, new[2].id).present == ["Bram"]
    assert outcome.divergence == {}  # the same scene, no variables


def test_what_cannot_be_cascaded_is_said(store: Store, serve: Callable[..., ModelServer]) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    with pytest.raises(CascadeError, match="no earlier alternative"):
        plan_cascade(store, sid)  # HEAD: a reply, never forked
    again = turn(engine, sid, "reroll")  # the last reply again: nothing below the original
    with pytest.raises(CascadeError, match="nothing to cascade"):
        plan_cascade(store, sid, again.node.id)
    with pytest.raises(CascadeError, match="not another alternative"):
        plan_cascade(store, sid, again.node.id, original=old[0])
    fork, _ = store.add_sibling(sid, old[2], "I drop the torch.")
    with pytest.raises(CascadeError, match="not on the old branch"):
        plan_cascade(store, sid, fork.id, leaf=old[1])
    assert plan_cascade(store, sid, fork.id, leaf=old[3]).total == 1


def test_hidden_replies_and_the_players_deltas_are_copied(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    first, _ = store.append(sid, "user", "I enter.")
    store.append(sid, "assistant", "An old reply, hidden.", enabled=False)
    drink = [{"op": "set", "path": "hp", "value": 50}]
    store.append(sid, "user", "I drink.", delta=drink)
    store.append(sid, "assistant", "You feel odd.")
    store.add_sibling(sid, first.id, "I run in.")
    outcome = cascade(engine, store, plan_cascade(store, sid))
    assert [step.generated for step in outcome.made] == [False, False, True]
    hidden, player, reply = (step.new for step in outcome.made)
    assert (hidden.enabled, hidden.content) == (False, "An old reply, hidden.")
    assert player.delta == drink and reply.parent_id == player.id
    assert store.state(sid, reply.id).variables["hp"] == 50
    assert outcome.divergence == {}
