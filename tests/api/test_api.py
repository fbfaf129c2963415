"""The HTTP API through httpx (FastAPI's TestClient) over a real store on each backend:
sessions, reads, writes with If-Match, atomic edit batches, problems, auth, uploads."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from mnemosyne import Store
from mnemosyne.edits import EDITS
from tests._fixtures import CHAT
from tests._fixtures import ELDORIA as WORLD

PROBLEM = "application/problem+json"


def problem(response: Any, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status
    assert body["detail"]
    if code is not None:
        assert body["code"] == code, body
    return body


def new_session(client: TestClient, **body: Any) -> dict[str, Any]:
    response = client.post("/api/sessions", json=body)
    assert response.status_code == 201, response.text
    return response.json()["session"]


def add(client: TestClient, sid: str, role: str, content: str, **more: Any) -> dict[str, Any]:
    response = client.post(
        f"/api/sessions/{sid}/messages", json={"role": role, "content": content, **more}
    )
    assert response.status_code == 201, response.text
    return response.json()["nodes"][0]


def version(client: TestClient, sid: str) -> int:
    return client.get(f"/api/sessions/{sid}").json()["version"]


# -- auth --


def test_every_route_but_health_needs_the_token(make_client: Callable[..., TestClient]) -> None:
    anonymous = make_client(auth=False)
    assert anonymous.get("/api/health").json()["status"] == "ok"
    refused = anonymous.get("/api/sessions")
    body = problem(refused, 401, "unauthorized")
    assert "Bearer" in refused.headers["www-authenticate"]
    assert "token" in body["detail"]
    wrong = anonymous.get("/api/sessions", headers={"Authorization": "Bearer nope"})
    problem(wrong, 401, "unauthorized")
    assert anonymous.post("/api/sessions", json={}).status_code == 401


# -- sessions --


def test_sessions_are_created_listed_trashed_restored_and_purged(
    client: TestClient, store: Store
) -> None:
    first = new_session(client, title="Eldoria")
    second = new_session(client)
    assert first["title"] == "Eldoria" and first["version"] == 0
    listed = [s["id"] for s in client.get("/api/sessions").json()["sessions"]]
    assert set(listed) == {first["id"], second["id"]}
    got = client.get(f"/api/sessions/{first['id'][:8]}")
    assert got.json()["id"] == first["id"]
    assert got.headers["etag"] == '"0"'

    trashed = client.delete(f"/api/sessions/{first['id']}", headers={"If-Match": '"0"'})
    assert trashed.status_code == 200 and trashed.json()["session"]["trashed_at"]
    assert [s["id"] for s in client.get("/api/sessions").json()["sessions"]] == [second["id"]]
    assert [s["id"] for s in client.get("/api/trash/sessions").json()["sessions"]] == [first["id"]]
    problem(
        client.post(
            f"/api/sessions/{first['id']}/messages", json={"role": "user", "content": "hi"}
        ),
        422,
        "invalid_operation",
    )

    restored = client.post(f"/api/trash/sessions/{first['id']}/restore")
    assert restored.json()["session"]["trashed_at"] is None
    problem(client.delete(f"/api/trash/sessions/{first['id']}"), 422)  # not in the trash
    client.delete(f"/api/sessions/{first['id']}")
    assert client.delete(f"/api/trash/sessions/{first['id']}").status_code == 204
    problem(client.get(f"/api/sessions/{first['id']}"), 404, "unknown_session")
    assert [s.id for s in store.sessions()] == [second["id"]]


def test_unknown_ids_are_404_and_bad_ones_name_the_problem(client: TestClient) -> None:
    sid = new_session(client)["id"]
    problem(client.get("/api/sessions/abcdef123456"), 404, "unknown_session")
    problem(client.get(f"/api/sessions/{sid}/nodes/abcdef123456"), 404, "unknown_node")
    body = problem(client.get("/api/sessions/xyz/tree"), 422)
    assert "'xyz'" in body["detail"]
    problem(client.get("/api/no/such/route"), 404, "no_such_route")
    problem(client.patch("/api/sessions"), 405)


# -- reads --


def test_projection_tree_node_state_diff_blame(client: TestClient) -> None:
    sid = new_session(client)["id"]
    user = add(client, sid, "user", "I attack the goblin.")
    hit = add(
        client, sid, "assistant", "It bites you.", delta=[{"op": "set", "path": "hp", "value": 90}]
    )
    fork = client.post(
        f"/api/sessions/{sid}/nodes/{hit['id']}/fork",
        json={"content": "You dodge.", "delta": [{"op": "set", "path": "hp", "value": 100}]},
    )
    assert fork.status_code == 201
    dodge = fork.json()["nodes"][0]

    projection = client.get(f"/api/sessions/{sid}/projection")
    assert projection.headers["etag"] == f'"{version(client, sid)}"'
    body = projection.json()
    assert [n["content"] for n in body["nodes"]] == ["I attack the goblin.", "You dodge."]
    assert body["nodes"][1]["siblings"] == [hit["id"], dodge["id"]]
    assert body["nodes"][1]["index"] == 1 and body["total"] == 2
    assert "metadata" not in body["nodes"][0]
    tail = client.get(f"/api/sessions/{sid}/projection", params={"limit": 1, "metadata": True})
    assert [n["id"] for n in tail.json()["nodes"]] == [dodge["id"]]
    assert tail.json()["nodes"][0]["metadata"] == {}
    toggled = client.post(
        f"/api/sessions/{sid}/edits", json={"operations": [{"op": "toggle", "node_id": user["id"]}]}
    )
    assert toggled.status_code == 200, toggled.text
    model_view = client.get(f"/api/sessions/{sid}/projection").json()
    assert [n["id"] for n in model_view["nodes"]] == [dodge["id"]] and model_view["total"] == 1
    chat_view = client.get(f"/api/sessions/{sid}/projection", params={"disabled": True}).json()
    assert [(n["id"], n["enabled"]) for n in chat_view["nodes"]] == [
        (user["id"], False),
        (dodge["id"], True),
    ]
    assert chat_view["total"] == 2
    client.post(f"/api/sessions/{sid}/undo")

    tree = client.get(f"/api/sessions/{sid}/tree").json()
    assert [n["id"] for n in tree["nodes"]] == [user["id"], hit["id"], dodge["id"]]
    assert tree["head_id"] == dodge["id"]

    node = client.get(f"/api/sessions/{sid}/nodes/{user['id'][:6]}").json()
    assert node["children"] == [hit["id"], dodge["id"]]
    assert node["delta"] == [] and node["siblings"] == [user["id"]]

    assert client.get(f"/api/sessions/{sid}/state").json()["variables"] == {"hp": 100}
    at_hit = client.get(f"/api/sessions/{sid}/state", params={"node_id": hit["id"]}).json()
    assert at_hit["variables"] == {"hp": 90} and at_hit["node_id"] == hit["id"]
    diff = client.get(
        f"/api/sessions/{sid}/diff", params={"from_id": hit["id"], "to_id": dodge["id"]}
    )
    assert diff.json() == {"hp": [90, 100]}
    blame = client.get(f"/api/sessions/{sid}/blame", params={"path": "hp"}).json()
    assert blame == {"path": "hp", "value": 100, "node_id": dodge["id"]}
    changes = client.get(
        f"/api/sessions/{sid}/changes", params={"path": "hp", "node_id": hit["id"]}
    ).json()
    assert [c["node_id"] for c in changes["changes"]] == [hit["id"]]
    problem(client.get(f"/api/sessions/{sid}/nodes/{hit['id']}/trace"), 404, "no_trace")


def test_reads_answer_if_none_match_with_304(client: TestClient) -> None:
    sid = new_session(client)["id"]
    add(client, sid, "user", "hello")
    first = client.get(f"/api/sessions/{sid}/projection")
    tag = first.headers["etag"]
    again = client.get(f"/api/sessions/{sid}/projection", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.headers["etag"] == tag
    add(client, sid, "assistant", "hi")
    moved = client.get(f"/api/sessions/{sid}/projection", headers={"If-None-Match": tag})
    assert moved.status_code == 200 and len(moved.json()["nodes"]) == 2


# -- writes and versions --


def test_a_stale_if_match_is_refused_with_412_and_changes_nothing(client: TestClient) -> None:
    sid = new_session(client)["id"]
    first = add(client, sid, "user", "one")
    second = add(client, sid, "assistant", "two")
    current = version(client, sid)
    stale = client.put(
        f"/api/sessions/{sid}/head",
        json={"node_id": first["id"]},
        headers={"If-Match": f'"{current - 1}"'},
    )
    body = problem(stale, 412, "conflict")
    assert body["current_version"] == current
    assert stale.headers["etag"] == f'"{current}"'
    assert client.get(f"/api/sessions/{sid}").json()["head_id"] == second["id"]
    fresh = client.put(
        f"/api/sessions/{sid}/head",
        json={"node_id": first["id"]},
        headers={"If-Match": f'"{current}"'},
    )
    assert fresh.status_code == 200
    assert fresh.headers["etag"] == f'"{current + 1}"'
    assert fresh.json()["session"]["head_id"] == first["id"]
    problem(
        client.post(f"/api/sessions/{sid}/undo", headers={"If-Match": "yesterday"}),
        400,
        "bad_if_match",
    )


def test_swipe_moves_between_alternatives(client: TestClient) -> None:
    sid = new_session(client)["id"]
    add(client, sid, "user", "hi")
    a = add(client, sid, "assistant", "A")
    b = client.post(f"/api/sessions/{sid}/nodes/{a['id']}/fork", json={"content": "B"})
    assert b.json()["nodes"][0]["content"] == "B"
    back = client.post(f"/api/sessions/{sid}/swipe", json={"direction": "prev"})
    assert back.json()["nodes"][0]["id"] == a["id"]
    problem(client.post(f"/api/sessions/{sid}/swipe", json={"direction": "up"}), 422)


def test_invalid_bodies_and_deltas_are_422_naming_the_field(client: TestClient) -> None:
    sid = new_session(client)["id"]
    body = problem(
        client.post(f"/api/sessions/{sid}/messages", json={"role": "narrator", "content": "x"}),
        422,
        "invalid_request",
    )
    assert body["errors"][0]["field"] == "body.role"
    problem(client.post(f"/api/sessions/{sid}/messages", content=b"{not json"), 422)
    bad = client.post(
        f"/api/sessions/{sid}/messages",
        json={
            "role": "user",
            "content": "x",
            "delta": [{"op": "inc", "path": "hp", "value": "ten"}],
        },
    )
    body = problem(bad, 422, "invalid_delta")
    assert body["errors"] and "hp" in body["detail"]
    assert client.get(f"/api/sessions/{sid}/tree").json()["nodes"] == []


# -- the editor --


def _story(client: TestClient) -> tuple[str, list[dict[str, Any]]]:
    sid = new_session(client)["id"]
    nodes = [
        add(client, sid, "user", "a"),
        add(client, sid, "assistant", "b", delta=[{"op": "set", "path": "gold", "value": 5}]),
        add(client, sid, "user", "c"),
        add(client, sid, "assistant", "d"),
    ]
    return sid, nodes


def test_an_edit_batch_is_atomic_and_one_undo_step(client: TestClient) -> None:
    sid, (a, b, c, _d) = _story(client)
    before = client.get(f"/api/sessions/{sid}/tree").json()
    response = client.post(
        f"/api/sessions/{sid}/edits",
        json={
            "operations": [
                {"op": "rewrite", "node_id": a["id"], "content": "a2"},
                {"op": "toggle", "node_id": b["id"]},
                {"op": "prune", "node_id": c["id"]},
                {"op": "inject", "parent_id": a["id"], "role": "system", "content": "(a note)"},
            ]
        },
        headers={"If-Match": f'"{before["version"]}"'},
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert [r["action"] for r in result["results"]] == ["rewrite", "toggle", "prune", "inject"]
    assert result["session"]["version"] == before["version"] + 1
    history = client.get(f"/api/sessions/{sid}/history").json()["entries"]
    assert [e["action"] for e in history] == ["append"] * 4 + ["batch"]  # the messages too
    assert len(client.get(f"/api/sessions/{sid}/fragments").json()) == 1
    assert client.get(f"/api/sessions/{sid}/state").json()["variables"] == {}

    undone = client.post(f"/api/sessions/{sid}/undo")
    assert [r["action"] for r in undone.json()["results"]] == ["undo batch"]
    after = client.get(f"/api/sessions/{sid}/tree").json()
    assert after["nodes"] == before["nodes"] and after["head_id"] == before["head_id"]
    assert client.get(f"/api/sessions/{sid}/state").json()["variables"] == {"gold": 5}
    redone = client.post(f"/api/sessions/{sid}/redo")
    assert redone.status_code == 200
    assert client.get(f"/api/sessions/{sid}/nodes/{a['id']}").json()["content"] == "a2"


def test_a_refused_operation_in_a_batch_leaves_everything_as_it_was(client: TestClient) -> None:
    sid, (a, b, _c, d) = _story(client)
    before = client.get(f"/api/sessions/{sid}/tree").json()
    response = client.post(
        f"/api/sessions/{sid}/edits",
        json={
            "operations": [
                {"op": "rewrite", "node_id": b["id"], "content": "changed"},
                {"op": "graft", "node_id": a["id"], "parent_id": d["id"]},  # a cycle
            ]
        },
    )
    body = problem(response, 422, "invalid_operation")
    assert body["operation"] == 1
    assert body["detail"].startswith("operations[1]") and "cycle" in body["detail"]
    assert client.get(f"/api/sessions/{sid}/tree").json() == before
    history = client.get(f"/api/sessions/{sid}/history").json()["entries"]
    assert [e["action"] for e in history] == ["append"] * 4  # the story's messages, no more
    missing = client.post(
        f"/api/sessions/{sid}/edits", json={"operations": [{"op": "graft", "node_id": a["id"]}]}
    )
    assert "parent_id" in problem(missing, 422, "invalid_request")["detail"]
    undone = client.post(f"/api/sessions/{sid}/undo").json()["results"][0]
    assert undone["action"] == "undo append"  # the last message, not a refused batch


def test_a_malformed_operation_in_a_batch_is_named_by_its_field(client: TestClient) -> None:
    sid, (a, b, _c, d) = _story(client)
    before = client.get(f"/api/sessions/{sid}/tree").json()
    operations = [
        {"op": "rewrite", "node_id": b["id"], "content": "changed"},
        {"op": "move", "node_id": a["id"], "parent_id": d["id"], "colour": "red"},
        {"op": "copy", "node_id": a["id"], "parent_id": d["id"], "subtree": "yes"},
        {"op": "inject", "parent_id": a["id"], "role": "narrator", "content": "x"},
        {"op": "explode", "node_id": a["id"]},
    ]
    body = problem(
        client.post(f"/api/sessions/{sid}/edits", json={"operations": operations}),
        422,
        "invalid_request",
    )
    fields = {error["field"]: error["problem"] for error in body["errors"]}
    assert fields.keys() == {
        "body.operations.1.move.colour",
        "body.operations.2.copy.subtree",
        "body.operations.3.inject.role",
        "body.operations.4",
    }
    assert "Extra inputs" in fields["body.operations.1.move.colour"]
    assert "'explode'" in fields["body.operations.4"]
    assert client.get(f"/api/sessions/{sid}/tree").json() == before


def test_openapi_shows_each_edit_operation_under_the_discriminator(client: TestClient) -> None:
    """One definition: the operations the API takes are the members of mnemosyne's union."""
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    items = schemas["EditsBody"]["properties"]["operations"]["items"]
    assert items["discriminator"]["propertyName"] == "op"
    mapping = items["discriminator"]["mapping"]
    assert set(mapping) == set(EDITS)
    for op, ref in mapping.items():
        schema = schemas[ref.rsplit("/", 1)[-1]]
        assert schema["properties"]["op"]["const"] == op
        assert schema["additionalProperties"] is False
        required = {name for name, f in EDITS[op].model_fields.items() if f.is_required()}
        assert set(schema["required"]) == {"op", *required}
        assert set(schema["properties"]) == set(EDITS[op].model_fields)


