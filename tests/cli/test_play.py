"""The playing commands against a model server on loopback: one-shot commands in this
process, ``clotho play`` and a Ctrl+C as a subprocess."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from orchestrator.loopback import ModelServer, Reply

from .test_cli import CLOTHO, InProcess, Run

HIT = json.dumps({"operations": [{"op": "inc", "path": "hp", "value": -10}]})
CAMPAIGN = """
title = "The Goblin Cave"
player = "Tom"

[character]
name = "Marla"
description = "{{char}} guards the cave and distrusts {{user}}."

[state.variables.hp]
type = "int"
default = 100
min = 0
max = 100
"""


def script(request: dict[str, Any]) -> Reply | str:
    if "response_format" in request:
        return HIT if "slashes" in request["messages"][-1]["content"] else '{"operations": []}'
    last = request["messages"][-1]["content"]
    if "slow" in last:
        return Reply(" ".join(f"w{i}" for i in range(400)), chunk_delay=0.02)
    if "Tom's next message" in last:
        return "I raise my shield."
    return "Marla slashes your arm." if "attack" in last else "Marla shrugs."


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


def campaign_session(model: ModelServer, tmp_path: Path, campaign: str = CAMPAIGN) -> Run:
    """A CLI on a new SQLite database, its model the one on loopback, with a session of
    ``campaign`` (the cave's by default) made. One-shot commands run in this process;
    ``clotho play`` and a Ctrl+C get a process of their own (its ``env``)."""
    run_sqlite = InProcess(f"sqlite:///{tmp_path / 'play.db'}", tmp_path / "home")
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "campaign.toml").write_text(campaign)
    run_sqlite.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    run_sqlite("session", "new", "--campaign", str(folder))
    return run_sqlite


@pytest.fixture
def play(model: ModelServer, tmp_path: Path) -> Run:
    return campaign_session(model, tmp_path)


def played(run: Run, *lines: str) -> subprocess.CompletedProcess[str]:
    """``clotho play`` with ``lines`` typed on a pipe, one after another; it must end well."""
    done = subprocess.run(
        [CLOTHO, "play"],
        env=run.env,
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_say_reroll_edit_and_trace(play: Run, model: ModelServer) -> None:
    said = play("say", "I attack the guard.")
    assert said.stdout.startswith("Marla slashes your arm.")  # a pipe: the text as is
    footer = said.stdout.splitlines()[-1]  # the alternative, the change, the prompt's size
    assert re.fullmatch(r"reply 1/1 · hp 100 → 90 · [\d,]+/[\d,]+ tokens · [0-9a-f]{8}", footer)
    rerolled = play.json("reroll")
    assert rerolled["node"]["content"] == "Marla slashes your arm."
    assert rerolled["state"]["variables"]["hp"] == 90
    footer = play("reroll").stdout.splitlines()[-1]  # what this alternative changed
    assert footer.startswith("reply 3/3 · hp 100 → 90 · ")
    trace = play.json("trace")
    assert trace["verified"] is True and trace["kind"] == "reroll"
    assert trace["messages"] == json.loads(model.requests[-2].body)["messages"]
    assert "Marla guards the cave and distrusts Tom." in trace["messages"][1]["content"]
    assert {"messages", "model", "params", "lore", "planner", "usage"} <= set(trace)
    user = play.json("log")[0]
    edited = play.json("edit", user["id"][:8], "I greet the guard.")
    assert edited["node"]["content"] == "Marla shrugs."
    assert edited["state"]["variables"]["hp"] == 100
    assert [n["content"] for n in play.json("log")] == ["I greet the guard.", "Marla shrugs."]
    player = play.json("impersonate")  # the player's line, drafted: nothing stored
    assert player["draft"] == "I raise my shield." and "node" not in player
    assert [n["content"] for n in play.json("log")] == ["I greet the guard.", "Marla shrugs."]
    reply = play.json("continue")  # the reply extended: its alternative with the whole text
    assert reply["node"]["metadata"]["continues"] == edited["node"]["id"]
    assert reply["node"]["content"].startswith("Marla shrugs.")
    text = play("trace", reply["node"]["id"][:8]).stdout
    assert "messages verified" in text and "[system]" in text
    play.json("undo")  # a turn is one undo step: the continuation to the trash
    assert [n["content"] for n in play.json("log")] == ["I greet the guard.", "Marla shrugs."]


def test_generation_errors_are_one_line(play: Run, tmp_path: Path) -> None:
    line = play.fails("reroll")
    assert "empty" in line
    play.env["CLOTHO_API_BASE"] = "http://127.0.0.1:9/v1"  # nothing listens there
    play.env["CLOTHO_MODEL"] = "openai/gm"
    line = play.fails("say", "hello")
    assert "cannot reach the model server" in line
    assert play.json("log") == []  # nothing stored
    del play.env["CLOTHO_MODEL"]
    assert "no model to play with" in play.fails("say", "hello")


def test_ctrl_c_keeps_the_partial_reply(play: Run) -> None:
    process = subprocess.Popen(
        [CLOTHO, "say", "tell me a slow story"],
        env=play.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    seen = ""
    deadline = time.monotonic() + 60
    while "w5 " not in seen and time.monotonic() < deadline:
        seen += process.stdout.read(1)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "incomplete" in err
    reply = play.json("log")[-1]
    assert reply["content"].startswith("w0 w1 w2 w3 w4 w5")
    assert len(reply["content"].split()) < 400
    assert reply["metadata"]["incomplete"] is True
    assert reply["delta"] == []
