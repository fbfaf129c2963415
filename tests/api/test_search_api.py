"""GET /api/search and GET /api/sessions/{sid}/search, on SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient

from mnemosyne import Store
from mnemosyne.edits import Delete


def _story(store: Store) -> dict[str, str]:
    sid = store.create_session(title="Lighthouse").id
    store.append(sid, "user", "We climb to the lantern room.")
    trunk, _ = store.append(sid, "assistant", "The keeper trims the wick.", name="Mira")
    side, _ = store.add_sibling(sid, trunk.id, "A wyvern perches on the rail.", name="Mira")
    store.checkout(sid, trunk.id)
    other = store.create_session(title="Elsewhere").id
    store.append(other, "user", "A wyvern in another story.")
    return {"sid": sid, "trunk": trunk.id, "side": side.id, "other": other}


def test_search_every_session_and_one(client: TestClient, store: Store) -> None:
    ids = _story(store)
    answer = client.get("/api/search", params={"q": "wyvern"})
    assert answer.status_code == 200, answer.text
    hits = answer.json()["hits"]
    assert [h["session_id"] for h in hits] == [ids["other"], ids["sid"]]
    side = hits[1]
    assert (side["node_id"], side["name"], side["on_trunk"], side["enabled"]) == (
        ids["side"],
        "Mira",
        False,
        True,
    )
    start, end = side["matches"][0]
    assert side["snippet"][start:end] == "wyvern"
    one = client.get("/api/search", params={"q": "wyvern", "session": ids["sid"][:8]})
    assert [h["node_id"] for h in one.json()["hits"]] == [ids["side"]]
    users = client.get("/api/search", params={"q": "wyvern", "role": "user"}).json()["hits"]
    assert [h["session_id"] for h in users] == [ids["other"]]
    assert len(client.get("/api/search", params={"q": "wyvern", "limit": 1}).json()["hits"]) == 1


def test_a_session_search_is_tagged_with_its_version(client: TestClient, store: Store) -> None:
    ids = _story(store)
    url = f"/api/sessions/{ids['sid']}/search"
    answer = client.get(url, params={"q": "keeper"})
    assert answer.status_code == 200, answer.text
    assert [h["node_id"] for h in answer.json()["hits"]] == [ids["trunk"]]
    assert answer.json()["hits"][0]["on_trunk"] is True
    etag = answer.headers["etag"]
    again = client.get(url, params={"q": "keeper"}, headers={"If-None-Match": etag})
    assert again.status_code == 304
    store.edit(ids["sid"], Delete(node_id=ids["side"]))
    gone = client.get(url, params={"q": "wyvern"}, headers={"If-None-Match": etag})
    assert gone.status_code == 200 and gone.json()["hits"] == []


def test_hostile_and_bad_queries(client: TestClient, store: Store) -> None:
    ids = _story(store)
    for text in ['"', "wyv*", "NEAR(a b)", "-wyvern", "a OR b"]:
        answer = client.get("/api/search", params={"q": text})
        assert answer.status_code == 200, (text, answer.text)
    refused = {
        "no q": {},
        "blank": {"q": "   "},
        "too long": {"q": "x" * 201},
        "role": {"q": "wyvern", "role": "narrator"},
        "limit": {"q": "wyvern", "limit": 0},
        "unknown parameter": {"q": "wyvern", "sort": "rank"},
        "unknown session": {"q": "wyvern", "session": "ffffffffff"},
    }
    for why, params in refused.items():
        answer = client.get("/api/search", params=params)
        assert answer.status_code == 422, (why, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
    missing = client.get("/api/sessions/ffffffffffff/search", params={"q": "wyvern"})
    assert missing.status_code == 404
    assert ids


def test_the_routes_are_in_the_openapi_document(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/api/search", "/api/sessions/{session_id}/search"):
        operation = paths[path]["get"]
        names = {p["name"] for p in operation["parameters"]}
        assert {"q", "role", "limit"} <= names
        assert "422" in operation["responses"]
    assert "session" in {p["name"] for p in paths["/api/search"]["get"]["parameters"]}
