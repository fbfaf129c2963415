"""Turns through the API (TestClient, both backends): the result as one JSON document,
the server-sent events, refusals before the stream starts, errors as events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from orchestrator.loopback import ModelServer, Reply
from tests.orchestrator.test_turn import Scripted, delta

HURT = delta({"op": "set", "path": "hp", "value": 90})
JSON = {"Accept": "application/json"}


def events(response: Any) -> list[tuple[str, Any]]:
    """The (event, data) pairs of a server-sent event stream."""
    out = []
    for block in response.text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        out.append((fields["event"], json.loads(fields["data"])))
    return out


def session(client: TestClient) -> str:
    return client.post("/api/sessions", json={"title": "turns"}).json()["id"]


def test_a_turn_as_one_json_document_then_a_reroll(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["The goblin bites.", "The goblin misses."], [HURT, delta()]))
    client = make_client(server)
    sid = session(client)
    said = client.post(
        f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "I attack."}, headers=JSON
    )
    assert said.status_code == 200, said.text
    result = said.json()
    assert result["node"]["content"] == "The goblin bites."
    assert result["user_node"]["content"] == "I attack."
    assert result["state"]["variables"] == {"hp": 90}
    assert said.headers["etag"] == f'"{result["session"]["version"]}"'
    rerolled = client.post(f"/api/sessions/{sid}/turns", json={"kind": "reroll"}, headers=JSON)
    assert rerolled.json()["state"]["variables"] == {}
    projection = client.get(f"/api/sessions/{sid}/projection").json()
    assert projection["nodes"][-1]["siblings"][1] == rerolled.json()["node"]["id"]
    trace = client.get(f"/api/sessions/{sid}/nodes/{result['node']['id']}/trace").json()
    assert trace["verified"] is True
    assert trace["messages"] == server.requests[0].messages


def test_a_turn_streams_as_server_sent_events(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    reply = Reply("You see a long corridor lit by torches.", reasoning="Describe the place.")
    client = make_client(serve(Scripted([reply])))
    sid = session(client)
    with client.stream(
        "POST", f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "I look around."}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        response.read()
    seen = events(response)
    kinds = [kind for kind, _ in seen]
    assert kinds[-1] == "node" and "error" not in kinds
    tokens = "".join(data["text"] for kind, data in seen if kind == "token")
    assert tokens == reply.content
    assert kinds.index("reasoning") < kinds.index("token")
    committed = seen[-1][1]
    assert committed["node"]["content"] == reply.content
    assert committed["node"]["metadata"]["reasoning"] == "Describe the place."
    assert committed["session"]["version"] == client.get(f"/api/sessions/{sid}").json()["version"]


def test_a_failing_model_ends_the_stream_with_an_error_event(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Scripted([Reply(status=401, error="Incorrect API key")])))
    sid = session(client)
    response = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hello?"})
    kind, problem = events(response)[-1]
    assert kind == "error"
    assert problem["status"] == 502 and problem["code"] == "model_error"
    assert problem["kind"] == "auth"
    assert client.get(f"/api/sessions/{sid}/tree").json()["nodes"] == []


def test_a_turn_that_cannot_be_played_is_refused_before_the_stream(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["Never sent."]))
    client = make_client(server)
    sid = session(client)
    user = client.post(
        f"/api/sessions/{sid}/messages", json={"role": "user", "content": "hi"}
    ).json()["node"]
    refused = client.post(
        f"/api/sessions/{sid}/turns", json={"kind": "reroll", "node_id": user["id"]}
    )
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_turn"
    assert "reroll" in refused.json()["detail"]
    no_text = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say"})
    assert no_text.status_code == 422 and "text" in no_text.json()["detail"]
    stale = client.post(
        f"/api/sessions/{sid}/turns",
        json={"kind": "continue"},
        headers={"If-Match": '"0"'},
    )
    assert stale.status_code == 412 and stale.json()["current_version"] == 1
    assert server.requests == []


def test_without_a_model_a_turn_is_503_naming_what_to_set(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client()
    sid = session(client)
    response = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hi."})
    assert response.status_code == 503
    assert response.json()["code"] == "no_model" and "model" in response.json()["detail"]
