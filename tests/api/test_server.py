"""`clotho serve` as a real process on loopback (SQLite): turns stream token by token over
HTTP, a client that goes away keeps the reply so far, a failing model ends the stream
with a problem, and the token is generated, kept and refused beyond loopback."""

from __future__ import annotations

import json
import re
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from orchestrator.loopback import ModelServer, Reply

from ._server import (
    TOKEN,
    Event,
    Server,
    events,
    running,
    running_with_model,
    serve_command,
    serve_env,
)

REPLY = "Marla draws her blade and waits by the door."
SLOW_WORDS = 300
TENSE = {"op": "set", "path": "mood", "value": "tense"}


def gm(request: dict[str, Any]) -> Reply | str:
    """The model: a reply streamed word by word (slowly for a "slow" story; a refused
    key for "fail"), and a state change for every complete reply."""
    if "response_format" in request:
        return json.dumps({"operations": [TENSE]})
    last = request["messages"][-1]["content"]
    if "fail" in last:
        return Reply(status=401, error="Incorrect API key provided")
    if "slow" in last:
        return Reply(" ".join(f"w{i}" for i in range(SLOW_WORDS)), chunk_delay=0.03)
    return Reply(REPLY, chunk_delay=0.05)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server (and its model) for the turn tests of this module."""
    folder = tmp_path_factory.mktemp("serve")
    with running_with_model(ModelServer(gm), folder) as up:
        yield up


@pytest.fixture
def api(server: Server) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def new_session(api: httpx.Client) -> str:
    created = api.post("/api/sessions", json={"title": "served"})
    assert created.status_code == 201, created.text
    return created.json()["session"]["id"]


def play(api: httpx.Client, sid: str, text: str) -> list[Event]:
    """A `say` turn, its events read as they arrive."""
    body = {"kind": "say", "text": text}
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        assert response.status_code == 201, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "etag" not in response.headers  # the version before the turn is not its ETag
        return list(events(response))


def test_a_turn_streams_its_tokens_as_they_are_written(server: Server, api: httpx.Client) -> None:
    assert not (server.data_dir / "api-token").exists()  # CLOTHO_API_TOKEN is the token
    assert "token" not in server.stderr.lower()
    assert_token_works(server.url, TOKEN)
    sid = new_session(api)
    started = time.monotonic()
    seen = play(api, sid, "I knock on the door.")
    kinds = [event.event for event in seen]
    assert kinds[0] == "turn" and kinds[-1] == "node" and kinds.count("node") == 1, kinds
    assert "error" not in kinds
    tokens = [event for event in seen if event.event == "token"]
    assert len(tokens) == len(REPLY.split())
    assert max(i for i, kind in enumerate(kinds) if kind == "token") < kinds.index("node")
    assert "".join(event.data["text"] for event in tokens) == REPLY
    # The tokens came over time (the model waits 50 ms between words), not at the end.
    ended = seen[-1].at
    assert tokens[0].at < tokens[-1].at - 0.1
    assert tokens[0].at < ended - 0.2
    assert started < tokens[0].at
    done = seen[-1].data
    assert done["node"]["content"] == REPLY and done["node"]["role"] == "assistant"
    assert done["user_node"]["content"] == "I knock on the door."
    assert done["node"]["parent_id"] == done["user_node"]["id"]
    assert done["incomplete"] is False and done["warnings"] == []
    assert done["node"]["delta"] == [TENSE]
    assert done["state"]["variables"] == {"mood": "tense"}
    assert done["session"]["head_id"] == done["node"]["id"]
    version = done["session"]["version"]
    assert version > 0
    now = api.get(f"/api/sessions/{sid}")
    assert now.headers["etag"] == f'"{version}"'
    assert now.json()["head_id"] == done["node"]["id"]
    projection = api.get(f"/api/sessions/{sid}/projection").json()
    assert [n["content"] for n in projection["nodes"]] == ["I knock on the door.", REPLY]


def test_a_client_that_leaves_keeps_the_reply_so_far_marked_incomplete(
    api: httpx.Client,
) -> None:
    sid = new_session(api)
    body = {"kind": "say", "text": "Tell me a slow story."}
    tokens: list[str] = []
    with api.stream("POST", f"/api/sessions/{sid}/turns", json=body) as response:
        assert response.status_code == 201
        for event in events(response):
            assert event.event in ("turn", "status", "token"), event
            if event.event == "token":
                tokens.append(event.data["text"])
            if len(tokens) >= 5:
                break  # leaving the block closes the connection mid-stream
    assert "".join(tokens).startswith("w0 w1 w2 w3 w4")
    reply = wait_for_reply(api, sid)
    words = reply["content"].split()
    assert words[:5] == ["w0", "w1", "w2", "w3", "w4"]
    assert len(words) < SLOW_WORDS  # stopped, not played to the end
    assert words == [f"w{i}" for i in range(len(words))]  # the text as it streamed
    assert reply["metadata"]["incomplete"] is True
    assert "interrupted" in reply["metadata"]["stopped_by"]
    assert reply["delta"] == []
    state = api.get(f"/api/sessions/{sid}/state").json()
    assert state["node_id"] == reply["id"] and state["variables"] == {}
    assert api.get(f"/api/sessions/{sid}").json()["head_id"] == reply["id"]


def wait_for_reply(api: httpx.Client, sid: str, timeout: float = 30.0) -> dict[str, Any]:
    """The reply of the session's turn, once it is committed (with its delta)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tree = api.get(f"/api/sessions/{sid}/tree").json()
        replies = [node for node in tree["nodes"] if node["role"] == "assistant"]
        if replies:
            assert len(replies) == 1, replies
            return replies[0]
        time.sleep(0.1)
    raise AssertionError(f"no reply was committed in {timeout:.0f} s")