def test_delete_restore_and_purge_nodes(client: TestClient) -> None:
    sid, (_a, _b, c, _d) = _story(client)
    gone = client.post(
        f"/api/sessions/{sid}/edits", json={"operations": [{"op": "delete", "node_id": c["id"]}]}
    )
    assert gone.status_code == 200
    trash = client.get(f"/api/sessions/{sid}/trash").json()
    assert trash[0]["top"]["id"] == c["id"] and trash[0]["size"] == 2
    purged = client.delete(f"/api/sessions/{sid}/trash")
    assert purged.json()["results"][0]["count"] == 2
    assert client.get(f"/api/sessions/{sid}/trash").json() == []


# -- uploads --


def test_a_sillytavern_chat_goes_in_and_comes_back_out_unchanged(client: TestClient) -> None:
    data = CHAT.read_bytes()
    response = client.post(
        "/api/imports/chat", content=data, params={"filename": CHAT.name, "title": "Seraphina"}
    )
    assert response.status_code == 201, response.text
    session = response.json()["session"]
    assert session["title"] == "Seraphina" and response.json()["imported"]["nodes"] > 0
    exported = client.get(f"/api/sessions/{session['id']}/exports/chat")
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("application/jsonl")
    assert exported.content.decode().splitlines() == data.decode().splitlines()
    assert exported.headers["x-clotho-dropped"] == "0"


