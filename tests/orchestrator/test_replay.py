"""Replay (A/B): a generated node's prompt sent again with something changed, each reply a
new sibling with its own trace and a ``replay`` record; real model servers on loopback,
both databases."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from mnemosyne import Store, schema_from_mapping
from mnemosyne.edits import Delete, Prune, Rewrite
from orchestrator import Engine, ModelConfig, ModelError, TurnError, TurnResult, build_engine
from orchestrator.loopback import ModelServer, Received, Reply
from orchestrator.replay import MAX_REPLAYS, ReplayChanges, TemplateChange, replay
from orchestrator.setup import Character, TurnSetup
from planner.lore import LorePlanner
from prompts import TemplateError

from .test_lore_turn import BOOK
from .test_turn import HIT, NOTHING, delta, play

SCHEMA = schema_from_mapping(
    {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
)
HEAL = delta({"op": "inc", "path": "hp", "value": 5})


class ByModel:
    """A model server's script: each model answers in its own words (``model: n``), and
    every extraction answers the next of ``deltas``."""

    def __init__(self, deltas: list[str] | None = None) -> None:
        self.deltas = list(deltas or [])
        self.count: dict[str, int] = {}

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            return self.deltas.pop(0) if self.deltas else NOTHING
        model = request["model"]
        if model == "missing":
            return Reply(status=404, error="The model `missing` does not exist")
        self.count[model] = self.count.get(model, 0) + 1
        return f"{model} answers, time {self.count[model]}."


def story(server: ModelServer) -> list[Received]:
    return [r for r in server.requests if "response_format" not in r.json]


def engine_for(store: Store, server: ModelServer, *, lore: bool = False) -> Engine:
    setup = TurnSetup(
        model=ModelConfig("openai/gm", api_base=server.url, retries=0, params={"temperature": 0.7}),
        character=Character(name="Seraphina"),
        player="Hero",
    )
    if not lore:
        return build_engine(store, setup)
    return build_engine(store, setup, planner=lambda call: LorePlanner([BOOK], seed=7))


def replayed(
    engine: Engine, sid: str, node: str, changes: ReplayChanges, n: int = 1
) -> list[TurnResult]:
    async def run() -> list[TurnResult]:
        try:
            return await replay(engine, sid, node, changes, n=n)
        finally:
            await engine.aclose()

    return asyncio.run(run())


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def test_sent_as_stored_to_another_model_makes_siblings_with_their_own_traces(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel([HIT, HEAL, NOTHING]))
    first = play(engine_for(store, server), sid, "say", text="I enter the cave.")
    original = first.node
    assert original is not None and original.content == "gm answers, time 1."
    stored = store.trace(sid, original.id)
    assert stored is not None and stored.verified

    changes = ReplayChanges(
        model=ModelConfig("openai/other", api_base=server.url, retries=0),
        params={"temperature": 1.1},
    )
    results = replayed(engine_for(store, server), sid, original.id, changes, n=2)

    assert [r.node.content for r in results if r.node] == [
        "other answers, time 1.",
        "other answers, time 2.",
    ]
    sent = story(server)
    # the exact stored messages went to the other model, with the other temperature
    assert [r.messages for r in sent[1:]] == [stored.messages, stored.messages]
    assert [r.json["model"] for r in sent] == ["gm", "other", "other"]
    assert [r.json.get("temperature") for r in sent] == [0.7, 1.1, 1.1]
    for result in results:
        node = result.node
        assert node is not None and node.parent_id == original.parent_id
        assert node.metadata["replay"] == {
            "of": original.id,
            "sent": "as stored",
            "changed": {
                "model": ["openai/gm", "openai/other"],
                "params": {"temperature": [0.7, 1.1]},
            },
        }
        assert node.metadata["generated"] == "replay"
        trace = store.trace(sid, node.id)
        assert trace is not None and trace.verified and trace.messages == stored.messages
        assert trace.document["model"] == "openai/other"
        assert trace.document["replay"]["of"] == original.id
        assert any("run" in part for part in trace.parts)  # the history by reference
    # each reply's own delta, extracted as a reroll's is: the original is untouched
    assert store.node(sid, original.id).delta == [{"op": "inc", "path": "hp", "value": -10}]
    assert results[0].node.delta == [{"op": "inc", "path": "hp", "value": 5}]
    assert store.state(sid, results[0].node.id).variables["hp"] == 100
    assert store.state(sid, original.id).variables["hp"] == 90
    # HEAD on the last, as after a reroll; all three alternatives of the turn
    assert store.session(sid).head_id == results[1].node.id
    assert len(store.turn(sid, results[1].node.id).siblings) == 3
    store.undo(sid)  # one undo step per sibling, like a reroll
    assert store.session(sid).head_id == results[0].node.id


def test_another_server_answers_a_profile_change(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    home, elsewhere = serve(ByModel()), serve(ByModel())
    original = play(engine_for(store, home), sid, "say", text="Hello.").node
    assert original is not None
    changes = ReplayChanges(
        model=ModelConfig("openai/far", api_base=elsewhere.url, retries=0), profile="Far away"
    )
    [result] = replayed(engine_for(store, home), sid, original.id, changes)
    assert result.node is not None and result.node.content == "far answers, time 1."
    assert len(story(home)) == 1 and len(story(elsewhere)) == 1
    changed = result.node.metadata["replay"]["changed"]
    assert changed["profile"] == [None, "Far away"]
    assert changed["api_base"] == [home.url, elsewhere.url]
    assert changed["params"] == {"temperature": [0.7, None]}  # the profile sets none


def test_rebuilt_with_a_note_and_a_template_goes_through_the_engine(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    original = play(engine_for(store, server), sid, "say", text="I look around.").node
    assert original is not None
    changes = ReplayChanges(
        note="Keep it short.",
        templates={
            "system": TemplateChange("You are a terse narrator for {{ user }}.", "terse.j2")
        },
    )
    [result] = replayed(engine_for(store, server), sid, original.id, changes)
    node = result.node
    assert node is not None and node.parent_id == original.parent_id
    sent = story(server)[-1].messages
    assert sent[0] == {"role": "system", "content": "You are a terse narrator for Hero."}
    assert any(m["content"] == "Keep it short." for m in sent)
    assert sent[-1] == {"role": "user", "content": "I look around."}
    record = node.metadata["replay"]
    assert record["sent"] == "rebuilt"
    assert record["changed"] == {
        "templates": {"system": ["package", "terse.j2"]},
        "note": ["", "Keep it short."],
    }
    trace = store.trace(sid, node.id)
    assert trace is not None and trace.verified and trace.messages == sent
    assert trace.document["templates"]["system"]["origin"] == "terse.j2"
    # the note the reply was made with is its state; the original's has none
    assert store.state(sid, node.id).author_note["text"] == "Keep it short."
    assert store.state(sid, original.id).author_note is None


def test_lore_switched_off_and_on(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    original = play(engine_for(store, server, lore=True), sid, "say", text="A goblin!").node
    assert original is not None
    first = json.dumps(story(server)[0].messages)
    assert "Goblins fear fire." in first and "dragon sleeps" not in first
    changes = ReplayChanges(lore_off=frozenset({"valley:1"}), lore_on=frozenset({"valley:2"}))
    [result] = replayed(engine_for(store, server, lore=True), sid, original.id, changes)
    sent = json.dumps(story(server)[-1].messages)
    assert "Goblins fear fire." not in sent and "The dragon sleeps under the mountain." in sent
    assert result.node is not None
    assert store.state(sid, result.node.id).active_lore_ids == ["valley:0", "valley:2"]
    lore = store.trace(sid, result.node.id).document["lore"]
    assert [hit["via"] for hit in lore if hit["id"] == "valley:2"] == ["replay"]


def test_lore_switched_on_goes_in_as_a_scan_puts_it(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    """Without its ``@@`` decorator lines, and with ``{{user}}``/``{{char}}`` replaced."""
    dragon = BOOK.entries[2]
    content = "@@dont_activate\n{{user}} hears from {{char}}: " + dragon.content
    decorated = dragon.model_copy(update={"content": content})
    entries = tuple(decorated if entry is dragon else entry for entry in BOOK.entries)
    book = replace(BOOK, entries=entries)
    server = serve(ByModel())

    def engine() -> Engine:
        return build_engine(
            store, engine_for(store, server).setup, planner=lambda call: LorePlanner([book])
        )

    original = play(engine(), sid, "say", text="A goblin!").node
    assert original is not None
    changes = ReplayChanges(lore_on=frozenset({"valley:2"}))
    [result] = replayed(engine(), sid, original.id, changes)
    sent = json.dumps(story(server)[-1].messages)
    assert "The dragon sleeps under the mountain." in sent and "@@" not in sent
    assert "Hero hears from " in sent and "{{" not in sent
    assert result.node is not None
    assert store.state(sid, result.node.id).active_lore_ids == ["valley:0", "valley:1", "valley:2"]


def test_what_cannot_be_replayed_is_refused_and_nothing_is_stored(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    first = play(engine_for(store, server), sid, "say", text="Hello.")
    assert first.node is not None and first.user_node is not None
    written, _ = store.append(sid, "assistant", "A reply written by hand.")
    other = ReplayChanges(params={"temperature": 1.0})
    version = store.session(sid).version

    def refused(node: str, changes: ReplayChanges, n: int = 1) -> str:
        with pytest.raises(TurnError) as caught:
            replayed(engine_for(store, server), sid, node, changes, n)
        return str(caught.value)

    assert "user message" in refused(first.user_node.id, other)
    assert "no PromptTrace" in refused(written.id, other)
    assert "changes something" in refused(first.node.id, ReplayChanges())
    assert f"1 to {MAX_REPLAYS}" in refused(first.node.id, other, n=MAX_REPLAYS + 1)
    assert "no lore entry valley:9" in refused(
        first.node.id, ReplayChanges(lore_on=frozenset({"valley:9"}))
    )
    with pytest.raises(TemplateError, match=r"bad\.j2 \(system\) failed: division by zero"):
        bad = ReplayChanges(templates={"system": TemplateChange("{{ 1/0 }}", "bad.j2")})
        replayed(engine_for(store, server), sid, first.node.id, bad)
    with pytest.raises(TemplateError, match=r"bad\.j2 \(system\), line 1"):
        broken = ReplayChanges(templates={"system": TemplateChange("{% if %}", "bad.j2")})
        replayed(engine_for(store, server), sid, first.node.id, broken)
    with pytest.raises(ModelError):
        replayed(
            engine_for(store, server),
            sid,
            first.node.id,
            ReplayChanges(model=ModelConfig("openai/missing", api_base=server.url, retries=0)),
        )
    assert store.session(sid).version == version
    assert len(story(server)) == 2  # the say, and the missing model's refusal


def test_a_prompt_that_no_longer_verifies_is_not_sent_as_stored(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    first = play(engine_for(store, server), sid, "say", text="Hello.")
    assert first.node is not None and first.user_node is not None
    store.edit(
        sid, Rewrite(node_id=first.user_node.id, content="Goodbye.")
    )  # edited in place since it was sent
    with pytest.raises(TurnError, match="no longer what was sent"):
        replayed(engine_for(store, server), sid, first.node.id, ReplayChanges(params={"seed": 3}))
    # rebuilt, it is the tree as it is now
    [result] = replayed(engine_for(store, server), sid, first.node.id, ReplayChanges(note="Hm."))
    assert story(server)[-1].messages[-1] == {"role": "user", "content": "Goodbye."}
    assert result.node is not None


def test_a_reply_of_a_cast_of_several_is_replayed_as_its_speaker(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    import random

    from tests._cast import Voices

    cast = (Character(name="Ann", talkativeness=0.0), Character(name="Bram", talkativeness=0.0))
    server = serve(Voices())

    def engine() -> Engine:
        setup = TurnSetup(
            model=ModelConfig("openai/gm", api_base=server.url, retries=0),
            character=cast[0],
            cast=cast,
            extract=False,
        )
        return build_engine(store, setup, rng=random.Random(3))

    sid = store.create_session().id
    play(engine(), sid, "say", text="Hello, both of you.", speaker="Ann")
    bram = play(engine(), sid, "reply", speaker="Bram").node
    play(engine(), sid, "say", text="And now?", speaker="Ann")
    assert bram is not None and bram.name == "Bram"
    stored = store.trace(sid, bram.id)
    assert stored is not None and stored.verified
    [again] = replayed(engine(), sid, bram.id, ReplayChanges(params={"temperature": 0.1}))
    [rebuilt] = replayed(engine(), sid, bram.id, ReplayChanges(note="Bram is tired."))
    for result in (again, rebuilt):
        assert result.node is not None and result.node.name == "Bram"
        assert result.node.parent_id == bram.parent_id
        trace = store.trace(sid, result.node.id)
        assert trace is not None and trace.verified
    assert store.trace(sid, again.node.id).messages == stored.messages
    # the replies before it, sent with their speakers' names, stored by reference again
    assert any(part.get("named") for part in store.trace(sid, again.node.id).parts)
    assert "Bram is tired." in json.dumps(store.trace(sid, rebuilt.node.id).messages)


def test_what_changed_is_against_the_original_whatever_changed_it(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    original = play(engine_for(store, server), sid, "say", text="Hello.").node
    assert original is not None
    # the session has moved to another model since; the replay asks only for a seed
    moved = engine_for(store, server)
    moved.setup = replace(moved.setup, model=replace(moved.setup.model, model="openai/newer"))
    [result] = replayed(moved, sid, original.id, ReplayChanges(params={"seed": 4}))
    assert result.node is not None and result.node.content == "newer answers, time 1."
    assert result.node.metadata["replay"]["changed"] == {
        "model": ["openai/gm", "openai/newer"],
        "params": {"seed": [None, 4]},
    }


def test_a_node_out_of_the_tree_is_refused_before_any_call(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel())
    trashed = play(engine_for(store, server), sid, "say", text="Hello.")
    pruned = play(engine_for(store, server), sid, "reroll")
    assert trashed.node is not None and pruned.node is not None
    store.edit(sid, Delete(node_id=trashed.node.id))
    store.edit(sid, Prune(node_id=pruned.node.id))
    calls, version = len(server.requests), store.session(sid).version
    for node, says in ((trashed.node.id, "the trash"), (pruned.node.id, "a pruned fragment")):
        for changes in (ReplayChanges(params={"seed": 1}), ReplayChanges(note="Rain.")):
            with pytest.raises(TurnError, match=f"node {node} is in {says}"):
                replayed(engine_for(store, server), sid, node, changes)
    assert len(server.requests) == calls  # neither the model nor the extraction asked
    assert store.session(sid).version == version


def test_an_extraction_that_fails_is_a_warning_as_a_turns_is(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(ByModel([NOTHING, "not json", "not json either"]))
    first = play(engine_for(store, server), sid, "say", text="Hello.")
    assert first.node is not None
    [result] = replayed(
        engine_for(store, server), sid, first.node.id, ReplayChanges(params={"seed": 2})
    )
    assert result.node is not None and not result.node.delta
    assert [w for w in result.warnings if w.startswith("the world state was not updated")]
