"""``clotho cascade`` as a subprocess (SQLite and PostgreSQL), the model a server on
loopback: the steps shown, Ctrl+C stops and says how to go on, the same command goes on
and the outcome says how the states diverged."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.loopback import ModelServer, Reply

from .test_cli import CLOTHO, InProcess, Run

CAMPAIGN = """
title = "The Goblin Cave"
player = "Tom"

[character]
name = "Marla"

[state.variables.hp]
type = "int"
default = 100
min = 0
max = 100
"""


class Story:
    """The old branch's replies hit for 10, the new ones for 3; once ``hold`` is set,
    the reply to the torch waits until ``release`` (a Ctrl+C comes first)."""

    def __init__(self) -> None:
        self.hit = 10
        self.hold = False
        self.release = threading.Event()
        self.count = 0

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            return json.dumps({"operations": [{"op": "inc", "path": "hp", "value": -self.hit}]})
        self.count += 1
        if self.hold and request["messages"][-1]["content"] == "I light a torch.":
            self.release.wait(60)  # until the test has stopped the cascade
            return Reply(f"Reply {self.count}.")
        return f"Reply {self.count}."


@pytest.fixture
def story() -> Story:
    return Story()


@pytest.fixture
def model(story: Story) -> Iterator[ModelServer]:
    with ModelServer(story) as server:
        yield server


@pytest.fixture
def play(database_url: str, tmp_path: Path, model: ModelServer) -> Run:
    """clotho on a campaign's session, run in this process (the cascade stopped by
    Ctrl+C runs in its own)."""
    run = InProcess(database_url, tmp_path / "home")
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "campaign.toml").write_text(CAMPAIGN)
    run.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    run("session", "new", "--campaign", str(folder))
    return run


def test_cascade_stops_on_ctrl_c_and_goes_on_when_run_again(play: Run, story: Story) -> None:
    for text in ("I enter the cave.", "I light a torch.", "I call out."):
        play("say", text)
    old = play.json("log")
    first = old[0]["id"]
    story.hit, story.hold = 3, True
    play("fork", first[:8], "I walk around the cave.")

    process = subprocess.Popen(
        [CLOTHO, "cascade"], env=play.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + 60
    while "step 2 of 5" not in seen and time.monotonic() < deadline:
        seen += process.stdout.readline()
    assert seen.startswith("cascade of ")
    assert f"in place of {first[:8]}: 5 steps to {old[-1]['id'][:8]}" in seen
    assert "step 1 of 5: Marla's reply regenerated" in seen
    assert "step 2 of 5: the player's message copied" in seen
    process.send_signal(signal.SIGINT)
    rest, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "stopped at step 2 of 5" in rest
    assert "every step made is kept" in err and "goes on from there" in err
    assert f"--from {first[:8]} --to {old[-1]['id'][:8]}`" in err  # the leaf kept

    story.release.set()
    story.hold = False
    outcome = play.json("cascade")
    assert [step["step"] for step in outcome["made"]] == [3, 4, 5]
    assert outcome["complete"] and not outcome["stopped"]
    assert outcome["old_id"] == old[-1]["id"]
    assert outcome["divergence"]["hp"] == [70, 91]
    new = play.json("log")
    assert [n["content"] for n in new[::2]] == [
        "I walk around the cave.",
        "I light a torch.",
        "I call out.",
    ]
    assert new[-1]["id"] == outcome["new_id"]  # HEAD on the new leaf
    assert all(n["metadata"]["cascade"]["from"] == first for n in new[1:])
    again = play("cascade")  # nothing left: said, not made twice
    assert "nothing left to regenerate: all 5 steps were made before" in again.stdout
    assert "hp: 70 -> 91" in again.stdout  # as clotho diff shows it
    play("checkout", old[-1]["id"][:8])
    assert play.json("log") == old  # the old branch as it was


def test_what_cannot_be_cascaded_is_one_line(play: Run) -> None:
    play("say", "I enter the cave.")
    assert "has no earlier alternative" in play.fails("cascade")
    play("reroll")
    assert "nothing to cascade" in play.fails("cascade")
    assert "is not another alternative" in play.fails("cascade", "HEAD", "--from", "HEAD~1")
    assert "is not on the old branch" in play.fails("cascade", "--to", "HEAD~1")


def test_a_trashed_fork_is_one_line_naming_it(play: Run) -> None:
    play("say", "I enter the cave.")
    first = play.json("log")[0]["id"]
    play("fork", first[:8], "I walk around the cave.")
    fork = play.json("log")[0]["id"]
    play("delete", fork[:8])
    line = play.fails("cascade", fork[:8], "--from", first[:8])
    assert f"node {fork[:8]} (the fork) is no longer in the story's tree" in line
