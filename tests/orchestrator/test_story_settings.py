"""The author's note, the persona and the session's system prompt in a turn's prompt,
and the note as world state (it rolls back with the story, a reroll keeps it), against
the loopback model, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from mnemosyne import InvalidDeltaError, InvalidOperationError, Store
from mnemosyne.edits import Note, parse
from orchestrator.loopback import ModelServer
from prompts import Injection, macros, place_note, with_note

from .test_turn import Scripted, chat, engine_for, play


def note(text: str, **fields: Any) -> Note:
    return Note.checked(note={"text": text, **fields})


def contents(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages]


# -- where the note goes (no model needed) ---------------------------------------------


@pytest.mark.parametrize(
    ("interval", "player_messages", "inserted"),
    [
        (1, 0, True),  # interval 1: every prompt, even before the player spoke
        (1, 7, True),
        (0, 4, False),  # 0: never
        (3, 1, False),  # not before the 3rd
        (3, 2, False),
        (3, 3, True),
        (3, 4, False),
        (3, 6, True),
        (2, 0, False),
    ],
)
def test_every_n_messages_counts_the_players_messages(
    interval: int, player_messages: int, inserted: bool
) -> None:
    placed = place_note({"text": "Keep it grim.", "interval": interval}, player_messages)
    assert placed is not None and placed.inserted is inserted
    assert f"every {interval}" in placed.reason


def test_a_blank_note_is_no_note_and_macros_are_substituted() -> None:
    assert place_note({"text": "  "}, 3) is None
    assert place_note(None, 3) is None
    placed = place_note(
        {"text": "{{char}} fears {{user}}."}, 1, lambda t: macros(t, char="Sera", user="Ann")
    )
    assert placed is not None and placed.text == "Sera fears Ann."


def test_positions_place_the_note_in_the_head_or_joined_with_lore_at_its_depth() -> None:
    parts = [("system", "S"), ("character", "C"), ("persona", "P"), ("state", "V")]
    lore = [Injection(2, "system", "LORE")]
    before = place_note({"text": "N", "position": "before_story"}, 1)
    after = place_note({"text": "N", "position": "after_story"}, 1)
    same = place_note({"text": "N", "depth": 2}, 1)
    other = place_note({"text": "N", "depth": 2, "role": "user"}, 1)
    assert with_note(before, parts, lore)[0][0][0] == "author_note"
    assert [name for name, _ in with_note(after, parts, lore)[0]] == [
        "system",
        "character",
        "persona",
        "author_note",
        "state",
    ]
    assert with_note(same, parts, lore)[1] == [Injection(2, "system", "N\nLORE")]
    assert with_note(other, parts, lore)[1] == [Injection(2, "user", "N"), *lore]


def test_a_bad_note_is_refused_naming_the_field(store: Store) -> None:
    with pytest.raises(InvalidOperationError, match=r"note\.depth"):
        parse({"op": "note", "note": {"text": "x", "depth": -1}})
    with pytest.raises(InvalidOperationError, match=r"note\.position"):
        parse({"op": "note", "note": {"text": "x", "position": "top"}})
    sid = store.create_session().id
    for bad in (
        {"op": "inc", "path": "author_note", "value": 1},
        {"op": "set", "path": "author_note", "value": {"text": "x", "interval": -2}},
        {"op": "set", "path": "author_note.text", "value": "x"},
    ):
        with pytest.raises(InvalidDeltaError, match="author_note"):
            store.append(sid, "assistant", "Hello.", delta=[bad])
    assert store.session(sid).head_id is None  # nothing stored


# -- in a turn --------------------------------------------------------------------------


def test_the_note_goes_in_at_its_depth_with_its_role_every_n_messages(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["One.", "Two.", "Three.", "Four."]))
    engine = engine_for(store, server)
    play(engine, sid, "say", text="First.")
    store.edit(sid, note("Rain falls on {{user}}.", depth=1, role="user", interval=2))
    play(engine, sid, "say", text="Second.")
    result = play(engine, sid, "say", text="Third.")
    second, third = (r.messages for r in chat(server)[1:3])
    # the 2nd player message: inserted at depth 1 (before the newest), as the player
    assert second[-2] == {"role": "user", "content": "Rain falls on Player."}
    assert second[-1]["content"] == "Second."
    assert "Rain falls on Player." not in contents(third)  # the 3rd: not this time
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified
    placed = trace.document["author_note"]
    assert placed["inserted"] is False and "the next in 1" in placed["reason"]


def test_the_note_rolls_back_with_the_story_and_a_reroll_keeps_it(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["One.", "Two.", "Two again."]))
    engine = engine_for(store, server)
    first = play(engine, sid, "say", text="First.")
    second = play(engine, sid, "say", text="Second.")
    store.edit(sid, note("Tension rises.", position="after_story"))  # on HEAD: the reply
    assert store.state(sid).author_note is not None
    assert store.state(sid, first.node.id).author_note is None  # earlier: no note
    rerolled = play(engine, sid, "reroll")
    sent = chat(server)[2].messages
    assert sent[0]["role"] == "system" and "Tension rises." in contents(sent)
    assert rerolled.node.parent_id == second.node.parent_id
    assert store.state(sid).author_note == {
        "text": "Tension rises.",
        "depth": 4,
        "position": "after_story",
        "interval": 1,
        "role": "system",
    }
    # checkout an earlier node: the note is what it was there
    with store.transaction(sid) as tx:
        tx.checkout(first.node.id)
    assert store.state(sid).author_note is None
    # undo/redo of the note: it is an edit like the others
    with store.transaction(sid) as tx:
        tx.checkout(second.node.id)
    store.edit(sid, note("", interval=0))
    assert store.state(sid, second.node.id).author_note["text"] == ""  # type: ignore[index]


def test_clearing_the_note_and_undo(store: Store, serve: Callable[..., ModelServer]) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["One."]))
    play(engine_for(store, server), sid, "say", text="First.")
    store.edit(sid, note("A"))
    store.edit(sid, Note.checked(note=None))
    assert store.state(sid).author_note is None
    store.undo(sid)
    assert store.state(sid).author_note["text"] == "A"  # type: ignore[index]
    store.undo(sid)
    assert store.state(sid).author_note is None


def test_persona_and_system_prompt_replace_the_defaults(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted(["Welcome."]))
    engine = engine_for(
        store,
        server,
        player="Ann",
        persona="A tall ranger; {{char}} trusts her.",
        system_prompt="You narrate for {{user}} only.",
    )
    result = play(engine, sid, "say", text="Hi.")
    sent = contents(chat(server)[0].messages)
    assert sent[0] == "You narrate for Ann only."
    assert not any("game master of a text role-playing game" in text for text in sent)
    persona = "About Ann, the player's character:\nA tall ranger; Narrator trusts her."
    assert any(persona in text for text in sent)  # the heading on a line of its own
    trace = store.trace(sid, result.node.id)
    assert trace is not None and trace.verified
    assert trace.document["system_prompt"]["origin"] == "session"
    assert "system" not in trace.document["templates"]
    assert "persona" in trace.document["templates"]


# -- the preview (the context meter) ------------------------------------------------------


def _preview(engine: Any, sid: str, text: str = "") -> Any:
    async def run() -> Any:
        try:
            return await engine.preview_prompt(sid, text)
        finally:
            await engine.aclose()

    return asyncio.run(run())


def test_the_preview_trims_as_a_turn_would_and_calls_no_model(
    store: Store, serve: Callable[..., ModelServer]
) -> None:
    sid = store.create_session().id
    server = serve(Scripted([]))
    words = " ".join(f"word{i}" for i in range(40))
    first = None
    for index in range(12):
        node, _ = store.append(sid, "user" if index % 2 else "assistant", f"{index} {words}")
        first = first or node
    engine = engine_for(store, server, context_window=600, reply_tokens=100)
    preview = _preview(engine, sid, "And then?")
    assert preview.trimmed > 0 and preview.sent + preview.trimmed == preview.messages == 13
    assert preview.summary == "new"  # a turn would write one; the preview does not
    assert preview.used <= preview.window - preview.reply_tokens
    assert server.requests == []
    # a summary the story has, covering what is trimmed, stands in for it
    through = store.messages(sid)[preview.trimmed + 2].id
    store.append(
        sid,
        "assistant",
        "13 The story goes on.",
        metadata={"summary_through": through},
        delta=[{"op": "set", "path": "summary", "value": "The hero walked."}],
    )
    again = _preview(engine_for(store, server, context_window=600, reply_tokens=100), sid)
    assert again.summary == "reused" and again.summary_tokens > 0
    assert server.requests == []
