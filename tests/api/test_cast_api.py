"""The cast over HTTP (clotho/api/cast.py), on both databases: its reads, members added
from a card (raw or a multipart form) and written in place, removed, muted, the speaker
order, leaving and joining the scene (undone, rolled back by a checkout), pictures, the
refusals; and a four-character story played against the loopback model."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

from mnemosyne import Store
from tests._fixtures import ELDORIA, SERAPHINA

PNG = b"\x89PNG\r\n\x1a\n"
MARLA = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Marla",
        "description": "An innkeeper who hears everything.",
        "first_mes": "Welcome to the Drowned Lantern.",
    },
}


def story(client: TestClient) -> str:
    """A story whose character (the cast's first member) is Marla: its id."""
    data = json.dumps(MARLA).encode()
    card = {"filename": "marla.json", "data": base64.b64encode(data).decode()}
    made = client.post("/api/stories", json={"card": card, "campaign": "none"})
    assert made.status_code == 201, made.text
    return str(made.json()["session"]["id"])


def tag(answer: Any) -> str:
    return str(answer.headers["etag"])


def members(client: TestClient, sid: str) -> dict[str, dict[str, Any]]:
    cast = client.get(f"/api/sessions/{sid}/cast")
    assert cast.status_code == 200, cast.text
    return {member["name"]: member for member in cast.json()["members"]}


def test_the_cast_grows_from_cards_and_written_characters(client: TestClient, store: Store) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    first = client.get(base)
    assert first.status_code == 200 and first.headers["etag"]
    assert first.json() == {
        "order": "natural",
        "present": None,
        "members": [
            {
                "name": "Marla",
                "description": "An innkeeper who hears everything.",
                "talkativeness": 0.5,
                "muted": False,
                "present": True,
                "avatar": False,
                "books": [],
                "first": True,
            }
        ],
    }
    assert client.get(base, headers={"if-none-match": tag(first)}).status_code == 304

    written = client.post(
        base,
        json={"name": "  Bram ", "description": "A ferryman.", "personality": "Gruff."},
        headers={"if-match": tag(first)},
    )
    assert written.status_code == 201, written.text
    assert written.json()["name"] == "Bram" and written.json()["first"] is False
    assert written.json()["present"] is True  # everyone is, while no one came or went
    assert int(tag(written).strip('"')) > int(tag(first).strip('"'))

    accented = client.post(base, json={"name": "Élodie Brun"})
    assert accented.status_code == 201, accented.text

    # A card as a multipart form's `file` (as a browser's FormData sends it): its
    # picture is the member's avatar, its name the card's.
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    uploaded = client.post(f"{base}/card", files=files)
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["name"] == "Seraphina" and uploaded.json()["avatar"] is True
    assert tag(uploaded) == client.get(f"/api/sessions/{sid}").headers["etag"]

    cast = members(client, sid)
    assert list(cast) == ["Marla", "Bram", "Élodie Brun", "Seraphina"]
    assert [m["first"] for m in cast.values()] == [True, False, False, False]
    picture = client.get(f"{base}/Seraphina/avatar")
    assert picture.status_code == 200 and picture.headers["content-type"] == "image/png"
    assert picture.content.startswith(PNG) and b"chara" not in picture.content
    assert "max-age" in picture.headers["cache-control"]
    # A name in the path is percent-encoded, and found ignoring case.
    none = client.get(f"{base}/{quote('élodie brun')}/avatar")
    assert none.status_code == 404 and "Élodie Brun has no picture" in none.json()["detail"]
    # The cards are the session's documents, in the order added.
    assert [d.name for d in store.documents(sid, "card")] == list(cast)


def test_a_card_as_the_body_with_its_book(client: TestClient, store: Store) -> None:
    sid = story(client)
    card = {
        **MARLA,
        "data": {
            "name": "Oswin",
            "description": "A cartographer.",
            "character_book": {
                "name": "Oswin's maps",
                "entries": [{"keys": ["map"], "content": "Oswin's maps lie.", "id": 1}],
            },
        },
    }
    uploaded = client.post(
        f"/api/sessions/{sid}/cast/card",
        content=json.dumps(card).encode(),
        params={"filename": "oswin.json"},
        headers={"content-type": "application/octet-stream"},
    )
    assert uploaded.status_code == 201, uploaded.text
    assert uploaded.json()["books"] == ["Oswin's maps"] and uploaded.json()["avatar"] is False
    books = [book["book"] for book in client.get(f"/api/sessions/{sid}/lore").json()]
    assert "Oswin's maps" in books


def test_the_cast_refuses_what_it_cannot_do_and_writes_nothing(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    assert client.post(base, json={"name": "Bram"}).status_code == 201
    version = tag(client.get(f"/api/sessions/{sid}"))

    taken = client.post(base, json={"name": "Bram"})
    assert taken.status_code == 422 and taken.json()["code"] == "cast"
    assert "Bram is in the cast already" in taken.json()["detail"]
    for method, path in (
        ("DELETE", f"{base}/Nobody"),
        ("POST", f"{base}/Nobody/leave"),
        ("POST", f"{base}/Nobody/join"),
        ("GET", f"{base}/Nobody/avatar"),
    ):
        unknown = client.request(method, path)
        assert unknown.status_code == 404, (method, path, unknown.text)
        assert "no member of the cast is named 'Nobody'" in unknown.json()["detail"]
        assert "Marla, Bram" in unknown.json()["detail"]
    patched = client.patch(f"{base}/Nobody", json={"muted": True})
    assert patched.status_code == 404
    same = client.patch(f"{base}/Bram", json={})  # nothing to change: nothing written
    assert same.status_code == 200 and same.headers["etag"] == version
    assert client.patch(base, json={"order": "natural"}).headers["etag"] == version
    loud = client.patch(f"{base}/Bram", json={"talkativeness": 1.5})
    assert loud.status_code == 422 and loud.json()["errors"][0]["field"] == "body.talkativeness"
    bad_order = client.patch(base, json={"order": "loudest"})
    assert bad_order.status_code == 422
    assert client.post(base, json={"name": "  "}).status_code == 422

    joined = client.post(f"{base}/Bram/join")
    assert joined.status_code == 422 and joined.json()["code"] == "cast"
    assert "Bram is in the scene already" in joined.json()["detail"]

    book = client.post(f"{base}/card", content=ELDORIA.read_bytes(), params={"filename": "e.json"})
    assert book.status_code == 422 and "not a character card" in book.json()["detail"]
    broken = client.post(f"{base}/card", content=b"{not json", params={"filename": "x.json"})
    assert broken.status_code == 422, broken.text
    formless = client.post(f"{base}/card", files={"picture": ("a.png", b"x", "image/png")})
    assert formless.status_code == 422 and formless.json()["errors"][0]["field"] == "body.file"
    empty = client.post(f"{base}/card", content=b"")
    assert empty.status_code == 422 and empty.json()["code"] == "empty_upload"

    stale = '"1"'
    for method, path, body in (
        ("POST", base, {"name": "Cato"}),
        ("PATCH", f"{base}/Bram", {"muted": True}),
        ("PATCH", base, {"order": "narrator"}),
        ("POST", f"{base}/Bram/leave", None),
        ("DELETE", f"{base}/Bram", None),
    ):
        refused = client.request(method, path, json=body, headers={"if-match": stale})
        assert refused.status_code == 412, (method, path, refused.text)
        assert refused.json()["current_version"] == int(version.strip('"'))
    refused_card = client.post(
        f"{base}/card",
        files={"file": ("s.png", SERAPHINA.read_bytes(), "image/png")},
        headers={"if-match": stale},
    )
    assert refused_card.status_code == 412
    # Nothing of it was written.
    assert tag(client.get(f"/api/sessions/{sid}")) == version
    assert list(members(client, sid)) == ["Marla", "Bram"]
    assert [d.name for d in store.documents(sid, "avatar")] == []


def test_members_are_muted_given_a_talkativeness_and_removed(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    files = {"file": ("seraphina.png", SERAPHINA.read_bytes(), "image/png")}
    assert client.post(f"{base}/card", files=files).status_code == 201
    assert client.post(base, json={"name": "Bram"}).status_code == 201

    muted = client.patch(f"{base}/bram", json={"muted": True, "talkativeness": 0.9})
    assert muted.status_code == 200, muted.text
    assert muted.json()["muted"] is True and muted.json()["talkativeness"] == 0.9
    again = client.patch(f"{base}/Bram", json={"talkativeness": 0.2})
    assert again.json()["muted"] is True and again.json()["talkativeness"] == 0.2
    unmuted = client.patch(f"{base}/Bram", json={"muted": False}, headers={"if-match": tag(again)})
    assert unmuted.status_code == 200 and unmuted.json()["muted"] is False
    ordered = client.patch(base, json={"order": "round_robin"})
    assert ordered.status_code == 200 and ordered.json()["order"] == "round_robin"
    settings = client.get(f"/api/sessions/{sid}").json()["metadata"]["settings"]["cast"]
    assert settings == {"order": "round_robin", "muted": [], "talkativeness": {"Bram": 0.2}}

    removed = client.delete(f"{base}/Seraphina", headers={"if-match": tag(ordered)})
    assert removed.status_code == 200, removed.text
    assert [m["name"] for m in removed.json()["members"]] == ["Marla", "Bram"]
    assert removed.headers["etag"] == client.get(f"/api/sessions/{sid}").headers["etag"]
    assert client.get(f"{base}/Seraphina/avatar").status_code == 404
    assert [d.name for d in store.documents(sid, "card")] == ["Marla", "Bram"]
    assert [d.name for d in store.documents(sid, "avatar")] == []


def test_leaving_and_joining_are_scene_changes_that_roll_back(
    client: TestClient, store: Store
) -> None:
    sid = story(client)
    base = f"/api/sessions/{sid}/cast"
    for name in ("Bram", "Élodie Brun"):
        assert client.post(base, json={"name": name}).status_code == 201
    before = client.get(f"/api/sessions/{sid}").json()["head_id"]

    left = client.post(f"{base}/{quote('Élodie Brun')}/leave")
    assert left.status_code == 201, left.text
    node = left.json()["node"]
    assert node["role"] == "system" and node["name"] is None
    assert node["content"] == "Élodie Brun leaves the scene."
    assert node["metadata"]["scene"] == {"leaves": "Élodie Brun"}
    cast = left.json()["cast"]
    assert cast["present"] == ["Marla", "Bram"]
    assert {m["name"]: m["present"] for m in cast["members"]} == {
        "Marla": True,
        "Bram": True,
        "Élodie Brun": False,
    }
    assert left.headers["etag"] == client.get(f"/api/sessions/{sid}").headers["etag"]
    assert client.get(f"/api/sessions/{sid}").json()["head_id"] == node["id"]
    away = client.post(f"{base}/{quote('Élodie Brun')}/leave")
    assert away.status_code == 422 and away.json()["code"] == "cast"
    assert "is not in the scene" in away.json()["detail"]
    # Someone added while someone is away is away too, until it joins.
    late = client.post(base, json={"name": "Cato"})
    assert late.status_code == 201 and late.json()["present"] is False

    joined = client.post(f"{base}/{quote('élodie brun')}/join")
    assert joined.status_code == 201, joined.text
    assert joined.json()["node"]["content"] == "Élodie Brun joins the scene."
    assert joined.json()["cast"]["present"] == ["Marla", "Bram", "Élodie Brun"]

    # Undo takes the join back; a checkout before the leave brings everyone back.
    undone = client.post(f"/api/sessions/{sid}/undo")
    assert undone.status_code == 200 and undone.json()["results"][0]["action"] == "undo join"
    assert members(client, sid)["Élodie Brun"]["present"] is False
    assert client.put(f"/api/sessions/{sid}/head", json={"node_id": before}).status_code == 200
    back = client.get(base).json()
    assert back["present"] is None
    assert all(m["present"] for m in back["members"])
