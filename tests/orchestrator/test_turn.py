"""One turn, end to end: the engine against a real OpenAI-compatible server on loopback,
committing to SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import Store, schema_from_mapping
from orchestrator import (
    Character,
    Engine,
    ModelConfig,
    ModelError,
    TurnError,
    TurnRequest,
    TurnResult,
    TurnSetup,
    build_engine,
)
from orchestrator.loopback import ModelServer, Received, Reply
from prompts import TemplateError, Templates

SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
        }
    }
)
FAST = {"retry-after-ms": "1"}  # SDK retries without waiting


def delta(*operations: dict[str, Any]) -> str:
    return json.dumps({"operations": list(operations)})


HIT = delta({"op": "inc", "path": "hp", "value": -10})
NOTHING = delta()


class Scripted:
    """A game master: story replies from ``story``, extraction answers from ``deltas``."""

    def __init__(self, story: list[Reply | str], deltas: list[str] | None = None) -> None:
        self.story = list(story)
        self.deltas = list(deltas or [])
        self.summaries: list[str] = []

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            return self.deltas.pop(0) if self.deltas else NOTHING
        first = request["messages"][0]["content"]
        if first.startswith("Summarise the story"):
            self.summaries.append(first)
            return f"SUMMARY {len(self.summaries)}: the hero walked a long way."
        return self.story.pop(0)


def chat(server: ModelServer) -> list[Received]:
    """The requests for story replies (not extraction, not summaries)."""
    return [
        r
        for r in server.requests
        if "response_format" not in r.json
        and not r.messages[0]["content"].startswith("Summarise the story")
    ]


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def engine_for(store: Store, server: ModelServer, **setup: Any) -> Engine:
    model = ModelConfig(
        "openai/gm",
        api_base=server.url,
        retries=setup.pop("retries", 2),
        context_window=setup.pop("context_window", None),
        reply_tokens=setup.pop("reply_tokens", 1024),
    )
    return build_engine(store, TurnSetup(model=model, **setup))


def play(
    engine: Engine, sid: str, kind: str, events: list[tuple[str, str]] | None = None, **kwargs: Any
) -> TurnResult:
    def on_event(kind: str, text: str) -> None:
        if events is not None:
            events.append((kind, text))

    async def turn() -> TurnResult:
        try:
            return await engine.run(sid, TurnRequest(kind, **kwargs), on_event)  # type: ignore[arg-type]
        finally:
            await engine.aclose()

    return asyncio.run(turn())


def test_a_turn_streams_commits_and_traces_what_was_sent(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    gm = Scripted(
        [Reply("A goblin slashes your arm.\nIt grins.", reasoning="The player is reckless.")],
        [HIT],
    )
    server = serve(gm)
    events: list[tuple[str, str]] = []
    result = play(engine_for(store, server), sid, "say", events, text="I enter the cave.")

    tokens = "".join(text for kind, text in events if kind == "token")
    assert tokens == result.node.content == "A goblin slashes your arm.\nIt grins."
    assert "".join(text for kind, text in events if kind == "reasoning") == (
        "The player is reckless."
    )
    assert result.user_node is not None and result.user_node.content == "I enter the cave."
    assert result.node.parent_id == result.user_node.id
    assert result.node.delta == [{"op": "inc", "path": "hp", "value": -10}]
    assert result.node.metadata["reasoning"] == "The player is reckless."
    assert result.node.metadata["usage"]["completion_tokens"] > 0
    assert store.session(sid).head_id == result.node.id
    assert store.state(sid).variables == {"hp": 90, "gold": 10}

    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified
    sent = chat(server)[0]
    assert trace.messages == json.loads(sent.body)["messages"]  # what the server received
    for message in trace.messages:  # byte for byte, as the client encoded it
        assert json.dumps(message["content"]).encode() in sent.body
    assert trace.messages[-1] == {"role": "user", "content": "I enter the cave."}
    assert trace.document["postprocess"]["ok"] is True
    assert trace.document["delta"] == result.node.delta
    assert {"system", "extract"} <= set(trace.document["templates"])
    assert trace.document["planner"]["strategy"] == "rules"


def test_reroll_is_a_sibling_and_gives_the_state_back(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["The goblin cuts you.", "The goblin misses."], [HIT, NOTHING]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="I attack.")
    assert store.state(sid).variables["hp"] == 90
    second = play(engine, sid, "reroll")
    assert second.node.parent_id == first.node.parent_id
    assert second.user_node is None
    assert store.state(sid).variables["hp"] == 100
    assert [n.id for n in store.children(sid, first.node.parent_id)] == [
        first.node.id,
        second.node.id,
    ]
    # the rerolled prompt is the first one's: same history, same parts
    requests = chat(server)
    assert requests[1].messages == requests[0].messages
    store.switch_sibling(sid, "prev")
    assert store.state(sid).variables["hp"] == 90


def test_edit_forks_the_players_message_and_keeps_the_old_timeline(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["You fight.", "You run away, unharmed."], [HIT, NOTHING]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="I fight.")
    assert first.user_node is not None
    edited = play(engine, sid, "edit", node=first.user_node.id, text="I run.")
    assert edited.user_node is not None
    assert edited.user_node.parent_id == first.user_node.parent_id
    assert [m.content for m in store.messages(sid)] == ["I run.", "You run away, unharmed."]
    assert store.state(sid).variables["hp"] == 100
    assert store.node(sid, first.node.id).content == "You fight."  # the old timeline
    assert chat(server)[1].messages[-1] == {"role": "user", "content": "I run."}


def test_continue_extends_the_reply_and_impersonate_stores_nothing(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(
        Scripted(["The door creaks.", " Then silence.", "I knock twice."], [HIT, NOTHING])
    )
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="I wait.")
    events: list[tuple[str, str]] = []
    more = play(engine, sid, "continue", events)
    # one reply, extended: an alternative of the old one holding the whole text
    assert "".join(text for kind, text in events if kind == "token") == " Then silence."
    assert more.node.content == "The door creaks. Then silence." and more.user_node is None
    assert more.node.parent_id == first.node.parent_id
    assert store.turn(sid, more.node.id).siblings == [first.node.id, more.node.id]
    assert [m.content for m in store.messages(sid)] == ["I wait.", more.node.content]
    assert more.node.metadata["continues"] == first.node.id
    assert more.node.delta == first.node.delta  # the old reply's delta, then its own (none)
    assert store.state(sid).variables["hp"] == 90
    trace = store.trace(sid, more.node.id)
    assert trace is not None and trace.verified and trace.document["continues"] == first.node.id
    assert chat(server)[1].messages[-2:] == [
        {"role": "assistant", "content": "The door creaks."},
        {"role": "system", "content": chat(server)[1].messages[-1]["content"]},
    ]
    assert "Continue the scene" in chat(server)[1].messages[-1]["content"]
    extraction_requests = len(server.requests) - len(chat(server))
    before = store.session(sid)
    player = play(engine, sid, "impersonate")
    assert player.node is None and player.text == "I knock twice."
    assert store.session(sid) == before  # nothing stored
    assert "Player's next message" in chat(server)[2].messages[-1]["content"]
    # the player's own line changes no state: no extraction call for it
    assert len(server.requests) - len(chat(server)) == extraction_requests
    # undo takes the continuation back: the reply as it was, HEAD on it
    store.undo(sid)
    assert store.session(sid).head_id == first.node.id
    assert [top.id for top, *_ in store.trash(sid)] == [more.node.id]


def test_a_turn_is_one_undo_step_and_edits_before_it_stay(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    from mnemosyne.edits import Rewrite

    server = serve(Scripted(["Welcome.", "The goblin bites.", "It misses."], [NOTHING, HIT]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="Hi.")
    store.edit(sid, Rewrite(node_id=first.node.id, content="Welcome, traveller."))
    second = play(engine, sid, "say", text="I attack.")
    third = play(engine, sid, "reroll")
    assert [e.action for e in store.history(sid)] == ["say", "rewrite", "say", "reroll"]
    store.undo(sid)  # the reroll: back to the reply it was an alternative of
    assert store.session(sid).head_id == second.node.id and store.state(sid).variables["hp"] == 90
    store.undo(sid)  # the say: its message and reply to the trash
    assert store.session(sid).head_id == first.node.id
    assert store.state(sid).variables["hp"] == 100
    assert second.user_node is not None
    assert {top.id for top, *_ in store.trash(sid)} == {second.user_node.id, third.node.id}
    store.undo(sid)  # the rewrite before the turns
    assert store.node(sid, first.node.id).content == "Welcome."
    for _ in range(3):
        store.redo(sid)
    assert store.session(sid).head_id == third.node.id and store.trash(sid) == []
    assert store.node(sid, first.node.id).content == "Welcome, traveller."


def test_a_rate_limit_is_retried(store: Store, sid: str, serve: Callable[..., ModelServer]) -> None:
    server = serve(Scripted([Reply(status=429, error="Rate limit reached", headers=FAST), "Ok."]))
    result = play(engine_for(store, server), sid, "say", text="Hello?")
    assert result.node.content == "Ok."
    assert len(chat(server)) == 2


def test_a_server_error_after_the_last_retry_stores_nothing(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    play(engine_for(store, serve(Scripted(["Welcome."]))), sid, "say", text="Hi.")
    before = store.session(sid)
    failure = Reply(status=500, error="The server had an error", headers=FAST)
    server = serve(Scripted([failure, failure, failure]))
    with pytest.raises(ModelError, match=r"failed .*after 3 attempts") as raised:
        play(engine_for(store, server), sid, "say", text="Anyone?")
    assert raised.value.kind == "server"
    assert len(chat(server)) == 3
    assert store.session(sid) == before
    assert [m.content for m in store.messages(sid)] == ["Hi.", "Welcome."]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply(status=401, error="Incorrect API key provided"), "auth"),
        (Reply(status=404, error="The model `gm` does not exist"), "not_found"),
        (
            Reply(
                status=400,
                error="This model's maximum context length is 10 tokens. "
                "However, your messages resulted in 99 tokens.",
                error_code="context_length_exceeded",
            ),
            "context_window",
        ),
    ],
)
def test_provider_errors_become_messages_a_player_understands(
    store: Store, sid: str, serve: Callable[..., ModelServer], reply: Reply, kind: str
) -> None:
    server = serve(Scripted([reply]))
    with pytest.raises(ModelError) as raised:
        play(engine_for(store, server), sid, "say", text="Hi.")
    assert raised.value.kind == kind
    assert len(chat(server)) == 1  # not retried: a retry cannot fix it
    assert store.session(sid).head_id is None


def test_a_stream_cut_mid_reply_keeps_the_text_marked_incomplete(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted([Reply("The dragon opens its mouth and speaks at last.", cut_after=4)]))
    events: list[tuple[str, str]] = []
    result = play(engine_for(store, server), sid, "say", events, text="Speak!")
    assert result.node.content == "The dragon opens its "
    assert result.node.metadata["incomplete"] is True
    assert "broke off" in result.node.metadata["stopped_by"]
    assert result.node.delta == []
    assert len(server.requests) == 1  # no extraction for a partial reply
    assert any(kind == "warning" for kind, _ in events) and result.warnings
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified and trace.document["incomplete"] is True


def test_interrupting_the_stream_keeps_the_partial_reply(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    long = " ".join(f"word{i}" for i in range(200))
    server = serve(Scripted([Reply(long, chunk_delay=0.01)]))
    engine = engine_for(store, server)
    seen: list[str] = []

    def on_event(kind: str, text: str) -> None:
        if kind == "token":
            seen.append(text)
            if len(seen) == 3:
                engine.interrupt()  # what Ctrl+C does

    async def turn() -> TurnResult:
        try:
            return await engine.run(sid, TurnRequest("say", text="Go on."), on_event)
        finally:
            await engine.aclose()

    result = asyncio.run(turn())
    assert result.node.content.startswith("word0 word1 word2")
    assert len(result.node.content) < len(long)
    assert result.node.metadata["incomplete"] is True
    assert result.node.metadata["stopped_by"] == "interrupted by the player"
    assert result.node.delta == []


def test_an_invalid_delta_is_retried_once_with_the_error(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    bad = delta({"op": "inc", "path": "gold", "value": -50})  # gold refuses to go below 0
    server = serve(
        Scripted(["You pay the smith."], [bad, delta({"op": "inc", "path": "gold", "value": -10})])
    )
    result = play(engine_for(store, server), sid, "say", text="I buy a sword.")
    assert result.node.delta == [{"op": "inc", "path": "gold", "value": -10}]
    assert store.state(sid).variables["gold"] == 0
    retry = [r for r in server.requests if "response_format" in r.json][1]
    assert (
        "gold" in retry.messages[-1]["content"]
        and "not a valid delta" in retry.messages[-1]["content"]
    )
    assert retry.json["response_format"]["type"] == "json_schema"
    trace = store.trace(sid, result.node.id)
    assert trace is not None
    attempts = trace.document["postprocess"]["attempts"]
    assert [a["error"] is None for a in attempts] == [False, True]


def test_an_invalid_delta_twice_keeps_the_reply_with_no_delta(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(
        Scripted(
            ["You find a chest."],
            ["not json at all", delta({"op": "set", "path": "mana", "value": 5})],
        )
    )
    events: list[tuple[str, str]] = []
    result = play(engine_for(store, server), sid, "say", events, text="I look around.")
    assert result.node.content == "You find a chest."
    assert result.node.delta == []
    assert "mana" in result.node.metadata["delta_error"]
    assert any("not updated" in text for kind, text in events if kind == "warning")
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.document["postprocess"]["ok"] is False
    assert store.state(sid).variables == {"hp": 100, "gold": 10}


def test_a_small_window_trims_old_messages_and_summarises_them(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    for i in range(30):
        store.append(sid, "user", f"I walk further down the long road, step {i}, looking around.")
        store.append(sid, "assistant", f"The road goes on and on; milestone {i} passes by.")
    gm = Scripted(["The road ends.", "A town appears."])
    server = serve(gm)
    engine = engine_for(store, server, context_window=700, reply_tokens=100)
    first = play(engine, sid, "say", text="I keep walking.")
    sent = chat(server)[0].messages
    assert len(sent) < 60  # old messages left the prompt
    assert any(m["content"].startswith("The story so far") for m in sent)
    assert len(gm.summaries) >= 1 and "step 0," in gm.summaries[0]
    state = store.state(sid)
    assert state.summary.startswith("SUMMARY")
    assert first.node.metadata["summary_through"]
    trace = store.trace(sid, first.node.id)
    assert trace is not None and trace.verified
    assert trace.document["trimmed"]["dropped"] > 0
    calls = len(gm.summaries)
    play(engine, sid, "say", text="I enter the town.")
    assert len(gm.summaries) == calls  # the next turn reuses the summary
    assert any(m["content"].startswith("The story so far") for m in chat(server)[1].messages)


def test_nothing_to_reroll_or_continue_is_refused(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted([]))
    engine = engine_for(store, server)
    with pytest.raises(TurnError, match="empty"):
        play(engine, sid, "continue")
    store.append(sid, "user", "Hello")
    with pytest.raises(TurnError, match="user message"):
        play(engine, sid, "reroll")
    with pytest.raises(TurnError, match="needs the text"):
        play(engine, sid, "say", text="  ")
    assert server.requests == []


def test_campaign_templates_and_card_macros(
    store: Store, sid: str, serve: Callable[..., ModelServer], tmp_path: Path
) -> None:
    (tmp_path / "system.j2").write_text("You run {{ title }} for {{ user }}.")
    server = serve(Scripted(["Hi."]))
    engine = engine_for(
        store,
        server,
        templates=Templates(tmp_path),
        title="The Cave",
        player="Tom",
        character=Character(name="Marla", description="{{char}} distrusts {{User}}."),
        extract=False,
    )
    result = play(engine, sid, "say", text="Hello.")
    sent = chat(server)[0].messages
    assert sent[0]["content"] == "You run The Cave for Tom."
    # the card's heading on a line of its own (the name was glued to the description)
    assert "About Marla:\nMarla distrusts Tom." in sent[1]["content"]
    trace = store.trace(sid, result.node.id)
    assert trace is not None
    assert trace.document["templates"]["system"]["origin"] == str(tmp_path / "system.j2")


def test_a_campaign_template_cannot_escape_the_sandbox(tmp_path: Path) -> None:
    (tmp_path / "system.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(TemplateError, match=r"system\.j2"):
        Templates(tmp_path).render("system", {})
    (tmp_path / "state.j2").write_text("{% for %}")
    with pytest.raises(TemplateError, match=r"state\.j2, line 1"):
        Templates(tmp_path).render("state", {})


def test_a_continuation_is_joined_as_written_but_for_a_new_sentence() -> None:
    from orchestrator.turn import joined

    assert joined("The dra", "gon wakes.") == "The dragon wakes."  # a word cut in two
    assert joined("It waits.", " Then it moves.") == "It waits. Then it moves."
    assert joined("It waits.", "Then it moves.") == "It waits. Then it moves."
    assert joined("It says:", '"Hello."') == 'It says: "Hello."'
    assert joined("你好。", "他说。") == "你好。他说。"  # no space in Chinese
    assert joined("Done", "") == "Done"
