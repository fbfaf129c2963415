"""`clotho play`'s turns as the page has them: `/swipe >` on the last alternative of
the last reply writes a new one, `/undo` takes a turn back and `/redo` brings it,
`/impersonate` drafts the player's line as the next prompt's text (stored nowhere)."""

from __future__ import annotations

import threading

from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clotho.cli.playinput import LineReader

from .test_cli import Run
from .test_play import model, play, played  # noqa: F401  (fixtures)


def test_a_drafted_line_is_the_next_prompts_text_to_edit() -> None:
    read: list[str] = []

    def player() -> None:  # a thread of its own: prompt_toolkit runs its own event loop
        with create_pipe_input() as keys:
            keys.send_text(" now\r\r")
            reader = LineReader(PromptSession(input=keys, output=DummyOutput()))
            reader.draft = "I raise my shield."
            read.extend([reader.read("> "), reader.read("> ")])

    thread = threading.Thread(target=player)
    thread.start()
    thread.join(timeout=30)
    assert read == ["I raise my shield. now", ""]  # the draft is used once


def test_swipe_right_on_the_last_reply_writes_one_and_undo_redo_take_turns(
    play: Run,  # noqa: F811
) -> None:
    done = played(
        play, "I attack the guard.", "/swipe >", "/undo", "/undo", "/redo", "/impersonate"
    )
    assert "undone: the reroll" in done.stdout and "undone: the turn" in done.stdout
    assert "redone: the turn" in done.stdout and "I raise my shield." in done.stdout
    user, reply = play.json("log")  # the say is back, the reroll in the trash
    assert user["content"] == "I attack the guard." and reply["content"]
    assert len(play.json("trash")) == 1
    assert [entry["undone"] for entry in play.json("history")] == [False, True]
