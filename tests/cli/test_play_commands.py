"""`clotho play`'s slash commands, as a player sends them (piped input) against the
loopback model, with what they stored read back through `--json`."""

from __future__ import annotations

import pytest

from clotho.cli.cells import cell_len
from clotho.cli.playcommands import COMMANDS
from clotho.cli.state import state_lines
from clotho.cli.traceview import trace_lines
from mnemosyne import WorldState
from tests._fixtures import ELDORIA

from .terminal import Terminal, control_characters
from .test_cli import Run
from .test_play import model, play, played  # noqa: F401  (fixtures)


def test_editing_any_message_reading_the_world_and_moving_around(play: Run) -> None:  # noqa: F811
    play.env["CLOTHO_VECTORS"] = "false"  # lore by keywords: no model to load
    play("import", "lorebook", str(ELDORIA))
    done = played(
        play,
        "I attack the Shadowfang.",  # hp 100 -> 90; the beast's entry fires
        "/state",
        "/diff",
        "/diff HEAD~1 HEAD",
        "/lore",
        "/edit",  # the player's last message: a fork, and a new reply
        "I greet the guard.",
        "/edit HEAD",  # a reply: rewritten in place
        "Marla nods, once.",
        "/undo",
        "/redo",
        "/edit HEAD",
        "Marla nods, once.",  # unchanged: nothing happens
        "/edit",
        "",  # empty: nothing happens
        "/checkout HEAD~1",  # the greeting: the player's second message
        "/swipe <",  # its first alternative: the attack, down to its reply
        "/swipe <",  # nothing before it
        "/nope",
        "/help",
        "/help edit",
        "/trace",
    )
    said = done.stdout.split("\n> ")  # piped, each prompt starts what a line printed
    state, diff, diff_ab, lore = said[2:6]
    assert "hp  90" in state and "lore_timers" not in state and "sticky" not in state
    assert "hp: 100 -> 90" in diff and "hp: 100 -> 90" in diff_ab
    assert "fired for the last reply" in lore
    assert "key 'shadowfang'" in lore and "shadowfang, beast" in lore  # the entry's keys
    edit_fork, edit_reply, undo, redo, unchanged, empty = said[6:12]
    assert "editing your message" in edit_fork and "as a fork" in edit_fork
    assert "Marla shrugs." in edit_fork  # the fork's reply
    assert "editing the reply" in edit_reply and "rewritten in place" in edit_reply
    assert "undone: the edit in place" in undo and "Marla shrugs." in undo
    assert "redone: the edit in place" in redo and "Marla nods, once." in redo
    assert "unchanged: nothing changed" in unchanged
    assert "empty: nothing changed" in empty
    checkout, swiped, first, unknown, every, one, trace = said[12:19]
    assert "I greet the guard." in checkout
    assert "Marla slashes your arm." in swiped
    assert "first alternative: nothing that way" in first
    assert "unknown command /nope: /help lists them" in unknown
    assert all(f"/{command.name}" in every for command in COMMANDS)
    assert one.startswith("/edit [NODE | TEXT]") and "/log" not in one
    assert "messages verified" in trace and "lore sillytavern_Eldoria_worldinfo:1" in trace
    assert "error" not in done.stderr

    # what was stored: the attack's branch at HEAD; beside it the greeting, its reply
    # rewritten in place (no new node), each step in the journal
    assert [n["content"] for n in play.json("log")] == [
        "I attack the Shadowfang.",
        "Marla slashes your arm.",
    ]
    nodes = play.json("tree")["nodes"]
    assert len(nodes) == 4
    greeting = next(n for n in nodes if n["content"] == "I greet the guard.")
    reply = next(n for n in nodes if n["parent_id"] == greeting["id"])
    assert reply["content"] == "Marla nods, once." and reply["role"] == "assistant"
    assert greeting["parent_id"] is None  # a fork of the first message: a root beside it
    actions = [entry["action"] for entry in play.json("history")]
    assert actions[:3] == ["say", "edit", "rewrite"]
    assert play.json("state", greeting["id"])["variables"]["hp"] == 100


