"""The projection read a window at a time (`GET .../projection?before=&limit=`), on each
backend: windows newest first that page back to the root through `next`, together the
whole path with every message's siblings; hidden messages in or out; refusals of an
unknown parameter, a limit out of bounds, a cursor not on the path; ETag and 304; and
never a stale window after a write here or by another process."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from mnemosyne import Store
from mnemosyne.edits import Toggle

from .test_api import problem


def story(store: Store, messages: int) -> tuple[str, list[str]]:
    """A session of ``messages`` messages, the fourth with an alternative beside it (HEAD
    went on from the alternative); its id and the path's node ids."""
    sid = store.create_session(title="long").id
    path = []
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        node, _ = store.append(sid, role, f"message {i}")
        if i == 3:
            node, _ = store.add_sibling(sid, node.id, "message 3, again")
        path.append(node.id)
    return sid, path


def window(client: TestClient, url: str, **params: Any) -> dict[str, Any]:
    response = client.get(url, params=params or None)  # (a {} would drop the query)
    assert response.status_code == 200, response.text
    return response.json()


def test_windows_page_back_to_the_root(client: TestClient, store: Store) -> None:
    sid, path = story(store, 25)
    first = window(client, f"/api/sessions/{sid}/projection", limit=10)
    assert [n["id"] for n in first["nodes"]] == path[15:]
    assert (first["total"], first["earlier"]) == (25, 15)
    assert first["next"] == f"/api/sessions/{sid}/projection?before={path[15]}&limit=10"

    seen, url = list(first["nodes"]), first["next"]
    for earlier in (5, 0):
        page = window(client, url)
        assert page["earlier"] == earlier and page["total"] == 25
        seen[:0] = page["nodes"]
        url = page["next"]
    assert url is None  # at the root
    assert [n["id"] for n in seen] == path

    # Each message as a whole read shows it, siblings and index included.
    whole = window(client, f"/api/sessions/{sid}/projection", limit=1000)
    assert whole["nodes"] == seen and whole["next"] is None and whole["earlier"] == 0
    _, turns = store.projection_turns(sid)
    assert [(n["siblings"], n["index"]) for n in seen] == [(t.siblings, t.index) for t in turns]
    assert len(seen[3]["siblings"]) == 2 and seen[3]["index"] == 1
    assert window(client, f"/api/sessions/{sid}/projection")["nodes"] == seen  # 200 by default


def test_prefixes_and_options_carry_over(client: TestClient, store: Store) -> None:
    sid, path = story(store, 8)
    store.edit(sid, Toggle(node_id=path[5]))  # hidden from the model
    page = window(
        client, f"/api/sessions/{sid[:8]}/projection", before=path[6][:8], limit=3, metadata=True
    )
    assert [n["id"] for n in page["nodes"]] == [path[2], path[3], path[4]]  # path[5] left out
    assert page["nodes"][0]["metadata"] == {}
    assert (page["total"], page["earlier"]) == (7, 2)
    assert page["next"] == (
        f"/api/sessions/{sid}/projection?before={path[2]}&limit=3&metadata=true"
    )

    shown = window(client, f"/api/sessions/{sid}/projection", limit=3, disabled=True)
    assert [(n["id"], n["enabled"]) for n in shown["nodes"]] == [
        (path[5], False),
        (path[6], True),
        (path[7], True),
    ]
    assert (shown["total"], shown["earlier"]) == (8, 5)
    assert shown["next"].endswith(f"before={path[5]}&limit=3&disabled=true")
    # A hidden message is a cursor too: the window before it.
    before_hidden = window(client, f"/api/sessions/{sid}/projection", before=path[5], limit=2)
    assert [n["id"] for n in before_hidden["nodes"]] == [path[3], path[4]]


def test_refusals_name_what_was_wrong(client: TestClient, store: Store) -> None:
    sid, path = story(store, 6)
    url = f"/api/sessions/{sid}/projection"
    for name, value in (("offset", "5"), ("tail", "5"), ("page", "2")):
        body = problem(client.get(url, params={name: value}), 422, "invalid_request")
        assert [e["field"] for e in body["errors"]] == [f"query.{name}"]
        assert name in body["detail"]
    for limit in (0, 1001, "ten"):
        body = problem(client.get(url, params={"limit": limit}), 422, "invalid_request")
        assert body["errors"][0]["field"] == "query.limit"
    problem(client.get(url, params={"before": "not-hex!"}), 422, "invalid_request")
    problem(client.get(url, params={"before": "abcdef0123"}), 404, "unknown_node")
    first_reply = store.projection(sid)[1]
    other, _ = store.add_sibling(sid, first_reply.id, "another branch")  # HEAD moves there
    store.checkout(sid, path[-1])
    off_path = problem(client.get(url, params={"before": other.id}), 422, "invalid_operation")
    assert other.id in off_path["detail"] and "HEAD" in off_path["detail"]

    empty = store.create_session(title="empty").id
    page = window(client, f"/api/sessions/{empty}/projection")
    assert (page["nodes"], page["total"], page["earlier"], page["next"]) == ([], 0, 0, None)


def test_etags_and_writes_here_and_elsewhere(
    client: TestClient, store: Store, database_url: str
) -> None:
    sid, path = story(store, 6)
    url = f"/api/sessions/{sid}/projection"
    first = client.get(url, params={"limit": 2})
    version = store.session(sid).version
    assert first.headers["etag"] == f'"{version}"'
    again = client.get(url, params={"limit": 2}, headers={"If-None-Match": f'"{version}"'})
    assert again.status_code == 304 and again.headers["etag"] == f'"{version}"'

    store.append(sid, "user", "a message through this store")
    assert window(client, url, limit=2)["nodes"][-1]["content"] == "a message through this store"
    with Store.open(database_url) as elsewhere:  # another process's store, say
        elsewhere.append(sid, "assistant", "a reply from elsewhere")
        elsewhere.edit(sid, Toggle(node_id=path[4]))
    answered = client.get(url, params={"limit": 3})
    assert answered.headers["etag"] == f'"{store.session(sid).version}"'
    nodes = answered.json()["nodes"]
    assert nodes[0]["id"] == path[5]  # path[4] is hidden now
    assert [n["content"] for n in nodes][1:] == [
        "a message through this store",
        "a reply from elsewhere",
    ]
    assert answered.json()["total"] == 7


def test_metadata_is_answered_as_stored(client: TestClient, store: Store) -> None:
    """A window's metadata is passed on as the store keeps it (not decoded and encoded
    again): what a chat import kept comes back equal, an integer beyond 64 bits and
    text of any script included."""
    sid = store.create_session().id
    kept = {
        "sillytavern": {
            "mes": "Ça va? 你好 🐉",
            "extra": {"token_count": 10**30, "nested": [1.5, None]},
        },
        "empty": {},
    }
    node, _ = store.append(sid, "user", "hello", metadata=kept)
    store.append(sid, "assistant", "hi")  # no metadata: {}
    page = window(client, f"/api/sessions/{sid}/projection", metadata="true")
    assert [n["metadata"] for n in page["nodes"]] == [kept, {}]
    assert page["nodes"][0]["id"] == node.id
    plain = window(client, f"/api/sessions/{sid}/projection")
    assert all("metadata" not in n for n in plain["nodes"])
