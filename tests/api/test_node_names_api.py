"""The API takes node names (``HEAD``, ``@``, ``HEAD~N``, ``HEAD^``) in paths, queries and
bodies, as the store does; a name that leads nowhere is a 404 saying why."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.api.test_api import add, new_session, problem


def test_names_in_paths_queries_and_bodies(client: TestClient) -> None:
    sid = new_session(client)["id"]
    user = add(client, sid, "user", "I attack.")
    hit = add(
        client, sid, "assistant", "It bites.", delta=[{"op": "set", "path": "hp", "value": 9}]
    )
    nodes = f"/api/sessions/{sid}/nodes"
    assert client.get(f"{nodes}/HEAD").json()["id"] == hit["id"]
    assert client.get(f"{nodes}/@~1").json()["id"] == user["id"]
    assert client.get(f"{nodes}/HEAD%5E").json()["id"] == user["id"]  # HEAD^, escaped
    assert client.get(f"{nodes}/HEAD~1/children").json()[0]["id"] == hit["id"]
    state = client.get(f"/api/sessions/{sid}/state", params={"node_id": "HEAD~1"}).json()
    assert state["node_id"] == user["id"] and state["variables"] == {}
    fork = client.post(f"{nodes}/HEAD/fork", json={"content": "You dodge."})
    assert fork.status_code == 201, fork.text
    moved = client.put(f"/api/sessions/{sid}/head", json={"node_id": "HEAD~1"})
    assert moved.status_code == 200 and moved.json()["session"]["head_id"] == user["id"]
    edited = client.post(
        f"/api/sessions/{sid}/edits",
        json={"operations": [{"op": "rewrite", "node_id": "@", "content": "I flee."}]},
    )
    assert edited.status_code == 200, edited.text
    assert client.get(f"{nodes}/{user['id']}").json()["content"] == "I flee."


def test_a_name_that_leads_nowhere_says_why(client: TestClient) -> None:
    sid = new_session(client)["id"]
    body = problem(client.get(f"/api/sessions/{sid}/nodes/HEAD"), 404, "unknown_node")
    assert body["detail"] == f"HEAD: session {sid} is empty: it has no HEAD yet"
    first = add(client, sid, "user", "Hello.")
    add(client, sid, "assistant", "Hi.")
    body = problem(client.get(f"/api/sessions/{sid}/nodes/HEAD~5"), 404, "unknown_node")
    assert body["detail"] == (
        f"HEAD~5: the path from the root to HEAD has 2 nodes (HEAD~1 is {first['id'][:8]})"
    )
    refused = problem(client.put(f"/api/sessions/{sid}/head", json={"node_id": "head"}), 422)
    assert "node_id" in refused["detail"] and "HEAD is written in capitals" in refused["detail"]
