"""A client that leaves a turn's event stream loses nothing: a real `clotho serve` and a
model server on loopback (the client leaves on the event named, never after a wait)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer, Reply

from ._server import Server, events, running_with_model

TENSE = {"op": "set", "path": "mood", "value": "tense"}
REPLY = "Marla draws her blade."


def gm(request: dict[str, Any]) -> Reply | str:
    """The model: a slow extraction for "slow state", a reply that only reasons (slowly)
    for "think", else a plain reply."""
    if "response_format" in request:
        slow = "slow state" in request["messages"][-1]["content"]
        return Reply(json.dumps({"operations": [TENSE]}), delay=2.0 if slow else 0.0)
    last = request["messages"][-1]["content"]
    if "think" in last.lower():
        thinking = " ".join(f"thought{i}" for i in range(300))
        return Reply("Never seen.", reasoning=thinking, chunk_delay=0.02)
    return REPLY


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_with_model(ModelServer(gm), tmp_path_factory.mktemp("leave")) as up:
        yield up


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def leave_on(api: httpx.Client, sid: str, text: str, event: str, data: str | None) -> None:
    """A say turn whose client closes the connection at the first such event."""
    body = {"kind": "say", "text": text}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        assert response.status_code == 201
        for seen in events(response):
            assert seen.event not in ("node", "error"), seen
            if seen.event == event and (data is None or data in seen.data["text"]):
                break  # leaving the block closes the connection


def nodes_once_stored(api: httpx.Client, sid: str, timeout: float = 30.0) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = api.get(f"/api/sessions/{sid}/tree").json()["nodes"]
        if nodes:
            return nodes  # a turn's nodes are stored in one transaction
        time.sleep(0.1)
    raise AssertionError(f"nothing was stored in {timeout:.0f} s")


def new_session(api: httpx.Client) -> str:
    return api.post("/api/sessions", json={"title": "leave"}).json()["session"]["id"]


def test_a_client_leaving_during_the_extraction_still_gets_the_turn_stored_whole(
    server: Server, api: httpx.Client
) -> None:
    sid = new_session(api)
    leave_on(api, sid, "I wait, slow state.", "status", "updating the world state")
    user, reply = nodes_once_stored(api, sid)
    assert user["content"] == "I wait, slow state."
    assert reply["content"] == REPLY
    assert reply["delta"] == [TENSE]  # the extraction ran to its end
    assert "delta_error" not in reply["metadata"]
    assert api.get(f"/api/sessions/{sid}/state").json()["variables"] == {"mood": "tense"}
    assert "Traceback" not in server.stderr, server.stderr


def test_a_client_leaving_before_the_first_word_leaves_no_empty_reply(
    server: Server, api: httpx.Client
) -> None:
    sid = new_session(api)
    leave_on(api, sid, "Think first.", "reasoning", None)
    nodes = nodes_once_stored(api, sid)
    assert [(n["role"], n["content"]) for n in nodes] == [("user", "Think first.")]
    assert api.get(f"/api/sessions/{sid}").json()["head_id"] == nodes[0]["id"]
    assert "Traceback" not in server.stderr, server.stderr
