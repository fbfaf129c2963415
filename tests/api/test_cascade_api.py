"""A cascade through the API (TestClient, both backends): its events, stopped with DELETE
while a reply is awaited, posted again to go on, its outcome; refusals before the stream."""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

from mnemosyne import Store, schema_from_mapping
from mnemosyne.edits import Delete
from orchestrator.loopback import ModelServer, Reply
from tests.api.test_turns_api import events, play, session

SCHEMA = schema_from_mapping(
    {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
)


class Story:
    """Numbered replies hitting for ``hit`` hp; with ``hold`` set, the reply to the torch
    waits until released (``asked`` is set when that call has come)."""

    def __init__(self) -> None:
        self.hit = 10
        self.count = 0
        self.hold = False
        self.release = threading.Event()
        self.asked = threading.Event()

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        if "response_format" in request:
            return json.dumps({"operations": [{"op": "inc", "path": "hp", "value": -self.hit}]})
        self.count += 1
        if self.hold and request["messages"][-1]["content"] in ("I light a torch.", "I wait."):
            self.asked.set()
            self.release.wait(60)  # until the test has stopped the cascade
            return Reply(f"Reply {self.count}.")
        return f"Reply {self.count}."


# Stopping cancels the model call the server was holding: its connection, abandoned by
# the HTTP client, is closed when it is collected (a ResourceWarning), here, not in the
# next test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_cascade_streams_stops_and_goes_on_when_posted_again(
    store: Store, make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    story = Story()
    server = serve(story)
    client = make_client(server)
    sid = store.create_session(schema=SCHEMA).id
    old = []
    for text in ("I enter the cave.", "I light a torch.", "I call out."):
        node = events(play(client, sid, {"kind": "say", "text": text}))[-1][1]
        old += [node["user_node"]["id"], node["node"]["id"]]
    fork, _ = store.add_sibling(sid, old[0], "I walk around the cave.")
    story.hit, story.hold = 3, True
    plan = client.get(f"/api/sessions/{sid}/cascade", params={"from_id": old[0][:8]}).json()
    assert (plan["fork_id"], plan["leaf_id"], plan["total"], plan["done"]) == (
        fork.id, old[-1], 5, 0,
    )  # fmt: skip

    def stop() -> None:
        story.asked.wait(30)
        (running,) = client.get(f"/api/sessions/{sid}/cascades?status=running").json()["cascades"]
        stopped = client.delete(f"/api/sessions/{sid}/cascades/{running['cascade_id']}")
        assert stopped.status_code == 202

    stopper = threading.Thread(target=stop)
    stopper.start()
    response = client.post(f"/api/sessions/{sid}/cascade", json={})
    stopper.join()
    assert response.status_code == 201, response.text
    seen = events(response)
    kinds = [kind for kind, _, _ in seen]
    assert kinds[0] == "cascade" and kinds[-1] == "outcome"
    first = seen[0][1]
    assert (first["fork_id"], first["original_id"], first["leaf_id"]) == (fork.id, old[0], old[-1])
    assert first["total"] == 5 and first["status"] == "running"
    assert response.headers["location"] == f"/api/sessions/{sid}/cascades/{first['cascade_id']}"
    progress = [data for kind, data, _ in seen if kind == "progress"]
    assert [(p["step"], p["total"], p["old_id"]) for p in progress] == [
        (n, 5, old[n]) for n in (1, 2, 3)
    ]
    steps = [data for kind, data, _ in seen if kind == "step"]
    assert [(s["step"], s["generated"]) for s in steps] == [(1, True), (2, False)]
    assert "token" in kinds  # the engine's events of the first reply
    outcome = seen[-1][1]
    assert outcome["stopped"] and not outcome["complete"] and outcome["done"] == 2
    assert outcome["divergence"]["hp"] == [90, 97]
    status = client.get(response.headers["location"]).json()
    assert status["status"] == "cancelled" and status["outcome"] == outcome

    story.release.set()
    story.hold = False
    again = client.post(f"/api/sessions/{sid}/cascade", json={"node_id": fork.id[:8]})
    assert again.status_code == 201, again.text
    seen = events(again)
    assert [d["step"] for k, d, _ in seen if k == "step"] == [3, 4, 5]
    outcome = seen[-1][1]
    assert outcome["complete"] and outcome["old_id"] == old[-1]
    assert outcome["divergence"]["hp"] == [70, 91]
    session_now = client.get(f"/api/sessions/{sid}").json()
    assert outcome["head_id"] == session_now["head_id"] == outcome["new_id"]
    assert outcome["version"] == session_now["version"]
    node = client.get(f"/api/sessions/{sid}/nodes/{outcome['new_id']}").json()
    assert node["metadata"]["cascade"] == {"from": old[0], "of": old[-1], "to": old[-1]}
    gc.collect()


def test_what_cannot_be_cascaded_is_refused_before_the_stream(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Story()))
    sid = session(client)
    node = events(play(client, sid, {"kind": "say", "text": "Hello."}))[-1][1]
    refused = client.post(f"/api/sessions/{sid}/cascade", json={})
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_cascade"
    assert "no earlier alternative" in refused.json()["detail"]
    events(play(client, sid, {"kind": "reroll"}))
    empty = client.post(f"/api/sessions/{sid}/cascade", json={})
    assert empty.status_code == 422 and "nothing to cascade" in empty.json()["detail"]
    planned = client.get(f"/api/sessions/{sid}/cascade")
    assert planned.status_code == 422 and planned.json()["code"] == "invalid_cascade"
    unknown = client.post(f"/api/sessions/{sid}/cascade", json={"to_id": "ffffffff"})
    assert unknown.status_code == 404
    wrong = client.post(f"/api/sessions/{sid}/cascade", json={"leaf": node["node"]["id"]})
    assert wrong.status_code == 422 and wrong.json()["code"] == "invalid_request"
    gone = client.delete(f"/api/sessions/{sid}/cascades/0123456789abcdef")
    assert gone.status_code == 404
    unknown_events = client.get(f"/api/sessions/{sid}/cascades/0123456789abcdef/events")
    assert unknown_events.status_code == 404 and unknown_events.json()["code"] == "unknown_turn"


