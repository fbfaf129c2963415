"""Lists read a page at a time over HTTP, on each backend: the sessions (and those in
the trash), a tree, the undo journal. Following `next` from the first page reads the
whole list; a cursor whose node or entry is gone is a 422 `stale_cursor`; unknown
parameters and limits out of bounds are refused; the reads without a schema before
(trace, diff, fragments, trash, lore, the tree export) declare one and answer with ETag
and 304; the exports are sent as they are encoded."""

from __future__ import annotations

import json
from typing import Any

from fastapi.testclient import TestClient

from clotho.api._common import json_bytes, json_chunks
from clotho.formats.stchat import export_chat
from clotho.formats.treefile import export_tree
from mnemosyne import Store
from mnemosyne.edits import Delete, Prune, Rewrite

from .test_api import problem


def read(client: TestClient, url: str, **params: Any) -> dict[str, Any]:
    response = client.get(url, params=params or None)
    assert response.status_code == 200, response.text
    return response.json()


def follow(client: TestClient, url: str, key: str, **params: Any) -> tuple[list[Any], int]:
    """Every item of a list, page after page through `next`; how many pages."""
    page = read(client, url, **params)
    items, pages = list(page[key]), 1
    while page["next"] is not None:
        page = read(client, page["next"])
        items.extend(page[key])
        pages += 1
        assert pages < 100
    return items, pages


def refusals(client: TestClient, url: str) -> None:
    """Unknown parameters and limits out of bounds: 422s naming the parameter."""
    for name in ("offset", "page", "before"):
        body = problem(client.get(url, params={name: "1"}), 422, "invalid_request")
        assert [e["field"] for e in body["errors"]] == [f"query.{name}"]
    for limit in (0, 1001, "ten"):
        body = problem(client.get(url, params={"limit": limit}), 422, "invalid_request")
        assert body["errors"][0]["field"] == "query.limit"


def test_sessions_page_by_page(client: TestClient, store: Store) -> None:
    made = [store.create_session(title=f"s{i}").id for i in range(7)]
    store.trash_session(made[3])
    whole = [s.id for s in store.sessions()]
    first = read(client, "/api/sessions", limit=2)
    assert first["total"] == 6 and [s["id"] for s in first["sessions"]] == whole[:2]
    assert first["next"].startswith("/api/sessions?after=") and first["next"].endswith("&limit=2")
    listed, pages = follow(client, "/api/sessions", "sessions", limit=2)
    assert [s["id"] for s in listed] == whole and pages == 3
    assert listed[0] == client.get(f"/api/sessions/{whole[0]}").json()
    assert read(client, "/api/sessions")["next"] is None  # 50 by default
    trashed, _ = follow(client, "/api/trash/sessions", "sessions", limit=1)
    assert [s["id"] for s in trashed] == [made[3]]

    # A session played while a client pages moves to the top, and is not seen twice.
    page = read(client, "/api/sessions", limit=3)
    store.append(whole[1], "user", "played meanwhile")
    rest, _ = follow(client, page["next"], "sessions")
    assert [s["id"] for s in rest] == whole[3:]

    refusals(client, "/api/sessions")
    for bad in ("later", "12", "1-2-3", "9" * 19 + "-1"):
        body = problem(client.get("/api/sessions", params={"after": bad}), 422)
        assert body["errors"][0]["field"] == "query.after"
    far = problem(client.get("/api/sessions", params={"after": "9" * 18 + "-1"}), 422)
    assert far["code"] == "invalid_operation" and "not a cursor" in far["detail"]


def branching(store: Store) -> str:
    """A tree forking at every depth, with a fragment and a subtree in the trash."""
    sid = store.create_session(title="branches").id
    for i in range(6):
        node, _ = store.append(sid, "user", f"u{i}")
        store.add_sibling(sid, node.id, f"u{i}, other")
        store.append(sid, "assistant", f"a{i} under the other")
        store.checkout(sid, node.id)
        store.append(sid, "assistant", f"a{i}")
    first = store.projection(sid)[0]
    pruned, _ = store.add_sibling(sid, first.id, "a root beside")
    store.edit(sid, Prune(node_id=pruned.id))
    trashed, _ = store.add_sibling(sid, first.id, "to the trash")
    store.edit(sid, Delete(node_id=trashed.id))
    return sid


