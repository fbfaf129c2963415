"""A cascade: an early message edited as a fork, the rest of its old branch played again
on it (SQLite and PostgreSQL, the model a real server on loopback)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import Store, schema_from_mapping
from mnemosyne.edits import Delete
from orchestrator import Character, Engine, ModelConfig, TurnRequest, TurnSetup, build_engine
from orchestrator.cascade import (
    CASCADE,
    Cascade,
    CascadeError,
    CascadeOutcome,
    CascadePlan,
    plan_cascade,
)
from orchestrator.loopback import ModelServer, Reply
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


def closing(engine: Engine, work: Coroutine[Any, Any, Any]) -> Any:
    """``work`` run in an event loop of its own, the engine's model clients closed after
    (each turn of a test has its own loop)."""

    async def run() -> Any:
        try:
            return await work
        finally:
            await engine.aclose()

    return asyncio.run(run())


def turn(engine: Engine, sid: str, kind: str, **kwargs: Any) -> Any:
    return closing(engine, engine.run(sid, TurnRequest(kind, **kwargs)))  # type: ignore[arg-type]


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

    outcome: CascadeOutcome = closing(engine, runner.run(plan, on_begin=begun, on_step=made))
    return outcome


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
        assert step.new.metadata[CASCADE] == {"from": old[0], "of": step.old.id, "to": old[-1]}
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


class Streamed(Story):
    """As :class:`Story`, each reply of the new branch (``hit`` 3) streamed slowly."""

    LONG = " ".join(f"word{i}" for i in range(200))

    def __call__(self, request: dict[str, Any]) -> Any:
        text = super().__call__(request)
        if self.hit == 3 and "response_format" not in request:
            return Reply(self.LONG, chunk_delay=0.01)
        return text


def test_a_stop_while_a_reply_streams_keeps_it_incomplete_as_that_step(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    story = Streamed()
    engine = engine_for(store, serve(story))
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    store.add_sibling(sid, old[0], "I walk around the cave.")
    story.hit = 3
    story.LONG = "Short reply."  # the first one whole
    runner = Cascade(engine, store)
    tokens: list[str] = []

    def on_event(kind: str, text: str) -> None:
        if kind == "token":
            tokens.append(text)
            if len(tokens) == 3:
                runner.stop()  # the second reply, three words in

    def begun(number: int, total: int, old_node: Any) -> None:
        if number == 3:
            story.LONG = Streamed.LONG
            tokens.clear()

    plan = plan_cascade(store, sid)
    outcome = closing(engine, runner.run(plan, on_begin=begun, on_event=on_event))
    assert outcome.stopped and outcome.done == 3
    assert [step.number for step in outcome.made] == [1, 2, 3]
    kept = outcome.made[-1].new
    assert kept.metadata["incomplete"] is True and kept.content.startswith("word0")
    assert len(kept.content) < len(Streamed.LONG)
    assert outcome.new_id == kept.id and outcome.old_id == old[3]
    resumed = plan_cascade(store, sid)  # HEAD on the kept reply: goes on after it
    assert resumed.done == 3 and resumed.tip == kept.id


def test_stopping_a_cascade_that_is_not_replying_leaves_the_engines_turn_alone(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    story = Streamed()
    story.hit = 3  # every reply streamed slowly
    engine = engine_for(store, serve(story), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    runner = Cascade(engine, store)  # waiting for the turn the engine plays
    tokens: list[str] = []

    def on_event(kind: str, text: str) -> None:
        if kind == "token":
            tokens.append(text)
            if len(tokens) == 3:
                runner.stop()

    result = closing(engine, engine.run(sid, TurnRequest("say", text="Hello."), on_event))
    assert result.node is not None and result.node.content == Streamed.LONG
    assert "incomplete" not in result.node.metadata
    assert runner.stopping


def test_a_fork_original_or_leaf_out_of_the_tree_is_refused_naming_it(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    fork, _ = store.add_sibling(sid, old[0], "I walk around the cave.")
    other, _ = store.add_sibling(sid, old[0], "I run.")
    store.edit(sid, Delete(node_id=other.id))
    with pytest.raises(CascadeError, match=rf"node {other.id[:8]} \(the fork\) is no longer"):
        plan_cascade(store, sid, other.id)
    with pytest.raises(CascadeError, match=rf"node {other.id[:8]} \(the original\)"):
        plan_cascade(store, sid, fork.id, original=other.id)
    store.edit(sid, Delete(node_id=old[4]))
    with pytest.raises(CascadeError, match=rf"node {old[5][:8]} \(the leaf\)"):
        plan_cascade(store, sid, fork.id, original=old[0], leaf=old[5])
    assert plan_cascade(store, sid, fork.id, original=old[0]).leaf_id == old[3]


def test_going_on_from_head_keeps_the_leaf_the_cascade_was_run_to(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    fork, _ = store.add_sibling(sid, old[0], "I walk around the cave.")
    plan = plan_cascade(store, sid, fork.id, leaf=old[3])  # not the active path's end
    stopped = cascade(engine, store, plan, stop_after=1)
    assert stopped.done == 1 and store.session(sid).head_id == stopped.new_id
    resumed = plan_cascade(store, sid)  # no argument: the stopped cascade, to its leaf
    assert (resumed.fork.id, resumed.original.id, resumed.leaf_id) == (fork.id, old[0], old[3])
    assert resumed.done == 1 and resumed.total == 3
    # the same steps to another leaf are the same mirrors: none made twice
    assert plan_cascade(store, sid, fork.id, original=old[0]).done == 1


def test_the_default_original_after_a_second_edit_is_the_one_with_a_story_below(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    store.add_sibling(sid, old[0], "I walk around the cave.")  # fork only: nothing below
    second, _ = store.add_sibling(sid, old[0], "I run around the cave.")
    plan = plan_cascade(store, sid)
    assert (plan.fork.id, plan.original.id, plan.total) == (second.id, old[0], 5)
    # edits that each made a reply: HEAD on the last one's reply
    turn(engine, sid, "edit", node=old[0], text="I crawl in.")
    last = turn(engine, sid, "edit", node=old[0], text="I leap in.")
    plan = plan_cascade(store, sid)
    assert (plan.fork.id, plan.original.id) == (last.user_node.id, old[0])
    assert plan.done == 1 and plan.total == 5


def test_a_speaker_who_can_no_longer_speak_gives_way_with_a_warning(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    cast = (
        Character(name="Ann", talkativeness=0.0),
        Character(name="Bram", talkativeness=0.0),
    )
    engine = engine_for(store, serve(Story()), character=cast[0], cast=cast, extract=False)
    sid = store.create_session().id
    first = turn(engine, sid, "say", text="Hello.", speaker="Bram")
    store.add_sibling(sid, first.user_node.id, "Good evening.")
    muted = (cast[0], Character(name="Bram", talkativeness=0.0, muted=True))
    engine = engine_for(store, serve(Story()), character=muted[0], cast=muted, extract=False)
    warnings: list[str] = []

    def on_event(kind: str, text: str) -> None:
        if kind == "warning":
            warnings.append(text)

    runner = Cascade(engine, store)
    outcome = closing(engine, runner.run(plan_cascade(store, sid), on_event=on_event))
    assert outcome.complete
    assert [(s.new.role, s.new.name) for s in outcome.made] == [("assistant", "Ann")]
    assert len(warnings) == 1 and "Bram is muted" in warnings[0]


def test_a_reply_grows_under_the_node_named_not_head(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    engine = engine_for(store, serve(Story()), extract=False)
    sid = store.create_session(schema=SCHEMA).id
    old = old_story(store, engine, sid)
    assert store.session(sid).head_id == old[-1]
    result = turn(engine, sid, "reply", node=old[2])
    assert result.node.parent_id == old[2]
    assert store.session(sid).head_id == result.node.id
