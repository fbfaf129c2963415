"""``POST .../nodes/{node_id}/replay``: a reply's prompt sent again with something
changed, over HTTP (both databases, model servers on loopback: the session's and a
profile's)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from orchestrator.loopback import ModelServer, Reply

from .test_turns_api import events, play, session

NOTHING = '{"operations": []}'


def answers(request: dict[str, Any]) -> Reply | str:
    if "response_format" in request:
        return NOTHING
    if request["model"] == "missing":
        return Reply(status=404, error="The model `missing` does not exist")
    return f"{request['model']} answers at {request.get('temperature', 'default')}."


def replay(client: TestClient, sid: str, node: str, body: dict[str, Any], **given: Any) -> Any:
    return client.post(f"/api/sessions/{sid}/nodes/{node}/replay", json=body, **given)


def said(client: TestClient, sid: str) -> dict[str, Any]:
    return events(play(client, sid, {"kind": "say", "text": "Hello."}))[-1][1]


def test_a_replay_streams_and_stores_each_alternative(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(answers))
    sid = session(client)
    first = said(client, sid)
    original = first["node"]["id"]
    answer = replay(
        client,
        sid,
        original,
        {"model": "openai/other", "params": {"temperature": 1.1}, "n": 2},
        headers={"If-Match": f'"{first["session"]["version"]}"'},
    )
    assert answer.status_code == 201, answer.text
    got = events(answer)
    kinds = [kind for kind, _, _ in got]
    assert kinds[-1] == "done" and kinds.count("replay") == 2 and "token" in kinds
    tokens = "".join(d["text"] for k, d, _ in got if k == "token" and d["index"] == 1)
    assert tokens == "other answers at 1.1."
    done = got[-1][1]
    made = [r["node"] for r in done["replays"]]
    assert [m["content"] for m in made] == ["other answers at 1.1."] * 2
    assert all(m["parent_id"] == first["node"]["parent_id"] for m in made)
    assert done["replays"][0]["replay"] == {
        "of": original,
        "sent": "as stored",
        "changed": {
            "model": ["openai/gm", "openai/other"],
            "params": {"temperature": [None, 1.1]},
        },
    }
    assert done["session"]["head_id"] == made[1]["id"]
    shown = client.get(f"/api/sessions/{sid}/nodes/{made[0]['id']}").json()
    assert shown["metadata"]["replay"]["of"] == original
    assert len(shown["siblings"]) == 3
    trace = client.get(f"/api/sessions/{sid}/nodes/{made[0]['id']}/trace").json()
    assert trace["verified"] and trace["model"] == "openai/other"


def test_a_profile_and_a_rebuilt_prompt(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer], tmp_path: Path
) -> None:
    home, far = serve(answers), serve(answers)
    client = make_client(home)
    made = client.put(
        "/api/profiles/Far", json={"model": "openai/far", "api_base": far.url, "params": {}}
    )
    assert made.status_code in (200, 201), made.text
    sid = session(client)
    original = said(client, sid)["node"]["id"]
    done = events(replay(client, sid, original, {"profile": "Far"}))[-1][1]
    assert done["replays"][0]["node"]["content"] == "far answers at default."
    assert len(far.requests) == 1
    rebuilt = events(replay(client, sid, original, {"note": "Rain."}))[-1][1]["replays"][0]
    assert rebuilt["replay"]["sent"] == "rebuilt"
    assert rebuilt["replay"]["changed"] == {"note": ["", "Rain."]}
    sent = [r for r in home.requests if "response_format" not in r.json][-1].messages
    assert {"role": "system", "content": "Rain."} in sent
    assert rebuilt["state"]["author_note"]["text"] == "Rain."


def test_refusals_come_before_the_stream_and_store_nothing(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    client = make_client(serve(answers))
    sid = session(client)
    first = said(client, sid)
    reply, player = first["node"]["id"], first["user_node"]["id"]
    version = first["session"]["version"]

    def refused(node: str, body: dict[str, Any], status: int = 422, **given: Any) -> str:
        answer = replay(client, sid, node, body, **given)
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        return json.dumps(answer.json())

    assert "user message" in refused(player, {"params": {"seed": 1}})
    assert "changes something" in refused(reply, {})
    assert "less than or equal to 8" in refused(reply, {"params": {"seed": 1}, "n": 9})
    assert "temperature" in refused(reply, {"params": {"temperature": 9}})
    assert "no lore entry" in refused(reply, {"lore_on": ["book:1"]})
    assert "body.colour" in refused(reply, {"colour": "red"})
    # no template over HTTP: Jinja sent to the server could render without end
    loop = "{% for i in range(10**6) %}"
    hostile = {"system": loop * 2 + "{% endfor %}" * 2}
    assert "body.templates" in refused(reply, {"templates": hostile})
    assert "NUL" in refused(reply, {"note": "a\x00b"})
    refused(reply, {"profile": "Nope"}, 404)
    refused(reply, {"seed": 1, "params": {"seed": 2}}, 422)
    refused(reply, {"params": {"seed": 1}}, 412, headers={"If-Match": '"99"'})
    refused("0" * 32, {"params": {"seed": 1}}, 404)
    failed = events(replay(client, sid, reply, {"model": "openai/missing"}))
    assert failed[-1][0] == "error" and failed[-1][1]["code"] == "model_error"
    assert client.get(f"/api/sessions/{sid}").json()["version"] == version


def test_a_retry_with_its_idempotency_key_is_not_replayed_twice(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(answers)
    client = make_client(server)
    sid = session(client)
    original = said(client, sid)["node"]["id"]
    body = {"params": {"temperature": 0.5}}
    key = {"Idempotency-Key": "replay-1"}
    first = events(replay(client, sid, original, body, headers=key))[-1][1]
    asked = len(server.requests)
    again = replay(client, sid, original, body, headers=key)
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert events(again)[-1][:2] == ("done", first)
    # a process that never played it (another worker, a restart): the key stored with it
    elsewhere = replay(make_client(server), sid, original, body, headers=key)
    assert elsewhere.status_code == 200 and elsewhere.headers["Idempotent-Replayed"] == "true"
    assert events(elsewhere) == [("done", first, "0")]
    assert len(server.requests) == asked
    other = replay(client, sid, original, {"params": {"temperature": 0.6}}, headers=key)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"


def test_a_retry_while_the_replay_still_runs_follows_it_and_replays_nothing(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    def slow(request: dict[str, Any]) -> Reply | str:
        if "response_format" in request or request["model"] != "slow":
            return answers(request)
        return Reply("The slow model answers at last.", delay=1.0)

    server = serve(slow)
    client = make_client(server)
    sid = session(client)
    original = said(client, sid)["node"]["id"]
    body, key = {"model": "openai/slow"}, {"Idempotency-Key": "slow-1"}
    asked = len(story_calls(server))
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(replay, client, sid, original, body, headers=key)
        deadline = time.monotonic() + 10
        while len(story_calls(server)) == asked and time.monotonic() < deadline:
            time.sleep(0.02)
        again = replay(client, sid, original, body, headers=key)  # the first still runs
        answer = first.result(timeout=30)
    assert answer.status_code == 201, answer.text
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert events(again)[-1][:2] == events(answer)[-1][:2]
    assert events(again)[-1][0] == "done"
    assert len(story_calls(server)) == asked + 1  # one replay, followed twice
    shown = client.get(f"/api/sessions/{sid}/nodes/{original}").json()
    assert len(shown["siblings"]) == 2


def story_calls(server: ModelServer) -> list[Any]:
    return [r for r in server.requests if "response_format" not in r.json]


def test_the_replay_event_declares_its_index(make_client: Callable[..., TestClient]) -> None:
    spec = make_client().get("/openapi.json").json()
    stream = spec["paths"]["/api/sessions/{session_id}/nodes/{node_id}/replay"]["post"]
    kinds = stream["responses"]["201"]["content"]["text/event-stream"]["schema"]["oneOf"]
    [event] = [kind for kind in kinds if kind["properties"]["event"]["const"] == "replay"]
    data = event["properties"]["data"]["contentSchema"]
    assert "index" in data["required"] and data["properties"]["index"]["type"] == "integer"
    assert {"node", "replay", "state", "warnings"} <= set(data["required"])