def test_stopping_a_cascade_waiting_for_a_turn_leaves_that_turn_whole(
    store: Store, make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    story = Story()
    client = make_client(serve(story))
    sid = store.create_session(schema=SCHEMA).id
    first = events(play(client, sid, {"kind": "say", "text": "I enter the cave."}))[-1][1]
    events(play(client, sid, {"kind": "say", "text": "I call out."}))
    store.add_sibling(sid, first["user_node"]["id"], "I walk around the cave.")
    story.hold = True
    played: list[Any] = []
    turn = threading.Thread(
        target=lambda: played.append(play(client, sid, {"kind": "say", "text": "I wait."}))
    )
    turn.start()
    assert story.asked.wait(30)  # the turn holds the session's lock, its model call waits
    cascaded: list[Any] = []
    waiting = threading.Thread(
        target=lambda: cascaded.append(client.post(f"/api/sessions/{sid}/cascade", json={}))
    )
    waiting.start()
    for _ in range(300):
        running = client.get(f"/api/sessions/{sid}/cascades?status=running").json()["cascades"]
        if running:
            break
        threading.Event().wait(0.05)
    (found,) = running
    assert client.delete(f"/api/sessions/{sid}/cascades/{found['cascade_id']}").status_code == 202
    story.release.set()
    turn.join(30)
    waiting.join(30)
    kinds = [kind for kind, _, _ in events(played[0])]
    assert kinds[-1] == "node", kinds  # the turn went on: its reply stored whole
    reply = events(played[0])[-1][1]["node"]
    assert not reply["metadata"].get("incomplete") and reply["content"].startswith("Reply")
    outcome = events(cascaded[0])[-1]
    assert outcome[0] == "outcome" and outcome[1]["made"] == [] and outcome[1]["stopped"]


def test_a_trashed_fork_or_original_is_refused_naming_it(
    store: Store, make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(Story()))
    sid = store.create_session(schema=SCHEMA).id
    first = events(play(client, sid, {"kind": "say", "text": "I enter the cave."}))[-1][1]
    original = first["user_node"]["id"]
    fork, _ = store.add_sibling(sid, original, "I walk around the cave.")
    other, _ = store.add_sibling(sid, original, "I run.")
    store.edit(sid, Delete(node_id=other.id))
    for body in ({"node_id": other.id}, {"node_id": fork.id, "from_id": other.id}):
        refused = client.post(f"/api/sessions/{sid}/cascade", json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["code"] == "invalid_cascade"
        assert f"node {other.id[:8]}" in refused.json()["detail"]
        assert "no longer in the story's tree" in refused.json()["detail"]
    assert client.get(f"/api/sessions/{sid}/cascades").json()["cascades"] == []
