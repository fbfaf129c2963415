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
        assert {"q", "role", "limit", "trunk", "under", "since", "until"} <= names
        assert "422" in operation["responses"]
    assert "session" in {p["name"] for p in paths["/api/search"]["get"]["parameters"]}


def test_the_filters_trunk_under_and_time(client: TestClient, store: Store) -> None:
    ids = _story(store)
    url = f"/api/sessions/{ids['sid']}/search"

    def found(path: str, **params: str) -> list[str]:
        answer = client.get(path, params=params)
        assert answer.status_code == 200, answer.text
        return [h["node_id"] for h in answer.json()["hits"]]

    assert found(url, q="wyvern", trunk="true") == []
    assert found(url, q="keeper", trunk="true") == [ids["trunk"]]
    trunks = client.get("/api/search", params={"q": "wyvern", "trunk": "true"}).json()["hits"]
    assert [h["session_id"] for h in trunks] == [ids["other"]]  # its HEAD; ours is aside
    assert found(url, q="wyvern", under=ids["side"][:8]) == [ids["side"]]
    assert found(url, q="wyvern", under=ids["trunk"]) == []
    assert found("/api/search", q="wyvern", session=ids["sid"], under=ids["side"]) == [ids["side"]]
    everything = found("/api/search", q="the")
    assert len(everything) >= 3
    assert found("/api/search", q="the", since="1h") == everything
    assert found("/api/search", q="the", until="1h") == []
    assert found(url, q="the", until="2999-12-31", since="2000-01-01T00:00Z") == found(url, q="the")
    refused = [
        ("since", {"q": "the", "since": "yesterday"}),
        ("until", {"q": "the", "until": "2026-13-40"}),
        ("under", {"q": "the", "under": "ffffffffffff"}),
        ("after", {"q": "the", "since": "1h", "until": "2h"}),
        # out of the datetimes' range (else a 500 from an OverflowError)
        ("since", {"q": "the", "since": "999999w"}),
        ("until", {"q": "the", "until": "9999-12-31"}),
        ("since", {"q": "the", "since": "0001-01-01T00:00+05:00"}),
    ]
    for why, params in refused:
        for path in (url, "/api/search"):
            answer = client.get(path, params=params)
            assert answer.status_code == 422, (why, params, answer.text)
            assert why in answer.text, (why, answer.text)
    no_session = client.get("/api/search", params={"q": "the", "under": ids["side"]})
    assert no_session.status_code == 422 and "session" in no_session.text


def test_a_search_by_age_is_not_tagged_with_the_version(client: TestClient, store: Store) -> None:
    ids = _story(store)
    url = f"/api/sessions/{ids['sid']}/search"
    tagged = client.get(url, params={"q": "keeper", "since": "2026-01-01"})
    assert tagged.status_code == 200 and "etag" in tagged.headers
    headers = {"If-None-Match": tagged.headers["etag"]}
    again = client.get(url, params={"q": "keeper", "since": "2026-01-01"}, headers=headers)
    assert again.status_code == 304
    aged = client.get(url, params={"q": "keeper", "since": "1h"}, headers=headers)
    assert aged.status_code == 200 and "etag" not in aged.headers  # "1h" moves with the clock
    assert [h["node_id"] for h in aged.json()["hits"]] == [ids["trunk"]]
