"""``clotho trace-diff A B`` run as a subprocess on SQLite and PostgreSQL, over turns
played against the loopback model: the summary, each section, ``--json``, refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mnemosyne import Store
from orchestrator.loopback import ModelServer
from tests.orchestrator.test_tracediff import Moments, played_story

from .test_cli import InProcess, Run


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    return InProcess(database_url, tmp_path / "home")


@pytest.fixture
def moments(run: Run, serve: Callable[..., ModelServer]) -> Moments:
    with Store.open(run.url, migrate=True) as store:
        played = played_story(store, serve)
    run("session", "use", played.session_id)
    return played


def test_trace_diff_of_an_edit_and_a_later_turn(run: Run, moments: Moments) -> None:
    lines = run("trace-diff", moments.first[:8], moments.later).stdout.splitlines()
    assert lines[0] == (
        f"trace-diff A {moments.first[:8]} (say, openai/gm) -> "
        f"B {moments.later[:8]} (say, openai/gm)"
    )
    assert lines[1].startswith(
        "  2 messages changed, 3 messages added, 1 message removed, lore: +1 -1, "
        "state: 3 keys differ, tokens: "
    )
    text = "\n".join(lines)
    assert "  = 3 messages the same (#1-3 in B)" in text
    assert "    A [-goblin-]{+dragon+} attacks!" in text  # the edited message, word by word
    assert "    - hp: [-100-]{+90+}" in text  # the state message sent to the model
    assert "  + [assistant] added (#6 in B)\n    A shadow passes." in text
    assert "  - valley:1 (A only): key 'goblin' in message 0" in text
    assert "  + valley:2 (B only): sticky" in text
    assert "--- state each started from ---\n  active_lore_ids: [] -> " in text
    assert "  hp: 100 -> 90" in text
    assert "  lore_timers.sticky.valley:2: (unset) -> {" in text
    assert "--- settings ---\n  the same" in text
    assert "  prompt: " in text and "  completion: " in text


def test_trace_diff_of_two_rerolls_names_the_setting(run: Run, moments: Moments) -> None:
    run("checkout", moments.reroll)
    lines = run("trace-diff", moments.first, "HEAD").stdout.splitlines()
    assert lines[1].startswith("  same messages, lore: +0 -0, temperature 0.7 -> 1.0, ")
    assert "--- settings ---" in lines
    assert lines[lines.index("--- settings ---") + 1] == "  params.temperature: 0.7 -> 1.0"


def test_trace_diff_json_and_refusals(run: Run, moments: Moments) -> None:
    document = run.json("trace-diff", moments.first, moments.fork)
    assert document["a"]["node_id"] == moments.first
    assert document["b"]["node_id"] == moments.fork
    assert document["counts"]["lore_added"] == 1 and document["counts"]["lore_removed"] == 1
    [changed] = [m for m in document["messages"] if m["status"] == "changed"]
    assert (changed["a"], changed["b"]) == ("A goblin attacks!", "A dragon attacks!")
    assert {"op": "added", "text": "dragon"} in changed["words"]
    assert set(document["tokens"]) == {"a", "b", "difference"}

    error = run.fails("trace-diff", moments.user, moments.first)
    assert error == (
        f"error: node {moments.user} ({moments.user}) is a player's message: it has no "
        "trace; compare two generated replies"
    )
    unknown = run.fails("trace-diff", moments.first, "ffffffff")
    assert unknown.startswith("error: ") and "ffffffff" in unknown


def test_removed_words_are_red_and_added_green_when_colour_is_on(
    run: Run, moments: Moments
) -> None:
    terminal = Run(run.url, Path(run.env["HOME"]))  # a process: its console reads the colours
    terminal.env = {key: value for key, value in run.env.items() if key != "NO_COLOR"}
    terminal.env["FORCE_COLOR"] = "1"
    text = terminal("trace-diff", moments.first, moments.fork).stdout
    assert "A \x1b[31;9m[-goblin-]\x1b[0m\x1b[32m{+dragon+}\x1b[0m attacks!" in text
    assert "\x1b[32m  + \x1b[0mvalley:2 (B only): " in text


def test_a_message_too_long_to_compare_word_by_word_is_said_to_be_shown_whole(
    run: Run, moments: Moments
) -> None:
    from clotho.cli.tracediff import diff_lines

    document = run.json("trace-diff", moments.first, moments.fork)
    [changed] = [m for m in document["messages"] if m["status"] == "changed"]
    assert changed["whole"] is False
    changed["whole"] = True  # what the engine sends for a pair over WORD_CELLS
    changed["words"] = [
        {"op": "removed", "text": changed["a"]},
        {"op": "added", "text": changed["b"]},
    ]
    text = "\n".join(diff_lines(document, None))
    assert (
        "too long to compare word by word: shown whole\n"
        "    [-A goblin attacks!-]{+A dragon attacks!+}"
    ) in text
