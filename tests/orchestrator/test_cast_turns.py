"""A cast of several in one story: who speaks, the reply named for its speaker, the
refusals, and each character's prompt holding only what it witnessed (SQLite and
PostgreSQL, the model a real server on loopback)."""

from __future__ import annotations

import asyncio
import json
import os
import random
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import Store
from orchestrator import (
    NARRATOR,
    Character,
    Engine,
    ModelConfig,
    TurnError,
    TurnRequest,
    TurnResult,
    TurnSetup,
    build_engine,
)
from orchestrator.loopback import ModelServer, Received
from prompts import FRAMING
from tests._cast import Voices, chat

CAST = (
    Character(name="Ann", description="A ranger with a bent bow.", talkativeness=0.0),
    Character(name="Bram", description="A smith who hums.", talkativeness=0.0),
    Character(name="Cora", description="A thief, quiet.", talkativeness=0.0),
    Character(name="Dag", description="An old priest.", talkativeness=0.0),
)


def engine_for(
    store: Store, server: ModelServer, cast: tuple[Character, ...] = CAST, **setup: Any
) -> Engine:
    model = ModelConfig("openai/gm", api_base=server.url, retries=0)
    turn_setup = TurnSetup(model=model, character=cast[0], cast=cast, extract=False, **setup)
    return build_engine(store, turn_setup, rng=random.Random(3))


def play(
    engine: Engine, sid: str, kind: str, tokens: list[str] | None = None, **kwargs: Any
) -> TurnResult:
    def on_event(kind: str, text: str) -> None:
        if tokens is not None and kind == "token":
            tokens.append(text)

    async def turn() -> TurnResult:
        try:
            request = TurnRequest(kind, **kwargs)  # type: ignore[arg-type]
            return await engine.run(sid, request, on_event)
        finally:
            await engine.aclose()

    return asyncio.run(turn())


def scene(store: Store, sid: str, name: str, move: str, op: dict[str, Any]) -> str:
    """A scene change as clotho.cast.scene_change commits it."""
    node, _ = store.append(sid, "system", f"{name} {move} the scene.", delta=[op])
    return node.id


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session().id


