"""Tags and branches over HTTP (/api/sessions/{sid}/refs), on SQLite and PostgreSQL:
list, create, rename, move, delete, each with If-Match and one undo step; names taken
wherever the API takes a node; bad input refused with a problem naming it."""

from __future__ import annotations

from collections.abc import Callable

from fastapi.testclient import TestClient

from mnemosyne import Store
from orchestrator.loopback import ModelServer
from tests.orchestrator.test_turn import Scripted

from .test_turns_api import events, play, session


def _story(store: Store) -> tuple[str, list[str]]:
    sid = store.create_session(title="Names").id
    ids = [
        store.append(sid, role, text)[0].id
        for role, text in [
            ("user", "Hello."),
            ("assistant", "Well met."),
            ("user", "Who are you?"),
            ("assistant", "Seraphina."),
        ]
    ]
    return sid, ids


def _names(client: TestClient, sid: str) -> dict[str, tuple[str, str]]:
    answer = client.get(f"/api/sessions/{sid}/refs")
    assert answer.status_code == 200, answer.text
    return {ref["name"]: (ref["kind"], ref["node_id"]) for ref in answer.json()["refs"]}


def test_names_made_changed_and_taken_back(client: TestClient, store: Store) -> None:
    sid, ids = _story(store)
    base = f"/api/sessions/{sid}/refs"
    version = store.session(sid).version
    made = client.post(
        base,
        json={"name": "first-meeting", "kind": "tag", "node_id": "HEAD~2"},
        headers={"If-Match": f'"{version}"'},
    )
    assert made.status_code == 201, made.text
    assert made.json()["results"][0]["action"] == "tag"
    assert made.json()["nodes"][0]["id"] == ids[1]
    assert made.headers["etag"] == f'"{version + 1}"'
    stale = client.post(
        base, json={"name": "late", "kind": "tag"}, headers={"If-Match": f'"{version}"'}
    )
    assert stale.status_code == 412
    assert client.post(base, json={"name": "main", "kind": "branch"}).status_code == 201
    listed = client.get(base)
    assert listed.json()["refs"][1] == {
        **listed.json()["refs"][1],
        "name": "main",
        "kind": "branch",
        "node_id": ids[3],
        "place": "tree",
        "at_head": True,
        "text": "Seraphina.",
    }
    etag = listed.headers["etag"]
    assert client.get(base, headers={"If-None-Match": etag}).status_code == 304
    assert [r["name"] for r in client.get(base, params={"kind": "tag"}).json()["refs"]] == [
        "first-meeting"
    ]

    # a name wherever a node is taken: a body, a path, a query
    moved = client.put(f"/api/sessions/{sid}/head", json={"node_id": "first-meeting"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["session"]["head_id"] == ids[1]
    node = client.get(f"/api/sessions/{sid}/nodes/first-meeting~1")
    assert node.status_code == 200, node.text
    assert node.json()["id"] == ids[0]
    client.put(f"/api/sessions/{sid}/head", json={"node_id": "main"})

    renamed = client.patch(f"{base}/first-meeting", json={"name": "meeting", "node_id": "@~1"})
    assert renamed.status_code == 200, renamed.text
    assert _names(client, sid) == {"meeting": ("tag", ids[2]), "main": ("branch", ids[3])}
    assert client.delete(f"{base}/main").status_code == 200
    assert _names(client, sid) == {"meeting": ("tag", ids[2])}
    client.post(f"/api/sessions/{sid}/undo")
    client.put(f"/api/sessions/{sid}/head", json={"node_id": ids[0]})
    client.post(f"/api/sessions/{sid}/undo")  # the rename and move: one step
    assert _names(client, sid) == {"first-meeting": ("tag", ids[1]), "main": ("branch", ids[3])}
    assert store.session(sid).head_id == ids[0]  # undoing a name change leaves HEAD be
    assert [e.action for e in store.history(sid)][-3:] == ["branch", "rename", "delete name"]


def test_bad_names_are_refused_and_store_nothing(client: TestClient, store: Store) -> None:
    sid, _ = _story(store)
    base = f"/api/sessions/{sid}/refs"
    client.post(base, json={"name": "camp", "kind": "tag", "node_id": "HEAD~1"})
    version = store.session(sid).version
    for body, status, words in [
        ({"name": "cafe", "kind": "tag"}, 422, "name"),
        ({"name": "HEAD", "kind": "tag"}, 422, "HEAD"),
        ({"name": "camp", "kind": "tag"}, 422, "tag 'camp' exists already"),
        ({"name": "camp", "kind": "branch"}, 422, "'camp' is a tag already"),
        ({"name": "x-y", "kind": "label"}, 422, "kind"),
        ({"name": "x-y", "kind": "tag", "node_id": "nowhere"}, 404, "no tag or branch named"),
        ({"name": "x-y", "kind": "tag", "colour": "red"}, 422, "colour"),
    ]:
        answer = client.post(base, json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert words in answer.text, (body, answer.text)
    assert client.delete(f"{base}/nowhere").status_code == 404
    assert client.patch(f"{base}/nowhere", json={"name": "x-y"}).status_code == 404
    assert client.patch(f"{base}/camp", json={}).status_code == 200  # nothing to change
    # to the name and the node it has: nothing changes, no undo step
    same = client.patch(f"{base}/camp", json={"name": "camp", "node_id": "HEAD~1"})
    assert same.status_code == 200, same.text
    assert store.history(sid)[-1].action == "tag"
    assert store.session(sid).version == version
    assert _names(client, sid) == {"camp": ("tag", store.node(sid, "HEAD~1").id)}


def test_a_branch_follows_the_turns_played_from_its_tip(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    """Through the engine's own commit (the loopback model): a say, a reroll, undo, an
    edit above the tip."""
    client = make_client(serve(Scripted(["Welcome.", "A goblin!", "A wolf!", "Hello again."], [])))
    sid = session(client)
    base = f"/api/sessions/{sid}"
    said = events(play(client, sid, {"kind": "say", "text": "Hi."}))[-1][1]
    first, hi = said["node"]["id"], said["user_node"]["id"]
    assert client.post(f"{base}/refs", json={"name": "main", "kind": "branch"}).status_code == 201
    assert client.post(f"{base}/refs", json={"name": "hello", "kind": "tag"}).status_code == 201
    second = events(play(client, sid, {"kind": "say", "text": "I look."}))[-1][1]["node"]["id"]
    assert _names(client, sid) == {"main": ("branch", second), "hello": ("tag", first)}
    rerolled = events(play(client, sid, {"kind": "reroll"}))[-1][1]["node"]["id"]
    assert _names(client, sid)["main"] == ("branch", rerolled)
    client.post(f"{base}/undo")  # the reroll
    client.post(f"{base}/undo")  # the second say: the branch back on the first reply
    assert _names(client, sid) == {"main": ("branch", first), "hello": ("tag", first)}
    # an edit of the player's message above the tip forks: the branch stays
    edited = events(play(client, sid, {"kind": "edit", "node_id": hi, "text": "Hello."}))
    assert client.get(base).json()["head_id"] == edited[-1][1]["node"]["id"]
    assert _names(client, sid)["main"] == ("branch", first)