def test_edit_with_a_text_gives_it_to_the_players_last_message(play: Run) -> None:  # noqa: F811
    done = played(play, "I attack the guard.", "/edit I greet the guard.")
    assert "error" not in done.stderr
    user, reply = play.json("log")  # the fork and its reply; the attack beside it
    assert user["content"] == "I greet the guard." and reply["content"] == "Marla shrugs."
    assert len(play.json("tree")["nodes"]) == 4


def test_on_a_terminal_edit_shows_the_old_text_to_change_and_nothing_overflows(
    play: Run,  # noqa: F811
) -> None:
    play.env["CLOTHO_PAGER"] = ""  # what is longer than the screen printed, not paged
    with Terminal(["play"], play.env, columns=80, rows=30) as term:
        term.wait_prompt()
        term.send("I attack the guard.")
        term.press("Enter")
        term.wait_prompt()
        term.send("/edit HEAD")
        term.press("Enter")
        term.wait_for("edit> Marla slashes your arm.")  # the reply's text, to change
        for _ in "your arm.":
            term.press("Backspace")
        term.send("her sword.")
        term.press("Enter")
        term.wait_prompt()
        start = len(term.display())
        for command in ("/help", "/trace", "/state", "/diff", "/lore", "/log", "/tree"):
            term.send(command)
            term.press("Enter")
            term.wait_prompt()
        term.press("Ctrl+D")
        assert term.wait_exit() == 0
        shown = term.display()
        text = term.text()
        assert "rewritten in place" in text and "hp: 100 -> 90" in text, text
        assert [i for i in term.wrapped() if i >= start] == [], "\n".join(shown[start:])
        assert control_characters(term.text()) == []
    assert [n["content"] for n in play.json("log")] == [
        "I attack the guard.",
        "Marla slashes her sword.",
    ]


LONG = (
    "The ranger studies the ancient runes carved into the wall, tracing each "
    "weathered line with a gloved finger while the torch gutters. "
) * 4
CJK = "玛拉举起长剑，挡在洞口前。「你不该来这里。」她低声说道，目光冷冷地扫过你的脸。🗡️ " * 3
TRACE = {
    "node_id": "9f0e1d2c" * 4,
    "kind": "say",
    "model": "openai/a-model-with-a-long-name-for-the-gateway",
    "latency_ms": 1234.5,
    "usage": {"prompt_tokens": 3120, "completion_tokens": 240},
    "verified": True,
    "problems": [],
    "params": {"temperature": 0.8, "top_p": 0.95, "max_tokens": 800},
    "planner": {"strategy": "rules", "reasoning": LONG},
    "lore": [{"id": "Eldoria:1", "reason": "key 'shadowfang' in message 4 " + LONG}],
    "lore_skipped": [],
    "templates": {"system": {"origin": "package"}},
    "messages": [{"role": "system", "content": LONG}, {"role": "user", "content": CJK}],
}


@pytest.mark.parametrize("width", [80, 120])
def test_the_trace_and_the_state_fit_the_width_with_every_word_whole(width: int) -> None:
    world = WorldState({"hp": 90, "inventory": ["rope"] * 30}, [], LONG + CJK, {})
    for lines in (trace_lines(TRACE, width), state_lines(world, width)):
        assert max(cell_len(line) for line in lines) <= width
        # never a word cut in two at the edge (a cut would add a space inside it)
        assert " ".join(LONG.split()) in " ".join(" ".join(lines).split())
    unwrapped = trace_lines(TRACE, None)  # a pipe: whole lines, the messages as stored
    assert LONG in unwrapped and CJK in unwrapped


def test_the_state_says_who_is_present_once_someone_came_or_went() -> None:
    everyone = state_lines(WorldState({"hp": 90}, [], "", {}), 80)
    assert not any(line.startswith("present") for line in everyone)
    scene = state_lines(WorldState({"hp": 90}, [], "", {}, None, ["Marla", "Bram"]), 80)
    assert "present  Marla, Bram" in scene
    alone = state_lines(WorldState({"hp": 90}, [], "", {}, None, []), 80)
    assert "present  (no one)" in alone
