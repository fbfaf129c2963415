"""Nothing a player typed or saw is lost: `clotho say` and `clotho play` as subprocesses
(play on a pseudo-terminal, tests/cli/terminal.py, or with piped input) against a model
server on loopback.

Interrupts are sent once the model server has received the call they interrupt, never
after a fixed wait.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from clotho.cli.playinput import LineReader, clean_line
from orchestrator.loopback import ModelServer, Reply

from .terminal import Terminal
from .test_cli import CLOTHO, Run
from .test_play import HIT, campaign_session, played

#: Long enough that the interrupt always comes first (the call is then abandoned).
HELD = 20.0
#: A message longer than a terminal's canonical-mode line (4095 bytes), ending in a word.
LONG = ("The ranger studies the ancient runes carved into the wall. " * 90)[:4999] + " end."


class GameMaster:
    """The model: "hold story" in the player's message holds the reply, "hold state"
    the extraction; ``asked`` is set when a held call arrives."""

    def __init__(self) -> None:
        self.asked = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            text = request["messages"][-1]["content"]
            if "hold state" in text:
                self.asked.set()
                return Reply(HIT, delay=HELD)
            return HIT
        last = request["messages"][-1]["content"]
        if "hold story" in last:
            self.asked.set()
            return Reply("Never seen.", delay=HELD)
        if "cut" in last:
            return Reply("Marla opens her mouth and speaks at last.", cut_after=4)
        return "Marla slashes your arm."


@pytest.fixture
def gm() -> GameMaster:
    return GameMaster()


@pytest.fixture
def model(gm: GameMaster) -> Iterator[ModelServer]:
    with ModelServer(gm) as server:
        yield server


@pytest.fixture
def play(model: ModelServer, tmp_path: Path) -> Run:
    return campaign_session(model, tmp_path)


def say_interrupted(play: Run, gm: GameMaster, text: str) -> subprocess.CompletedProcess[str]:
    """`clotho say TEXT`, with Ctrl+C (SIGINT) once the held call reached the model."""
    process = subprocess.Popen(
        [CLOTHO, "say", text],
        env=play.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert gm.asked.wait(60), "the model server never got the call"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_ctrl_c_while_the_state_is_updated_keeps_the_reply_with_no_delta(
    play: Run, gm: GameMaster
) -> None:
    done = say_interrupted(play, gm, "I attack and hold state.")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Marla slashes your arm.")
    assert "the world state was not updated: interrupted by the player" in done.stderr
    assert "Traceback" not in done.stderr
    user, reply = play.json("log")
    assert user["content"] == "I attack and hold state."
    assert reply["content"] == "Marla slashes your arm."
    assert reply["delta"] == []
    assert "interrupted by the player" in reply["metadata"]["delta_error"]
    assert play.json("state")["variables"]["hp"] == 100


def test_ctrl_c_before_the_first_word_keeps_the_players_message(play: Run, gm: GameMaster) -> None:
    done = say_interrupted(play, gm, "Anyone there? hold story")
    assert done.returncode == 130, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "your message was kept as" in lines[0] and "(HEAD)" in lines[0]
    assert "`clotho continue` asks for one" in lines[0]
    nodes = play.json("tree")["nodes"]
    assert [(n["role"], n["content"]) for n in nodes] == [("user", "Anyone there? hold story")]
    assert play.json("show")["id"] == nodes[0]["id"]  # HEAD is on it
    reply = play.json("continue")["node"]
    assert (reply["parent_id"], reply["content"]) == (nodes[0]["id"], "Marla slashes your arm.")


def test_a_stream_cut_by_the_server_is_one_line_and_the_partial_is_kept(play: Run) -> None:
    done = play("say", "Say something, then cut.")
    assert done.stdout.startswith("Marla opens her mouth ")
    lines = done.stderr.strip().splitlines()
    assert lines == [
        "warning: the reply is incomplete (the stream broke off: the model server closed "
        "the connection mid-reply): kept as is"
    ]
    reply = play.json("log")[-1]
    assert reply["content"] == "Marla opens her mouth "
    assert reply["metadata"]["incomplete"] is True
    header, text = play("log", "--last", "1").stdout.splitlines()
    assert header.endswith("Marla (incomplete) (HEAD)") and text == "Marla opens her mouth"
    assert "(incomplete)" in play("tree").stdout


# -- reading the player's lines ------------------------------------------------------


def test_the_line_editor_reads_a_long_line_whole_and_drops_control_keys() -> None:
    with create_pipe_input() as keys:
        keys.send_text(LONG[:3000] + "\x0c" + LONG[3000:] + "\r")  # Ctrl+L in the middle
        reader = LineReader(PromptSession(input=keys, output=DummyOutput()))
        assert reader.read("> ") == LONG
    with create_pipe_input() as keys:
        keys.send_text("half a thought\x03")  # Ctrl+C while typing: the line is dropped
        reader = LineReader(PromptSession(input=keys, output=DummyOutput()))
        with pytest.raises(KeyboardInterrupt):
            reader.read("> ")
    with create_pipe_input() as keys:
        keys.send_text("\x04")  # Ctrl+D on an empty line: the end
        reader = LineReader(PromptSession(input=keys, output=DummyOutput()))
        with pytest.raises(EOFError):
            reader.read("> ")
    assert clean_line("a\x00b\x07c\x1b[2Jd\te\x7f") == "abc[2Jd\te"


def test_play_on_a_terminal_stores_a_long_message_whole(play: Run) -> None:
    with Terminal(["play"], play.env, columns=120, rows=40) as term:
        term.wait_prompt()
        term.send(LONG[:2000] + "\x0c" + LONG[2000:])  # Ctrl+L (clear screen) while typing
        term.press("Enter")
        term.wait_for("Marla: Marla slashes your arm.")
        term.wait_prompt()
        term.settle()
        term.press("Ctrl+D")  # the end
        assert term.wait_exit() == 0, term.text()
    user, reply = play.json("log")
    assert user["content"] == LONG and len(user["content"]) == 5004
    assert reply["content"] == "Marla slashes your arm."


def test_play_with_piped_input_stores_a_long_message_whole(play: Run) -> None:
    played(play, LONG[:2000] + "\x0c\x1b" + LONG[2000:])
    user, reply = play.json("log")
    assert user["content"] == LONG
    assert reply["content"] == "Marla slashes your arm."
