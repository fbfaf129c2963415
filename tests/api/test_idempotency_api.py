"""Writes with an Idempotency-Key, over a real store on each backend: a retry gets the
first answer and applies nothing; another body under the same key is refused; the key
outlives the server process (it is in the database); every write answers WriteOut."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from clotho.api import create_app
from clotho.api.schemas import WriteOut
from mnemosyne import Store
from tests.api.conftest import TOKEN, api_settings

REPLAYED = "idempotent-replayed"


def _session(client: TestClient) -> str:
    made = client.post("/api/sessions", json={"title": "keys"})
    assert made.status_code == 201, made.text
    WriteOut.model_validate(made.json())
    sid: str = made.json()["session"]["id"]
    return sid


def _write(client: TestClient, path: str, key: str, body: Any = None, **headers: str) -> Any:
    return client.post(path, json=body, headers={"Idempotency-Key": key, **headers})


def test_a_retried_write_gets_the_first_answer_and_applies_once(
    client: TestClient, store: Store
) -> None:
    sid = _session(client)
    path = f"/api/sessions/{sid}/messages"
    body = {"role": "user", "content": "I open the door."}
    first = _write(client, path, "k-1", body, **{"If-Match": '"0"'})
    assert first.status_code == 201, first.text
    assert REPLAYED not in first.headers
    assert first.headers["etag"] == '"1"' and first.json()["session"]["version"] == 1
    # the same request again, naming the version it first read: the answer, not a 412
    again = _write(client, path, "k-1", body, **{"If-Match": '"0"'})
    assert again.status_code == 201 and again.headers[REPLAYED] == "true"
    assert again.json() == first.json() and again.headers["etag"] == '"1"'
    # the same body in another order and spacing is the same request
    reordered = client.post(
        path,
        content=b'{ "content": "I open the door.",  "role": "user" }',
        headers={"Idempotency-Key": "k-1", "Content-Type": "application/json"},
    )
    assert reordered.json() == first.json()
    assert len(store.tree(sid).nodes) == 1 and store.session(sid).version == 1
    # a new key is a new write
    other = _write(client, path, "k-2", body)
    assert other.status_code == 201 and other.json()["session"]["version"] == 2


def test_the_same_key_with_another_request_is_refused(client: TestClient, store: Store) -> None:
    sid = _session(client)
    path = f"/api/sessions/{sid}/messages"
    _write(client, path, "k-1", {"role": "user", "content": "one"})
    for retry in (
        _write(client, path, "k-1", {"role": "user", "content": "two"}),
        _write(client, f"/api/sessions/{sid}/undo", "k-1"),
    ):
        assert retry.status_code == 422, retry.text
        assert retry.headers["content-type"].startswith("application/problem+json")
        assert retry.json()["code"] == "idempotency_key_reused"
        assert "k-1" in retry.json()["detail"]
    assert [n.content for n in store.tree(sid).nodes] == ["one"]
    assert store.session(sid).version == 1


def test_keys_are_per_session(client: TestClient) -> None:
    first, second = _session(client), _session(client)
    body = {"role": "user", "content": "hi"}
    a = _write(client, f"/api/sessions/{first}/messages", "same", body)
    b = _write(client, f"/api/sessions/{second}/messages", "same", body)
    assert a.status_code == b.status_code == 201
    assert REPLAYED not in b.headers and b.json()["session"]["id"] == second


def test_an_undo_retried_is_not_undone_twice(client: TestClient, store: Store) -> None:
    sid = _session(client)
    for text in ("a", "b"):
        client.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": text})
    a, b = (n.id for n in store.tree(sid).nodes)
    edits = {"operations": [{"op": "rewrite", "node_id": a, "content": "A"}]}
    done = _write(client, f"/api/sessions/{sid}/edits", "e-1", edits)
    assert done.status_code == 200 and done.json()["results"][0]["action"] == "rewrite"
    assert _write(client, f"/api/sessions/{sid}/edits", "e-1", edits).json() == done.json()
    undone = _write(client, f"/api/sessions/{sid}/undo", "u-1")
    assert _write(client, f"/api/sessions/{sid}/undo", "u-1").json() == undone.json()
    assert store.node(sid, a).content == "a" and store.node(sid, b).content == "b"
    assert [entry.undone for entry in store.history(sid)][-1] is True
    assert sum(1 for entry in store.history(sid) if entry.undone) == 1


def test_a_refused_write_stores_no_key(client: TestClient, store: Store) -> None:
    sid = _session(client)
    body = {"node_id": "ffffffffff"}
    refused = client.put(f"/api/sessions/{sid}/head", json=body, headers={"Idempotency-Key": "h"})
    assert refused.status_code == 404
    client.post(f"/api/sessions/{sid}/messages", json={"role": "user", "content": "hi"})
    node = store.tree(sid).nodes[0].id
    moved = client.put(
        f"/api/sessions/{sid}/head", json={"node_id": node}, headers={"Idempotency-Key": "h"}
    )
    # the refused request stored nothing: the key is free for another request
    assert moved.status_code == 200, moved.text
    assert REPLAYED not in moved.headers and moved.json()["session"]["head_id"] == node


def test_the_key_outlives_the_server(
    make_client: Callable[..., TestClient], store: Store, tmp_path: Path
) -> None:
    """A retry reaching another server process over the same database (here: a new app
    over the same store) gets the first answer: the key is in the database."""
    first_server = make_client()
    sid = _session(first_server)
    body = {"role": "user", "content": "hello"}
    first = _write(first_server, f"/api/sessions/{sid}/messages", "k", body)
    app = create_app(api_settings(tmp_path), store=store, token=TOKEN)
    with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as restarted:
        again = _write(restarted, f"/api/sessions/{sid}/messages", "k", body)
    assert again.status_code == 201 and again.headers[REPLAYED] == "true"
    assert again.json() == first.json()
    assert len(store.tree(sid).nodes) == 1


def test_a_bad_key_is_refused(client: TestClient) -> None:
    sid = _session(client)
    body = {"role": "user", "content": "hi"}
    refused = _write(client, f"/api/sessions/{sid}/messages", "x" * 201, body)
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_request"
    assert "Idempotency-Key" in refused.json()["detail"]


def test_every_write_answers_write_out_with_its_version_as_etag(
    client: TestClient, store: Store
) -> None:
    sid = _session(client)
    base = f"/api/sessions/{sid}"
    answers = [
        client.post(f"{base}/messages", json={"role": "user", "content": "hi"}),
        client.post(f"{base}/messages", json={"role": "assistant", "content": "A"}),
    ]
    a = answers[-1].json()["nodes"][0]["id"]
    answers += [
        client.post(f"{base}/nodes/{a}/fork", json={"content": "B"}),
        client.post(f"{base}/swipe", json={"direction": "prev"}),
        client.put(f"{base}/head", json={"node_id": a}),
        client.post(f"{base}/edits", json={"operations": [{"op": "delete", "node_id": a}]}),
        client.post(f"{base}/undo"),
        client.post(f"{base}/redo"),
        client.delete(f"{base}/trash"),
        client.delete(base),
        client.post(f"/api/trash/sessions/{sid}/restore"),
    ]
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        out = WriteOut.model_validate(answer.json())
        assert answer.headers["etag"] == f'"{out.session.version}"'
        assert out.results, answer.json()
    actions = [WriteOut.model_validate(a.json()).results[0].action for a in answers]
    assert actions[:6] == ["append", "append", "fork", "swipe", "checkout", "delete"]
    assert actions[8:] == ["purge", "trash", "restore"]
    assert WriteOut.model_validate(answers[8].json()).results[0].count == 1


def test_openapi_declares_the_write_headers_and_shape(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    for path, method in (
        ("/api/sessions/{session_id}/messages", "post"),
        ("/api/sessions/{session_id}/edits", "post"),
        ("/api/sessions/{session_id}/undo", "post"),
        ("/api/sessions/{session_id}/head", "put"),
    ):
        operation = document["paths"][path][method]
        headers = {p["name"] for p in operation["parameters"] if p["in"] == "header"}
        assert {"If-Match", "Idempotency-Key"} <= headers, (path, headers)
        ok = next(code for code in operation["responses"] if code.startswith("2"))
        schema = operation["responses"][ok]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/WriteOut"}, (path, schema)