def test_a_malformed_chat_names_the_line_and_stores_nothing(client: TestClient) -> None:
    header = json.dumps({"user_name": "You", "character_name": "Sera", "chat_metadata": {}})
    broken = header + "\n" + json.dumps({"name": "You", "is_user": True, "mes": 3}) + "\n"
    body = problem(client.post("/api/imports/chat", content=broken.encode()), 422, "invalid_chat")
    assert "line 2" in body["detail"] and "mes" in body["detail"]
    assert client.get("/api/sessions").json()["sessions"] == []
    problem(client.post("/api/imports/chat", content=b""), 422, "empty_upload")


def test_uploads_past_the_limit_are_413(make_client: Callable[..., TestClient]) -> None:
    client = make_client(max_upload_bytes=1000)
    body = problem(client.post("/api/imports/chat", content=b"x" * 5000), 413, "too_large")
    assert "1000" in body["detail"]
    assert client.get("/api/sessions").json()["sessions"] == []


def test_lorebooks_and_cards_are_imported_into_a_session(client: TestClient) -> None:
    sid = new_session(client)["id"]
    book = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=WORLD.read_bytes(),
        params={"name": "Eldoria.json"},
    )
    assert book.status_code == 200, book.text
    imported = book.json()["imported"]
    assert imported["book"] == "Eldoria" and imported["entries"] > 0
    listed = client.get(f"/api/sessions/{sid}/lore").json()
    assert [b["book"] for b in listed] == ["Eldoria"]
    card = {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": "Marla",
            "description": "A smith.",
            "first_mes": "Welcome to the forge.",
            "alternate_greetings": ["The forge is hot today."],
        },
    }
    made = client.post(
        f"/api/sessions/{sid}/imports/card",
        content=json.dumps(card).encode(),
        params={"filename": "marla.json"},
    )
    assert made.status_code == 200, made.text
    assert len(made.json()["nodes"]) == 2 == made.json()["imported"]["nodes"]
    projection = client.get(f"/api/sessions/{sid}/projection").json()
    assert projection["nodes"][0]["content"] == "Welcome to the forge."
    assert len(projection["nodes"][0]["siblings"]) == 2
    bad = client.post(
        f"/api/sessions/{sid}/imports/card", content=b"\x89PNG nope", params={"filename": "x.png"}
    )
    problem(bad, 422, "invalid_card")


