"""`clotho serve` warms up what the first turn needs as it starts, says so, and a turn
says what it is doing until the reply begins (a real server, a real model on loopback)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.loopback import ModelServer

from ._server import Server, events, running_with_model

REPLY = "The door creaks open."


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with running_with_model(ModelServer(lambda request: REPLY), tmp_path) as up:
        yield up


def test_health_says_warming_then_ready_and_the_output_says_when(server: Server) -> None:
    with server.client() as api:
        states = set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            health = api.get("/api/health").json()
            states.add(health["warm"])
            if health["warm"] == "ready":
                break
            time.sleep(0.05)
    assert health["status"] == "ok" and health["warm"] == "ready"
    assert states <= {"warming", "ready"}
    assert "warming up what the first turn needs" in server.stderr
    assert "ready for the first turn" in server.stderr
    assert "Traceback" not in server.stderr


def test_a_turn_says_each_step_before_the_reply(server: Server) -> None:
    with server.client() as api:
        sid = api.post("/api/sessions", json={"title": "warm"}).json()["session"]["id"]
        body = {"kind": "say", "text": "I knock."}
        with api.stream("POST", f"/api/sessions/{sid}/turns", json=body, timeout=60) as response:
            seen = [(event.event, event.data) for event in events(response)]
    first_token = [kind for kind, _ in seen].index("token")
    before = [data["text"] for kind, data in seen[:first_token] if kind == "status"]
    assert before == [
        "reading the story",
        "choosing the lore",
        "building the prompt",
        "waiting for the model",
    ]
    assert seen[-1][0] == "node"


def test_a_server_stopped_while_it_warms_up_stops_without_finishing_it(
    server: Server,
) -> None:
    with server.client() as api:
        assert api.get("/api/health").json()["warm"] == "warming"  # litellm takes seconds
    server.process.send_signal(signal.SIGTERM)  # Ctrl+C as the server starts
    # uvicorn stops, then ends by the signal it was sent
    assert server.process.wait(timeout=60) in (0, -signal.SIGTERM)
    assert "the warm-up is left unfinished" in server.stderr
    assert "ready for the first turn" not in server.stderr  # not waited for
    assert "Traceback" not in server.stderr