def test_a_named_speaker_replies_as_itself_and_the_node_carries_its_name(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    result = play(engine, sid, "say", text="Who forged this?", speaker="bram")
    assert result.node is not None and result.node.name == "Bram"
    assert result.user_node is not None and result.user_node.name == "Player"
    system = "\n".join(m["content"] for m in chat(server)[0].messages if m["role"] == "system")
    assert "About Bram:\nA smith who hums." in system
    assert "About Ann:" not in system
    # the system part casts the model as its speaker, not as a game master of everyone
    assert "You play Bram in a text role-playing game" in system
    assert "play every character" not in system

    # a reply: no message of the player's, appended at HEAD, named for its speaker
    reply = play(engine, sid, "reply", speaker="Cora")
    assert reply.user_node is None and reply.node is not None
    assert reply.node.parent_id == result.node.id and reply.node.name == "Cora"
    assert [entry.action for entry in store.history(sid)][-1] == "reply"

    # a reroll keeps its speaker; another one named is refused
    again = play(engine, sid, "reroll")
    assert again.node is not None and again.node.name == "Cora"
    with pytest.raises(TurnError, match="keeps its speaker"):
        play(engine, sid, "reroll", speaker="Dag")
    # so does a continue; an impersonation is the player's line: the cast part says
    # who is present, and voices no one
    more = play(engine, sid, "continue")
    assert more.node is not None and more.node.name == "Cora"
    assert more.node.content.startswith(again.node.content)
    draft = play(engine, sid, "impersonate")
    assert draft.node is None and draft.text
    head = "\n".join(contents(chat(server)[-1])[:4])
    assert "You voice every character" not in head and "Write only" not in head
    assert "In the scene:\n- Ann: A ranger with a bent bow." in head
    assert "- Dag: An old priest." in head
    assert "Write Player's next message" in contents(chat(server)[-1])[-1]
    assert "game master" in head  # the player's line: the game master's system prompt


def test_a_preview_is_the_prompt_of_the_speaker_named(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    play(engine, sid, "say", text="Hello.", speaker="Ann")
    scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Cora"]})
    play(engine, sid, "say", text="A secret.", speaker="Cora")
    scene(store, sid, "Bram", "joins", {"op": "append", "path": "present", "value": "Bram"})

    async def preview(speaker: str) -> Any:
        try:
            return await engine.preview_prompt(sid, "Well?", speaker=speaker)
        finally:
            await engine.aclose()

    bram, ann = asyncio.run(preview("Bram")), asyncio.run(preview("Ann"))
    assert bram.messages < ann.messages  # Bram's history leaves out what he did not see
    assert len(chat(server)) == 2  # no model call
    with pytest.raises(TurnError, match="no member of the cast is named 'Eve'"):
        asyncio.run(preview("Eve"))


def test_turns_a_speaker_cannot_take_are_refused_and_store_nothing(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    muted = (*CAST[:3], Character(name="Dag", muted=True))
    engine = engine_for(store, server, muted)
    with pytest.raises(TurnError, match="is empty"):
        play(engine, sid, "reply", speaker="Ann")
    play(engine, sid, "say", text="Hello.", speaker="Ann")
    scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Cora"]})
    version = store.session(sid).version
    with pytest.raises(TurnError, match=r"no member of the cast is named 'Eve'.*Ann, Bram"):
        play(engine, sid, "say", text="Eve?", speaker="Eve")
    with pytest.raises(TurnError, match="Dag is muted"):
        play(engine, sid, "reply", speaker="Dag")
    with pytest.raises(TurnError, match=r"Bram is not in the scene \(present: Ann, Cora\)"):
        play(engine, sid, "say", text="Bram?", speaker="Bram")
    assert store.session(sid).version == version
    assert len(chat(server)) == 1


def test_next_speakers_follow_the_order_and_who_is_present(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    assert engine.next_speakers(sid, "Dag and ann, listen.") == ["Dag", "Ann"]
    play(engine, sid, "say", text="Dag?", speaker="Dag")
    scene(store, sid, "Ann", "leaves", {"op": "set", "path": "present", "value": ["Bram", "Dag"]})
    assert engine.next_speakers(sid, "Ann and Bram, listen.") == ["Bram"]
    # with no message, the one who spoke last does not answer again
    talkative = tuple(Character(name=c.name, talkativeness=1.0) for c in CAST)
    assert engine_for(store, server, talkative).next_speakers(sid) == ["Bram"]
    robin = engine_for(store, server, speaker_order="round_robin")
    assert robin.next_speakers(sid) == ["Bram"]  # after Dag, Ann is away: Bram
    assert engine_for(store, server, speaker_order="narrator").next_speakers(sid) == [NARRATOR]
    assert engine_for(store, server, speaker_order="manual").next_speakers(sid) == ["Bram"]
    lone = engine_for(store, server, (CAST[0],))
    assert lone.next_speakers(sid, "Bram?") == ["Ann"]
    # with no speaker named, the first of them answers
    result = play(robin, sid, "say", text="Anyone?")
    assert result.node is not None and result.node.name == "Bram"


def contents(request: Received) -> list[str]:
    return [m["content"] for m in request.messages]


def test_a_character_who_left_does_not_see_what_happened_while_it_was_away(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    engine = engine_for(store, server)
    play(engine, sid, "say", text="We camp by the river.", speaker="Ann")  # Line 1.
    leave = scene(
        store,
        sid,
        "Bram",
        "leaves",
        {"op": "set", "path": "present", "value": ["Ann", "Cora", "Dag"]},
    )
    secret = play(engine, sid, "say", text="Cora, the gold is under the stone.", speaker="Cora")
    assert secret.user_node is not None and secret.node is not None
    scene(store, sid, "Bram", "joins", {"op": "append", "path": "present", "value": "Bram"})
    bram = play(engine, sid, "say", text="Welcome back, Bram.", speaker="Bram")
    assert bram.node is not None and bram.node.name == "Bram"

    seen = contents(chat(server)[-1])
    assert "Bram leaves the scene." in seen and "Bram joins the scene." in seen
    assert "Cora, the gold is under the stone." not in seen
    assert "Cora: Line 2." not in seen
    assert "(Bram was away and did not see what happened here.)" in seen
    assert seen.index("Bram leaves the scene.") < seen.index("Bram joins the scene.")
    assert "Ann: Line 1." in seen  # replies go with their speaker's name
    cast = next(m for m in seen if m.startswith("This story has several characters."))
    assert "Write only Bram's next reply" in cast
    assert "- Ann: A ranger with a bent bow." in cast and "- Cora: A thief, quiet." in cast

    trace = store.trace(sid, bram.node.id)
    assert trace is not None and trace.verified
    assert trace.messages == chat(server)[-1].messages
    assert trace.document["scene"] == {
        "speaker": "Bram",
        "present": ["Ann", "Bram", "Cora", "Dag"],
        "left_out": [{"first": secret.user_node.id, "last": secret.node.id, "count": 2}],
        "lore_left_out": [],
    }
    assert all(part.get("named") for part in trace.parts if "run" in part)
    assert {"character", "cast", "away"} <= set(trace.document["templates"])

    # Ann stayed: she saw everything
    ann = play(engine, sid, "reply", speaker="Ann")
    seen = contents(chat(server)[-1])
    assert "Cora, the gold is under the stone." in seen and "Cora: Line 2." in seen
    assert not any("was away" in text for text in seen)
    ann_trace = store.trace(sid, ann.node.id)  # type: ignore[union-attr]
    assert ann_trace is not None and ann_trace.verified
    assert ann_trace.document["scene"]["left_out"] == []

    # rolled back across the leave: Bram's prompt has everything again
    store.checkout(sid, store.node(sid, leave).parent_id)  # type: ignore[arg-type]
    assert store.state(sid).present is None
    again = play(engine, sid, "say", text="Bram, what do you know?", speaker="Bram")
    seen = contents(chat(server)[-1])
    assert "Ann: Line 1." in seen and not any("was away" in text for text in seen)
    trace = store.trace(sid, again.node.id)  # type: ignore[union-attr]
    assert trace is not None and trace.verified and trace.document["scene"]["left_out"] == []


def test_the_narrator_sees_everything_and_a_speaker_prefix_is_stripped(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    lines = iter(["Cora: I say nothing.", "Narrator: The fire crackles."])

    def script(request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        return next(lines)

    server = serve(script)
    engine = engine_for(store, server)
    shown: list[str] = []
    cora = play(engine, sid, "say", shown, text="Cora?", speaker="Cora")
    assert cora.node is not None and cora.node.content == "I say nothing."
    assert "".join(shown) == "I say nothing."  # shown as stored
    scene(store, sid, "Cora", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Dag"]})
    narrator = play(engine_for(store, server, speaker_order="narrator"), sid, "say", text="Well?")
    assert narrator.node is not None and narrator.node.name == NARRATOR
    assert narrator.node.content == "The fire crackles."
    seen = contents(chat(server)[-1])
    assert "Cora: I say nothing." in seen  # no scoping for the narrator
    head = "\n".join(seen[:3])
    assert "You voice every character in the scene" in head
    assert "- Ann: A ranger" in head and "- Dag: An old priest." in head
    assert "Cora: A thief" not in head  # absent: not in the scene's list
    trace = store.trace(sid, narrator.node.id)
    assert trace is not None and trace.verified
    assert trace.document["scene"]["present"] == ["Ann", "Dag"]


def test_one_character_prompts_are_as_before(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    alone = engine_for(store, server, (CAST[0],))
    result = play(alone, sid, "say", text="Hello.")
    plain = build_engine(
        store,
        TurnSetup(
            model=ModelConfig("openai/gm", api_base=server.url, retries=0),
            character=CAST[0],
            extract=False,
        ),
    )
    play(plain, sid, "reroll")
    first, second = chat(server)
    assert first.messages == second.messages
    assert "several characters" not in json.dumps(first.messages)
    trace = store.trace(sid, result.node.id)  # type: ignore[union-attr]
    assert trace is not None and "scene" not in trace.document
    assert all("named" not in part for part in trace.parts)


def test_lore_of_an_absent_characters_own_book_does_not_play(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    from planner.lore import LorePlanner
    from planner.lorebook import parse_world_info

    def book(name: str, text: str) -> Any:
        entry = {"uid": 0, "key": [], "constant": True, "position": 1, "content": text}
        return parse_world_info({"entries": {"0": entry}}, name)

    books = [book("forge", "Bram's forge is cold."), book("world", "It rains in Dunmere.")]
    cast = (CAST[0], Character(name="Bram", description="A smith.", books=("forge",)), CAST[2])
    server = serve(Voices())
    setup = TurnSetup(
        model=ModelConfig("openai/gm", api_base=server.url, retries=0),
        character=cast[0],
        cast=cast,
        extract=False,
    )
    engine = build_engine(store, setup, planner=lambda call: LorePlanner(books, seed=1))
    play(engine, sid, "say", text="Hello.", speaker="Ann")
    assert "Bram's forge is cold." in json.dumps(chat(server)[-1].messages)
    scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Cora"]})
    result = play(engine, sid, "say", text="Where is he?", speaker="Ann")
    sent = json.dumps(chat(server)[-1].messages)
    assert "Bram's forge is cold." not in sent and "It rains in Dunmere." in sent
    trace = store.trace(sid, result.node.id)  # type: ignore[union-attr]
    assert trace is not None
    assert trace.document["scene"]["lore_left_out"] == [
        {"id": "forge:0", "book": "forge", "owners": ["Bram"], "reason": "absent: Bram"}
    ]
    assert [hit["id"] for hit in trace.document["lore"]] == ["world:0"]
    assert store.state(sid).active_lore_ids == ["world:0"]


def summarised(request: dict[str, Any]) -> bool:
    return str(request["messages"][0]["content"]).startswith("Summarise the story")


@pytest.mark.parametrize("away_from", [27, 1])
def test_a_summary_stands_in_only_for_what_the_speaker_saw(
    store: Store, sid: str, serve: Callable[..., ModelServer], away_from: int
) -> None:
    def script(request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        return "SUMMARY: a long walk." if summarised(request) else "The road ends."

    duo = (CAST[0], CAST[1])
    for i in range(30):
        if i == away_from:
            scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann"]})
        if i == away_from + 2:
            scene(store, sid, "Bram", "joins", {"op": "append", "path": "present", "value": "Bram"})
        store.append(sid, "user", f"I walk further down the long road, step {i}, looking around.")
        store.append(sid, "assistant", f"The road goes on; milestone {i} passes.", name="Ann")
    server = serve(script)
    model = ModelConfig(
        "openai/gm", api_base=server.url, retries=0, context_window=700, reply_tokens=100
    )
    setup = TurnSetup(model=model, character=duo[0], cast=duo, extract=False)
    result = play(build_engine(store, setup), sid, "say", text="Bram?", speaker="Bram")
    sent = json.dumps([r.json["messages"] for r in server.requests if not summarised(r.json)])
    trace = store.trace(sid, result.node.id)  # type: ignore[union-attr]
    assert trace is not None and trace.verified
    assert trace.document["trimmed"]["dropped"] > 0
    summaries = [r for r in server.requests if summarised(r.json)]
    if away_from == 27:  # what was trimmed is all before Bram left: summarised
        told = summaries[0].json["messages"][0]["content"]
        assert "step 0," in told
        assert "Ann: The road goes on; milestone 0 passes." in told  # who said it
        assert "step 27," not in json.dumps([r.json for r in summaries])
        assert "The story so far" in sent
        assert store.state(sid).summary.startswith("SUMMARY")
    else:  # Bram was away early on: the story's summary would tell him what he missed
        assert summaries == [] and "The story so far" not in sent
        assert "skipped" in trace.document["trimmed"]["summary"]
        assert store.state(sid).summary == ""


def test_a_campaign_may_have_what_a_character_missed_recapped(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    def recap(request: dict[str, Any]) -> bool:
        return str(request["messages"][0]["content"]).startswith("Bram was away from the scene")

    def script(request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        return "Cora hid the gold." if recap(request) else "Hm."

    server = serve(script)
    engine = engine_for(store, server, recap_missed=True)
    play(engine, sid, "say", text="Hello.", speaker="Ann")
    scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann", "Cora"]})
    play(engine, sid, "say", text="Cora, hide the gold under the stone.", speaker="Cora")
    scene(store, sid, "Bram", "joins", {"op": "append", "path": "present", "value": "Bram"})
    first = play(engine, sid, "say", text="Bram, anything new?", speaker="Bram")
    asked = [r for r in server.requests if recap(r.json)]
    assert len(asked) == 1
    told = asked[0].json["messages"][0]["content"]
    assert "Player: Cora, hide the gold under the stone." in told and "Cora: Hm." in told
    assert "Hello." not in told  # only the run Bram missed
    seen = contents(chat(server)[-1])
    assert (
        "(Bram was away and did not see what happened here. "
        "What Bram was told of it since: Cora hid the gold.)"
    ) in seen
    assert "Cora, hide the gold under the stone." not in seen
    trace = store.trace(sid, first.node.id)  # type: ignore[union-attr]
    assert trace is not None and trace.verified
    assert trace.document["scene"]["recaps"][0]["output"] == "Cora hid the gold."
    assert "recap" in trace.document["templates"]
    # the next turn of Bram's reuses it
    again = play(engine, sid, "reply", speaker="Bram")
    assert len([r for r in server.requests if recap(r.json)]) == 1
    trace = store.trace(sid, again.node.id)  # type: ignore[union-attr]
    assert trace is not None and "recaps" not in trace.document["scene"]
    assert any("Cora hid the gold." in text for text in contents(chat(server)[-1]))
    # so does a new engine (the terminal makes one per command): the recaps Bram was
    # given are kept on his reply
    assert again.node is not None and again.node.metadata["recaps"] == [
        {"covers": trace.document["scene"]["left_out"][0], "recap": "Cora hid the gold."}
    ]
    play(engine_for(store, server, recap_missed=True), sid, "reply", speaker="Bram")
    assert len([r for r in server.requests if recap(r.json)]) == 1
    assert any("Cora hid the gold." in text for text in contents(chat(server)[-1]))


def test_a_prompt_with_named_replies_fits_the_window(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    long = (
        Character(name="Annabel Quenneville of the Northern Marches"),
        Character(name="Bram Ironhand the Elder of Greyhollow Forge"),
    )
    for i in range(40):
        store.append(sid, "user", f"Go on, {i}.")
        store.append(sid, "assistant", f"Yes {i}.", name=long[i % 2].name)
    server = serve(Voices())

    def engine(window: int) -> Engine:
        model = ModelConfig(
            "openai/gm", api_base=server.url, retries=0, context_window=window, reply_tokens=100
        )
        return build_engine(store, TurnSetup(model=model, character=long[0], cast=long))

    def used(engine: Engine) -> int:
        count = engine.gateway.counter(engine.setup.model)
        return sum(count(m["content"]) + FRAMING for m in chat(server)[-1].messages)

    async def preview(engine: Engine) -> Any:
        try:
            return await engine.preview_prompt(sid, "And?", speaker=long[1].name)
        finally:
            await engine.aclose()

    # nothing trimmed: the preview counts what the turn sends, names and all
    roomy = engine(20_000)
    measured = asyncio.run(preview(roomy))
    play(roomy, sid, "say", text="And?", speaker=long[1].name)
    assert measured.trimmed == 0 and measured.used == used(roomy)
    assert "Bram Ironhand the Elder of Greyhollow Forge: Yes 39." in contents(chat(server)[-1])

    tight = engine(600)
    play(tight, sid, "say", text="And then?", speaker=long[0].name)
    assert used(tight) <= 600 - 100  # counted as sent: with the speakers' names


def test_a_summary_past_what_the_speaker_saw_is_left_as_it_is(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    def script(request: dict[str, Any]) -> str:
        if "response_format" in request:
            return json.dumps({"operations": []})
        return "SUMMARY: shorter." if summarised(request) else "The road ends."

    duo = (CAST[0], CAST[1])
    missed = ""
    for i in range(30):
        if i == 20:
            scene(store, sid, "Bram", "leaves", {"op": "set", "path": "present", "value": ["Ann"]})
        if i == 23:
            scene(store, sid, "Bram", "joins", {"op": "append", "path": "present", "value": "Bram"})
        user, _ = store.append(sid, "user", f"I walk further down the long road, step {i}.")
        missed = user.id if i == 21 else missed
        summary = [{"op": "set", "path": "summary", "value": "SUMMARY: up to 21."}]
        store.append(
            sid,
            "assistant",
            f"The road goes on; milestone {i} passes.",
            name="Ann",
            # Ann's turn summarised the story through a message Bram did not see
            metadata={"summary_through": missed} if i == 25 else None,
            delta=summary if i == 25 else None,
        )
    server = serve(script)
    model = ModelConfig(
        "openai/gm", api_base=server.url, retries=0, context_window=700, reply_tokens=100
    )
    setup = TurnSetup(model=model, character=duo[0], cast=duo, extract=False)
    result = play(build_engine(store, setup), sid, "say", text="Bram?", speaker="Bram")
    trace = store.trace(sid, result.node.id)  # type: ignore[union-attr]
    assert trace is not None and trace.document["trimmed"]["dropped"] > 0
    assert [r for r in server.requests if summarised(r.json)] == []  # no new summary
    assert "skipped" in trace.document["trimmed"]["summary"]
    assert store.state(sid).summary == "SUMMARY: up to 21."  # the story's, as it was
    assert "SUMMARY" not in json.dumps(chat(server)[-1].messages)  # Bram is not told it


class Reads(Store):
    """The real store, recording what a turn reads of it (method and node)."""

    reads: list[tuple[str, str | None]]

    def node(self, session_id: str, ref: str) -> Any:
        self.reads.append(("node", ref))
        return super().node(session_id, ref)

    def state(self, session_id: str, at: str | None = None) -> Any:
        self.reads.append(("state", at))
        return super().state(session_id, at)

    def messages(self, session_id: str, at: str | None = None) -> Any:
        self.reads.append(("messages", at))
        return super().messages(session_id, at)


def test_a_turn_reads_its_node_and_state_once(
    database_url: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Voices())
    with Reads.open(database_url, migrate=True) as store:
        store.reads = []
        sid = store.create_session().id
        engine = engine_for(store, server, speaker_order="round_robin")
        said = play(engine, sid, "say", text="Hello.")
        assert said.node is not None and said.user_node is not None
        for kind in ("say", "reroll", "continue", "reply"):
            store.reads.clear()
            head = store.session(sid).head_id
            play(engine, sid, kind, **({"text": "And?"} if kind == "say" else {}))
            assert [r for r in store.reads if r[0] == "messages"] == []  # no copy of the path
            assert [r for r in store.reads if r[0] == "node"] == (
                [("node", head)] if kind in ("reroll", "continue") else []
            )
            parent = store.node(sid, head).parent_id if kind == "reroll" else head
            assert store.reads.count(("state", parent)) == 1, kind