def test_a_failing_model_ends_the_stream_with_a_problem_and_stores_nothing(
    api: httpx.Client,
) -> None:
    sid = new_session(api)
    seen = play(api, sid, "This will fail.")
    kinds = [event.event for event in seen]
    assert kinds[-1] == "error" and "token" not in kinds and "node" not in kinds, kinds
    problem = seen[-1].data
    assert problem["status"] == 502 and problem["code"] == "model_error"
    assert problem["type"].endswith("/model_error")
    assert problem["title"] == "Bad Gateway"
    assert problem["detail"] and problem["instance"] == f"/api/sessions/{sid}/turns"
    session = api.get(f"/api/sessions/{sid}").json()
    assert (session["version"], session["head_id"]) == (0, None)
    assert api.get(f"/api/sessions/{sid}/tree").json()["nodes"] == []


def test_without_a_token_one_is_generated_kept_and_reused(tmp_path: Path) -> None:
    url, data = f"sqlite:///{tmp_path / 'clotho.db'}", tmp_path / "data"
    kept = data / "api-token"
    with running(url, data, token=None, name="first") as first:
        found = re.search(r"A token was generated for this API: (\S+)", first.stderr)
        assert found, first.stderr
        token = found.group(1)
        assert len(token) >= 32
        assert kept.read_text().strip() == token
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert_token_works(first.url, token)
    with running(url, data, token=None, name="second") as second:
        assert "generated" not in second.stderr
        assert str(kept) in second.stderr
        assert_token_works(second.url, token)
    assert kept.read_text().strip() == token


def assert_token_works(url: str, token: str) -> None:
    assert httpx.get(f"{url}/api/sessions").status_code == 401
    wrong = httpx.get(f"{url}/api/sessions", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["content-type"] == "application/problem+json"
    right = httpx.get(f"{url}/api/sessions", headers={"Authorization": f"Bearer {token}"})
    assert right.status_code == 200 and isinstance(right.json()["sessions"], list)


def test_beyond_loopback_without_a_token_it_refuses_to_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = subprocess.run(
        [
            *serve_command(f"sqlite:///{tmp_path / 'clotho.db'}"),
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
        ],
        env=serve_env(data, token=None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "0.0.0.0" in lines[0] and "CLOTHO_API_TOKEN" in lines[0]
    assert "token" in lines[0]
    assert not (data / "api-token").exists()  # nothing generated either
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # nothing listens
