"""Interrupting a turn keeps what the player typed or saw: the engine against a real
model server on loopback, committing to SQLite and PostgreSQL.

Each interrupt is sent once the model server has received the call it interrupts (or
once the engine reported the event), never after a fixed wait.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from mnemosyne import Store
from orchestrator import Engine, ModelError, TurnInterrupted, TurnRequest, TurnResult
from orchestrator.loopback import ModelServer, Reply

from .test_turn import HIT, SCHEMA, Scripted, chat, engine_for, play

#: Long enough that the interrupt always comes first; the call is cancelled, so the
#: test never waits for it.
HELD = 20.0


class Held(Scripted):
    """:class:`Scripted`, with the extraction call (``hold="extract"``) or the story
    call (``hold="story"``) held by the server; ``asked`` is set when it arrives."""

    def __init__(self, story: list[Reply | str], deltas: list[str], hold: str) -> None:
        super().__init__(story, deltas)
        self.hold = hold
        self.asked = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        answer = super().__call__(request)
        held = "extract" if "response_format" in request else "story"
        if held != self.hold:
            return answer
        self.asked.set()
        reply = Reply(content=answer) if isinstance(answer, str) else answer
        return Reply(reply.content, reasoning=reply.reasoning, delay=HELD)


@pytest.fixture
def sid(store: Store) -> str:
    return store.create_session(schema=SCHEMA).id


def run_interrupted(
    engine: Engine,
    sid: str,
    request: TurnRequest,
    when: threading.Event | None = None,
    events: list[tuple[str, str]] | None = None,
    on_event: Callable[[str, str], None] | None = None,
) -> TurnResult:
    """Play a turn and interrupt it (as Ctrl+C does) once ``when`` is set."""

    def record(kind: str, text: str) -> None:
        if events is not None:
            events.append((kind, text))
        if on_event is not None:
            on_event(kind, text)

    async def turn() -> TurnResult:
        playing = asyncio.ensure_future(engine.run(sid, request, record))
        try:
            if when is not None:
                await asyncio.to_thread(when.wait, 30)
                assert when.is_set(), "the model server never got the call"
                assert engine.interrupt()
            return await playing
        finally:
            await engine.aclose()

    return asyncio.run(turn())


def test_interrupting_the_extraction_keeps_the_reply_with_no_delta(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    script = Held(["Marla slashes your arm."], [HIT], hold="extract")
    server = serve(script)
    events: list[tuple[str, str]] = []
    result = run_interrupted(
        engine_for(store, server), sid, TurnRequest("say", "I attack."), script.asked, events
    )
    reply = result.node
    assert reply.content == "Marla slashes your arm."
    assert reply.delta == []
    assert "interrupted by the player" in reply.metadata["delta_error"]
    assert "incomplete" not in reply.metadata  # the reply itself is whole
    assert result.user_node is not None and result.user_node.content == "I attack."
    assert [m.content for m in store.messages(sid)] == ["I attack.", "Marla slashes your arm."]
    assert store.session(sid).head_id == reply.id
    assert store.state(sid).variables == {"hp": 100, "gold": 10}  # HIT never applied
    assert any("not updated" in text for kind, text in events if kind == "warning")
    assert any("not updated" in warning for warning in result.warnings)
    trace = store.trace(sid, reply.id)
    assert trace is not None and trace.verified
    post = trace.document["postprocess"]
    assert post["ok"] is False and "interrupted" in post["stopped"] and post["attempts"] == []
    assert post["messages"][-1]["content"].endswith("The game master: Marla slashes your arm.")


def test_a_failed_extraction_call_keeps_the_reply_with_no_delta(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    def script(request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            return Reply(status=500, error="The extractor is down")
        return "You find a chest."

    result = play(engine_for(store, serve(script), retries=0), sid, "say", text="I look.")
    assert result.node.content == "You find a chest."
    assert result.node.delta == []
    assert "extraction call failed" in result.node.metadata["delta_error"]
    assert [m.content for m in store.messages(sid)] == ["I look.", "You find a chest."]


@pytest.mark.parametrize("where", ["waiting for the model", "while it only reasons"])
def test_an_interrupt_before_the_first_word_keeps_only_the_players_message(
    store: Store, sid: str, serve: Callable[..., ModelServer], where: str
) -> None:
    play(engine_for(store, serve(Scripted(["Welcome."]))), sid, "say", text="Hi.")
    before = store.session(sid).head_id
    if where == "waiting for the model":
        script: Scripted = Held(["Never seen."], [], hold="story")
        server = serve(script)
        engine = engine_for(store, server)
        when: threading.Event | None = script.asked
        on_event = None
    else:
        thinking = " ".join(f"thought{i}" for i in range(300))
        server = serve(Scripted([Reply("Never seen.", reasoning=thinking, chunk_delay=0.01)]))
        engine = engine_for(store, server)
        when = None

        def on_event(kind: str, text: str) -> None:
            if kind == "reasoning":
                engine.interrupt()

    with pytest.raises(TurnInterrupted, match="before the reply began") as raised:
        run_interrupted(engine, sid, TurnRequest("say", "Anyone there?"), when, None, on_event)
    kept = raised.value.user_node
    assert kept is not None and kept.content == "Anyone there?" and kept.parent_id == before
    session = store.session(sid)
    assert session.head_id == kept.id
    assert raised.value.session is not None and raised.value.session.head_id == kept.id
    assert store.children(sid, kept.id) == []  # no empty reply under it
    assert [m.content for m in store.messages(sid)] == ["Hi.", "Welcome.", "Anyone there?"]
    # The next action goes on from the player's message.
    server = serve(Scripted(["At last, a reply."]))
    reply = play(engine_for(store, server), sid, "continue")
    assert reply.node.parent_id == kept.id
    sent = [m["content"] for m in chat(server)[0].messages if m["role"] != "system"]
    assert sent == ["Hi.", "Welcome.", "Anyone there?"]


def test_an_interrupted_reroll_before_its_first_word_stores_nothing(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    play(engine_for(store, serve(Scripted(["Welcome."]))), sid, "say", text="Hi.")
    before = store.session(sid)
    script = Held(["Never seen."], [], hold="story")
    with pytest.raises(TurnInterrupted, match="nothing was stored") as raised:
        run_interrupted(engine_for(store, serve(script)), sid, TurnRequest("reroll"), script.asked)
    assert raised.value.user_node is None
    assert store.session(sid) == before


def test_an_interrupted_edit_keeps_the_new_message_as_a_fork(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    first = play(engine_for(store, serve(Scripted(["Welcome."]))), sid, "say", text="Hi.")
    assert first.user_node is not None
    script = Held(["Never seen."], [], hold="story")
    with pytest.raises(TurnInterrupted) as raised:
        run_interrupted(
            engine_for(store, serve(script)),
            sid,
            TurnRequest("edit", "Hello!", node=first.user_node.id),
            script.asked,
        )
    fork = raised.value.user_node
    assert fork is not None and fork.content == "Hello!" and fork.parent_id is None
    assert store.session(sid).head_id == fork.id
    assert [m.content for m in store.messages(sid)] == ["Hello!"]
    assert {n.content for n in store.tree(sid).nodes} == {"Hi.", "Welcome.", "Hello!"}


def test_an_empty_reply_of_an_older_version_is_not_sent_to_the_model(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    store.append(sid, "user", "Hi.")
    store.append(sid, "assistant", "")  # what an interrupt before the first token left
    store.append(sid, "user", "Hello?")
    server = serve(Scripted(["Yes?"]))
    result = play(engine_for(store, server), sid, "continue")
    sent = chat(server)[0].messages
    assert all(message["content"] for message in sent)
    assert [m["content"] for m in sent if m["role"] != "system"] == ["Hi.", "Hello?"]
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified and trace.messages == sent


def test_a_stream_cut_by_the_server_says_so_in_one_short_line(
    store: Store, sid: str, serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted([Reply("The dragon opens its mouth and speaks.", cut_after=3)]))
    result = play(engine_for(store, server), sid, "say", text="Speak!")
    assert result.node.content == "The dragon opens "
    assert result.node.metadata["incomplete"] is True
    assert result.node.metadata["stopped_by"] == (
        "the stream broke off: the model server closed the connection mid-reply"
    )
    # Cut before any text: nothing stored, one line naming what happened.
    server = serve(Scripted([Reply("Never.", cut_after=0)]))
    with pytest.raises(ModelError) as raised:
        play(engine_for(store, server), sid, "say", text="Again?")
    message = str(raised.value)
    assert "broke off before any text" in message and "closed the connection" in message
    assert "\n" not in message and "Original exception" not in message
    assert [m.content for m in store.messages(sid)] == ["Speak!", "The dragon opens "]