def test_a_tree_file_goes_out_and_back_in(client: TestClient) -> None:
    sid, (*_, d) = _story(client)
    client.post(
        f"/api/sessions/{sid}/edits", json={"operations": [{"op": "prune", "node_id": d["id"]}]}
    )
    exported = client.get(f"/api/sessions/{sid}/exports/tree")
    assert exported.status_code == 200
    document = exported.json()
    taken = client.post("/api/imports/tree", content=exported.content)
    assert problem(taken, 422)["code"] == "ids_taken"
    copied = client.post("/api/imports/tree", content=exported.content, params={"new_ids": True})
    assert copied.status_code == 201, copied.text
    copy = copied.json()["session"]["id"]
    assert copy != sid
    texts = [n["content"] for n in client.get(f"/api/sessions/{copy}/projection").json()["nodes"]]
    assert texts == ["a", "b", "c"]
    assert client.get(f"/api/sessions/{copy}/state").json()["variables"] == {"gold": 5}
    assert len(client.get(f"/api/sessions/{copy}/fragments").json()) == 1
    broken = dict(document, version=99)
    body = problem(client.post("/api/imports/tree", json=broken), 422, "invalid_tree")
    assert "version" in body["detail"]


def test_uploads_nested_too_deep_are_refused_naming_the_file(client: TestClient) -> None:
    sid = new_session(client)["id"]
    deep = ("[" * 5000 + "]" * 5000).encode()
    card = problem(
        client.post(
            f"/api/sessions/{sid}/imports/card", content=deep, params={"filename": "c.json"}
        ),
        422,
        "invalid_card",
    )
    assert "too deep" in card["detail"]
    book = client.post(f"/api/sessions/{sid}/imports/lorebook", content=deep, params={"name": "b"})
    assert "too deep" in problem(book, 422, "invalid_lorebook")["detail"]
    chat = client.post("/api/imports/chat", content=b'{"user_name": "a"}\n' + deep + b"\n")
    assert "line 2" in problem(chat, 422, "invalid_chat")["detail"]
    assert client.get(f"/api/sessions/{sid}/lore").json() == []
