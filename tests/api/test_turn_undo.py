"""Turn semantics through the API (both backends): a turn is one step of the undo journal
(undo: its nodes to the trash and HEAD back; redo: back again), a message added or a fork
too; continue extends the reply (a new alternative with the whole text); impersonate
ends with a `draft` event and stores nothing."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from orchestrator.loopback import ModelServer
from tests.orchestrator.test_turn import Scripted

from .test_turns_api import HURT, events, play, session


def test_undo_covers_turns_continue_extends_impersonate_drafts(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(Scripted(["Welcome.", "A goblin!", " It bites.", "I run."], [HURT]))
    client = make_client(server)
    sid = session(client)
    base = f"/api/sessions/{sid}"
    first = events(play(client, sid, {"kind": "say", "text": "Hi."}))[-1][1]
    rewrite = {"op": "rewrite", "node_id": first["node"]["id"], "content": "Welcome, friend."}
    assert client.post(f"{base}/edits", json={"operations": [rewrite]}).status_code == 200
    second = events(play(client, sid, {"kind": "say", "text": "I look."}))[-1][1]
    longer = events(play(client, sid, {"kind": "continue"}))[-1][1]
    assert longer["node"]["content"] == "A goblin! It bites."
    assert longer["node"]["metadata"]["continues"] == second["node"]["id"]
    assert longer["node"]["parent_id"] == second["node"]["parent_id"]
    trace = client.get(f"{base}/nodes/{longer['node']['id']}/trace").json()
    assert trace["verified"] and trace.get("continues") == second["node"]["id"]

    version = client.get(base).json()["version"]
    drafted = events(play(client, sid, {"kind": "impersonate"}))
    assert drafted[-1][0] == "draft" and drafted[-1][1]["text"] == "I run."
    assert client.get(base).json()["version"] == version  # nothing stored
    turn = client.get(drafted[0][1]["events"].removesuffix("/events")).json()
    assert turn["status"] == "done" and turn["draft"]["text"] == "I run."

    history = client.get(f"{base}/history").json()["entries"]
    assert [entry["action"] for entry in history] == ["say", "rewrite", "say", "continue"]
    undone = client.post(f"{base}/undo").json()
    assert undone["results"][0]["action"] == "undo continue"
    assert undone["session"]["head_id"] == second["node"]["id"]
    client.post(f"{base}/undo")  # the second say: its message and reply to the trash
    head = client.get(base).json()["head_id"]
    assert head == first["node"]["id"]
    trash = [item["top"]["id"] for item in client.get(f"{base}/trash").json()]
    assert set(trash) == {longer["node"]["id"], second["user_node"]["id"]}
    client.post(f"{base}/undo")  # the rewrite before the turns is still there to undo
    assert client.get(f"{base}/nodes/{head}").json()["content"] == "Welcome."
    for _ in range(3):
        assert client.post(f"{base}/redo").status_code == 200
    assert client.get(base).json()["head_id"] == longer["node"]["id"]
    assert client.get(f"{base}/trash").json() == []


def test_a_message_and_a_fork_are_undoable(client: TestClient) -> None:
    sid = session(client)
    base = f"/api/sessions/{sid}"
    said = client.post(f"{base}/messages", json={"role": "user", "content": "Hello"}).json()
    node = said["nodes"][0]["id"]
    fork = client.post(f"{base}/nodes/{node}/fork", json={"content": "Hi"}).json()
    assert fork["session"]["head_id"] != node
    client.post(f"{base}/undo")
    assert client.get(base).json()["head_id"] == node
    client.post(f"{base}/undo")
    assert client.get(base).json()["head_id"] is None
    assert client.post(f"{base}/redo").json()["session"]["head_id"] == node