def test_tree_page_by_page(client: TestClient, store: Store) -> None:
    sid = branching(store)
    url = f"/api/sessions/{sid}/tree"
    whole = store.tree(sid)
    for limit in (1, 5, 24, 1000):
        nodes, pages = follow(client, url, "nodes", limit=limit)
        assert nodes == [n.as_dict() for n in whole.nodes]
        assert pages == -(-len(whole.nodes) // limit)
    first = read(client, url, limit=5)
    assert (first["total"], first["head_id"], first["version"]) == (
        len(whole.nodes),
        whole.session.head_id,
        whole.session.version,
    )
    assert first["next"] == f"{url}?after={first['nodes'][-1]['id']}&limit=5"
    answered = client.get(url, params={"limit": 5})
    assert answered.headers["etag"] == f'"{whole.session.version}"'
    cached = client.get(
        url, params={"limit": 5}, headers={"If-None-Match": answered.headers["etag"]}
    )
    assert cached.status_code == 304

    # The cursor's node elsewhere in the tree changing is no matter; gone, it is stale.
    store.edit(sid, Rewrite(node_id=first["nodes"][0]["id"], content="rewritten"))
    assert read(client, first["next"])["nodes"]
    store.edit(sid, Delete(node_id=first["nodes"][-1]["id"]))
    stale = problem(client.get(first["next"]), 422, "stale_cursor")
    assert first["nodes"][-1]["id"] in stale["detail"] and "start" in stale["detail"]
    store.purge(sid)
    problem(client.get(first["next"]), 422, "stale_cursor")
    problem(client.get(url, params={"after": "not-hex!"}), 422, "invalid_request")
    refusals(client, url)

    empty = store.create_session(title="empty").id
    page = read(client, f"/api/sessions/{empty}/tree")
    assert (page["nodes"], page["total"], page["next"]) == ([], 0, None)


def test_history_page_by_page(client: TestClient, store: Store) -> None:
    sid = store.create_session(title="journal").id
    node, _ = store.append(sid, "user", "hello")
    for i in range(9):
        store.edit(sid, Rewrite(node_id=node.id, content=f"hello {i}"))
    store.undo(sid)
    url = f"/api/sessions/{sid}/history"
    whole = [e.as_dict() for e in store.history(sid)]
    entries, pages = follow(client, url, "entries", limit=4)
    assert entries == whole and pages == 3
    assert [e["undone"] for e in entries] == [False] * 8 + [True]
    first = read(client, url, limit=4)
    assert first["total"] == 9 and first["next"] == f"{url}?after={whole[3]['position']}&limit=4"
    store.append(sid, "assistant", "a turn clears the journal")
    problem(client.get(first["next"]), 422, "stale_cursor")
    assert read(client, url)["entries"] == []
    problem(client.get(url, params={"after": 0}), 422, "invalid_request")
    refusals(client, url)


def test_reads_declare_and_check_their_documents(client: TestClient, store: Store) -> None:
    responses = client.get("/openapi.json").json()["paths"]
    for path, schema in (
        ("/api/sessions", "SessionsPage"),
        ("/api/sessions/{session_id}/tree", "TreeOut"),
        ("/api/sessions/{session_id}/history", "HistoryPage"),
        ("/api/sessions/{session_id}/nodes/{node_id}/trace", "TraceOut"),
    ):
        declared = responses[path]["get"]["responses"]["200"]["content"]["application/json"]
        assert declared["schema"]["$ref"].endswith(f"/{schema}"), path
    for path in ("fragments", "trash"):
        declared = responses[f"/api/sessions/{{session_id}}/{path}"]["get"]["responses"]["200"]
        items = declared["content"]["application/json"]["schema"]["items"]
        assert items["$ref"].endswith("/SubtreeOut")
    diff = responses["/api/sessions/{session_id}/diff"]["get"]["responses"]["200"]
    assert diff["content"]["application/json"]["schema"]["$ref"].endswith("/DiffOut")

    sid = branching(store)
    version = f'"{store.session(sid).version}"'
    for path in ("fragments", "trash"):
        answered = client.get(f"/api/sessions/{sid}/{path}")
        assert answered.headers["etag"] == version
        [subtree] = answered.json()
        assert subtree["size"] == 1 and subtree["top"]["content"] in (
            "a root beside",
            "to the trash",
        )
        again = client.get(f"/api/sessions/{sid}/{path}", headers={"If-None-Match": version})
        assert again.status_code == 304
    a, b = (n.id for n in store.projection(sid)[:2])
    assert read(client, f"/api/sessions/{sid}/diff", from_id=a, to_id=b) == {}


def test_exports_are_sent_as_they_are_encoded(client: TestClient, store: Store) -> None:
    sid = branching(store)
    exported = client.get(f"/api/sessions/{sid}/exports/tree")
    assert (
        exported.status_code == 200
        and exported.headers["etag"] == f'"{store.session(sid).version}"'
    )
    assert "content-length" not in exported.headers  # streamed, not one body written whole
    document = exported.json()
    assert document == export_tree(store, sid) and len(document["nodes"]) == 26
    copied = client.post("/api/imports/tree", content=exported.content, params={"new_ids": True})
    assert copied.status_code == 201, copied.text
    pieces = list(json_chunks(document, size=100))
    assert len(pieces) > 10 and json.loads(b"".join(pieces)) == document
    # The standard library writes what orjson refuses: an integer beyond 64 bits.
    assert json.loads(json_bytes({"big": 10**30, "text": "é"})) == {"big": 10**30, "text": "é"}

    chat = client.get(f"/api/sessions/{sid}/exports/chat")
    assert chat.status_code == 200 and "content-length" not in chat.headers
    assert chat.text == export_chat(store, sid).text

    declared = client.get("/openapi.json").json()["paths"]
    tree_file = declared["/api/sessions/{session_id}/exports/tree"]["get"]["responses"]["200"]
    assert tree_file["content"]["application/json"]["schema"]["$ref"].endswith("/TreeFile")
    lore = declared["/api/sessions/{session_id}/lore"]["get"]["responses"]["200"]
    items = lore["content"]["application/json"]["schema"]["items"]
    assert items["$ref"].endswith("/LorebookOut")


def test_every_read_refuses_a_parameter_it_does_not_take(client: TestClient, store: Store) -> None:
    sid = branching(store)
    node = store.projection(sid)[0].id
    reads = {
        f"/api/sessions/{sid}/nodes/{node}": {},
        f"/api/sessions/{sid}/nodes/{node}/children": {},
        f"/api/sessions/{sid}/state": {"node_id": node},
        f"/api/sessions/{sid}/diff": {"from_id": node, "to_id": node},
        f"/api/sessions/{sid}/blame": {"path": "hp", "node_id": node},
        f"/api/sessions/{sid}/changes": {"path": "hp"},
        f"/api/sessions/{sid}/fragments": {},
        f"/api/sessions/{sid}/trash": {},
    }
    for url, params in reads.items():
        assert client.get(url, params=params or None).status_code == 200, url
        body = problem(client.get(url, params={**params, "at": node}), 422, "invalid_request")
        assert [e["field"] for e in body["errors"]] == ["query.at"], url
    state = read(client, f"/api/sessions/{sid}/state", node_id=node)
    assert state["node_id"] == node
    body = problem(client.get(f"/api/sessions/{sid}/diff", params={"from_id": node}), 422)
    assert [e["field"] for e in body["errors"]] == ["query.to_id"]
    for url in (f"/api/sessions/{sid}", f"/api/sessions/{sid}/lore"):
        assert client.get(url).headers["etag"] == f'"{store.session(sid).version}"'
        problem(client.get(url, params={"at": node}), 422, "invalid_request")
