"""Turns through the API (TestClient, both backends): the events of a turn, its status as
a resource, the version after it, Idempotency-Key, refusals before the stream, errors as
events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from orchestrator.loopback import ModelServer, Reply
from tests.orchestrator.test_turn import Scripted, delta

HURT = delta({"op": "set", "path": "hp", "value": 90})


def events(response: Any) -> list[tuple[str, Any, str]]:
    """The (event, data, id) of each server-sent event (comments, keep-alives, skipped)."""
    out = []
    for block in response.text.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        out.append((fields["event"], json.loads(fields["data"]), fields["id"]))
    return out


def session(client: TestClient) -> str:
    return client.post("/api/sessions", json={"title": "turns"}).json()["session"]["id"]


def play(client: TestClient, sid: str, body: dict[str, Any], **given: Any) -> Any:
    response = client.post(f"/api/sessions/{sid}/turns", json=body, **given)
    assert response.status_code in (200, 201), response.text
    return response


def test_a_turn_streams_its_events_and_is_a_resource(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    reply = Reply("You see a long corridor lit by torches.", reasoning="Describe the place.")
    server = serve(Scripted([reply], [HURT]))
    client = make_client(server)
    sid = session(client)
    response = play(client, sid, {"kind": "say", "text": "I look around."})
    assert response.status_code == 201
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "etag" not in response.headers  # the version before the turn is no ETag of it
    seen = events(response)
    kinds = [kind for kind, _, _ in seen]
    assert kinds[0] == "turn" and kinds[-1] == "node" and "error" not in kinds
    assert [number for _, _, number in seen] == [str(i) for i in range(len(seen))]
    started = seen[0][1]
    assert started["status"] == "running" and started["request"]["text"] == "I look around."
    location = response.headers["location"]
    assert location == f"/api/sessions/{sid}/turns/{started['turn_id']}"
    assert "".join(data["text"] for kind, data, _ in seen if kind == "token") == reply.content
    assert kinds.index("reasoning") < kinds.index("token")
    committed = seen[-1][1]
    assert committed["node"]["content"] == reply.content
    assert committed["node"]["metadata"]["reasoning"] == "Describe the place."
    assert committed["state"]["variables"] == {"hp": 90}

    status = client.get(location).json()
    assert status["status"] == "done" and status["ended_at"] is not None
    assert status["node_id"] == committed["node"]["id"]
    assert status["user_node_id"] == committed["user_node"]["id"]
    assert status["version"] == committed["session"]["version"]
    assert status["head_id"] == committed["node"]["id"] and status["incomplete"] is False
    assert status["result"] == committed
    trace = client.get(f"/api/sessions/{sid}/nodes/{status['node_id']}/trace").json()
    assert trace["verified"] is True and trace["messages"] == server.requests[0].messages


def test_the_last_event_carries_the_version_a_client_writes_with_next(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Scripted(["The goblin bites.", "The goblin misses."])))
    sid = session(client)
    version = client.get(f"/api/sessions/{sid}").headers["etag"]
    said = play(client, sid, {"kind": "say", "text": "I attack."}, headers={"If-Match": version})
    session_after = events(said)[-1][1]["session"]
    version = f'"{session_after["version"]}"'
    assert version != '"0"' and session_after["head_id"] == events(said)[-1][1]["node"]["id"]
    # a client that keeps the ETag it was last given writes right after the turn
    rerolled = play(client, sid, {"kind": "reroll"}, headers={"If-Match": version})
    version = f'"{events(rerolled)[-1][1]["session"]["version"]}"'
    moved = client.put(
        f"/api/sessions/{sid}/head",
        json={"node_id": events(said)[-1][1]["node"]["id"]},
        headers={"If-Match": version},
    )
    assert moved.status_code == 200, moved.text
    projection = client.get(f"/api/sessions/{sid}/projection").json()
    assert projection["nodes"][-1]["content"] == "The goblin bites."


def test_a_retry_with_the_same_idempotency_key_does_not_play_twice(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["The door creaks open."]))
    client = make_client(server)
    sid = session(client)
    body = {"kind": "say", "text": "I push the door."}
    key = {"Idempotency-Key": "push-1", "If-Match": '"0"'}
    first = events(play(client, sid, body, headers=key))
    again = play(client, sid, body, headers=key)  # its If-Match is stale now: no 412
    assert again.status_code == 200
    assert events(again) == first[-1:]  # the turn has ended: its last event
    assert again.headers["location"].endswith(first[0][1]["turn_id"])
    assert len([r for r in server.requests if r.json.get("stream")]) == 1
    other = client.post(
        f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "I kick it."}, headers=key
    )
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert len(client.get(f"/api/sessions/{sid}/tree").json()["nodes"]) == 2


def test_a_turn_that_failed_is_played_again_with_its_key(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted([Reply(status=401, error="Incorrect API key"), "Now it works."]))
    client = make_client(server)
    sid = session(client)
    body, key = {"kind": "say", "text": "Hello?"}, {"Idempotency-Key": "hello-1"}
    failed = events(play(client, sid, body, headers=key))
    assert failed[-1][0] == "error"  # nothing was stored: the key may try again
    again = play(client, sid, body, headers=key)
    assert again.status_code == 201 and events(again)[-1][0] == "node"
    assert events(again)[0][1]["turn_id"] != failed[0][1]["turn_id"]
    replayed = play(client, sid, body, headers=key)
    assert replayed.status_code == 200 and events(replayed) == events(again)[-1:]


def test_an_ended_turns_events_replay_its_last_event(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Scripted(["Rain falls."])))
    sid = session(client)
    seen = events(play(client, sid, {"kind": "say", "text": "I look up."}))
    turn_id = seen[0][1]["turn_id"]
    replay = client.get(f"/api/sessions/{sid[:8]}/turns/{turn_id}/events")
    assert replay.status_code == 200 and events(replay) == seen[-1:]
    last = seen[-1][2]
    after_last = client.get(
        f"/api/sessions/{sid}/turns/{turn_id}/events", headers={"Last-Event-ID": last}
    )
    assert events(after_last) == []
    bad = client.get(f"/api/sessions/{sid}/turns/{turn_id}/events", headers={"Last-Event-ID": "x1"})
    assert bad.status_code == 400 and bad.json()["code"] == "bad_last_event_id"
    listed = client.get(f"/api/sessions/{sid}/turns").json()["turns"]
    assert [turn["turn_id"] for turn in listed] == [turn_id]
    assert client.get(f"/api/sessions/{sid}/turns?status=running").json()["turns"] == []
    unknown = client.get(f"/api/sessions/{sid}/turns/{'0' * 32}")
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_turn"
    other = session(client)
    assert client.get(f"/api/sessions/{other}/turns/{turn_id}").status_code == 404
    ended = client.delete(f"/api/sessions/{sid}/turns/{turn_id}")
    assert ended.status_code == 200 and ended.json()["status"] == "done"


def test_a_failing_model_ends_the_stream_with_an_error_event(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Scripted([Reply(status=401, error="Incorrect API key")])))
    sid = session(client)
    seen = events(play(client, sid, {"kind": "say", "text": "Hello?"}))
    kind, problem, _ = seen[-1]
    assert kind == "error"
    assert problem["status"] == 502 and problem["code"] == "model_error"
    assert problem["kind"] == "auth"
    assert client.get(f"/api/sessions/{sid}/tree").json()["nodes"] == []
    status = client.get(f"/api/sessions/{sid}/turns/{seen[0][1]['turn_id']}").json()
    assert status["status"] == "failed"
    assert {k: v for k, v in status["problem"].items() if v is not None} == problem
    assert status["node_id"] is None


def test_a_turn_that_cannot_be_played_is_refused_before_the_stream(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["Never sent."]))
    client = make_client(server)
    sid = session(client)
    user = client.post(
        f"/api/sessions/{sid}/messages", json={"role": "user", "content": "hi"}
    ).json()["nodes"][0]
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
    json_only = client.post(
        f"/api/sessions/{sid}/turns",
        json={"kind": "continue"},
        headers={"Accept": "application/json"},
    )
    assert json_only.status_code == 406 and json_only.json()["code"] == "not_acceptable"
    assert server.requests == []
    assert client.get(f"/api/sessions/{sid}/turns").json()["turns"] == []


def test_without_a_model_a_turn_is_503_naming_what_to_set(
    make_client: Callable[..., TestClient],
) -> None:
    client = make_client()
    sid = session(client)
    response = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": "Hi."})
    assert response.status_code == 503
    assert response.json()["code"] == "no_model" and "model" in response.json()["detail"]


@pytest.mark.parametrize("path", ["", "/{turn_id}", "/{turn_id}/events"])
def test_the_turn_routes_are_documented(client: TestClient, path: str) -> None:
    document = client.get("/openapi.json").json()
    operations = document["paths"][f"/api/sessions/{{session_id}}/turns{path}"]
    schemas = document["components"]["schemas"]
    for operation in operations.values():
        for answer in operation["responses"].values():
            stream = answer.get("content", {}).get("text/event-stream")
            if stream is None:
                continue
            # each event's schema (OpenAPI 3.2's itemSchema; as `schema` in a 3.1 document)
            items = stream.get("itemSchema", stream.get("schema"))["oneOf"]
            names = [item["properties"]["event"]["const"] for item in items]
            assert names[0] == "turn" and {"token", "node", "error", "cancelled"} <= set(names)
            for item in items:  # every schema named is in the document
                ref = item["properties"]["data"]["contentSchema"].get("$ref")
                assert ref is None or ref.removeprefix("#/components/schemas/") in schemas
    assert {"TurnOut", "TurnsOut", "TurnResultOut", "Problem"} <= schemas.keys()
