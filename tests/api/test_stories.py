"""A new story from the page through the API (POST /api/stories), the cards and books it
picks from, the session's avatar, and Import…'s kind of file, on both databases."""

from __future__ import annotations

import base64
import json

from fastapi.testclient import TestClient

from mnemosyne import Store
from tests._fixtures import CHAT, ELDORIA, FIXTURES, REAL_BOOK_ZH, REAL_CARD_V1, SERAPHINA

PNG = b"\x89PNG\r\n\x1a\n"
CHATS = FIXTURES / "chats"
MINIMAL_CARD = {
    "spec": "chara_card_v2",
    "spec_version": "2.0",
    "data": {
        "name": "Bram",
        "description": "A ferryman.",
        "first_mes": "The river is high tonight.",
        "alternate_greetings": ["You again?", "Fare first."],
    },
}


def upload(path_or_bytes: object, filename: str | None = None) -> dict[str, str]:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else path_or_bytes.read_bytes()  # type: ignore[attr-defined]
    name = filename or path_or_bytes.name  # type: ignore[attr-defined]
    return {"filename": name, "data": base64.b64encode(data).decode()}


def test_a_story_from_a_png_card_is_made_whole(client: TestClient, store: Store) -> None:
    made = client.post(
        "/api/stories",
        json={
            "card": upload(SERAPHINA),
            "persona": {"name": "Aria", "description": "A wandering bard."},
            "lorebooks": [upload(ELDORIA)],
        },
    )
    assert made.status_code == 201, made.text
    body = made.json()
    session = body["session"]
    assert session["title"] == "Seraphina"
    assert session["metadata"]["settings"]["persona"] == {
        "name": "Aria",
        "description": "A wandering bard.",
    }
    # The greeting is the first reply, HEAD on it; the alternate greetings its swipes.
    greetings = body["nodes"]
    assert greetings and all(node["role"] == "assistant" for node in greetings)
    assert session["head_id"] == greetings[0]["id"]
    assert body["imported"]["name"] == "Seraphina"
    # The RPG schema: HP with its bounds, gold, inventory.
    state = client.get(f"/api/sessions/{session['id']}/state").json()
    assert state["variables"]["hp"] == 100 and state["variables"]["gold"] == 0
    schema = store.schema(session["id"])
    assert schema.variables["hp"].min == 0 and schema.variables["hp"].max == "max_hp"
    # The Eldoria book is kept with it.
    books = [book["book"] for book in client.get(f"/api/sessions/{session['id']}/lore").json()]
    assert "Eldoria" in books

    # The avatar: the card's picture without its text chunks, kept by the browser.
    avatar = client.get(f"/api/sessions/{session['id']}/avatar")
    assert avatar.status_code == 200
    assert avatar.headers["content-type"] == "image/png"
    assert avatar.content.startswith(PNG) and b"chara" not in avatar.content
    assert len(avatar.content) < len(SERAPHINA.read_bytes())
    assert "max-age" in avatar.headers["cache-control"]


def test_a_story_from_a_json_card_with_no_campaign(client: TestClient, store: Store) -> None:
    data = json.dumps(MINIMAL_CARD).encode()
    made = client.post(
        "/api/stories",
        json={"card": upload(data, "bram.json"), "campaign": "none", "title": "The crossing"},
    )
    assert made.status_code == 201, made.text
    body = made.json()
    sid = body["session"]["id"]
    assert body["session"]["title"] == "The crossing"
    assert [node["content"] for node in body["nodes"]] == [
        "The river is high tonight.",
        "You again?",
        "Fare first.",
    ]
    assert store.schema(sid).variables == {}  # free variables
    assert client.get(f"/api/sessions/{sid}/avatar").status_code == 404
    listed = {s["id"]: s for s in client.get("/api/sessions").json()["sessions"]}
    assert listed[sid]["character"] == "Bram" and listed[sid]["avatar_url"] is None


def test_a_bad_card_is_refused_and_nothing_is_made(client: TestClient, store: Store) -> None:
    before = len(store.sessions())
    cut = SERAPHINA.read_bytes()[:5000]  # a PNG cut short
    refused = client.post("/api/stories", json={"card": upload(cut, "cut.png")})
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_card"
    assert "cut.png" in refused.json()["detail"] and "truncated" in refused.json()["detail"]
    # A lorebook given as the card says what it is.
    misfiled = client.post("/api/stories", json={"card": upload(ELDORIA)})
    assert misfiled.status_code == 422 and "lorebook" in misfiled.json()["detail"]
    # A good card with a bad book: nothing is made either.
    bad_book = client.post(
        "/api/stories",
        json={"card": upload(SERAPHINA), "lorebooks": [upload(b'{"entries": 3}', "x.json")]},
    )
    assert bad_book.status_code == 422 and bad_book.json()["code"] == "invalid_lorebook"
    not_base64 = client.post("/api/stories", json={"card": {"filename": "a.png", "data": "@@"}})
    assert not_base64.status_code == 422 and not_base64.json()["code"] == "invalid_request"
    assert len(store.sessions()) == before


def test_a_story_from_a_card_and_a_book_kept_with_other_sessions(client: TestClient) -> None:
    first = client.post(
        "/api/stories", json={"card": upload(SERAPHINA), "lorebooks": [upload(REAL_BOOK_ZH)]}
    ).json()["session"]["id"]
    cards = client.get("/api/cards").json()
    seraphina = next(card for card in cards if card["name"] == "Seraphina")
    assert seraphina["session_id"] == first
    assert seraphina["avatar_url"] == f"/api/sessions/{first}/cast/Seraphina/avatar"
    books = client.get("/api/lorebooks").json()
    zh = next(book for book in books if book["name"] == REAL_BOOK_ZH.stem)
    assert zh["entries"] > 0

    made = client.post(
        "/api/stories",
        json={
            "card": {"session_id": first},
            "lorebooks": [{"session_id": zh["session_id"], "name": zh["name"]}],
            "campaign": "rpg",
        },
    )
    assert made.status_code == 201, made.text
    second = made.json()["session"]["id"]
    assert second != first and made.json()["nodes"]
    assert client.get(f"/api/sessions/{second}/avatar").status_code == 200
    names = [book["book"] for book in client.get(f"/api/sessions/{second}/lore").json()]
    assert REAL_BOOK_ZH.stem in names

    gone = client.post("/api/stories", json={"card": {"session_id": "0" * 32}})
    assert gone.status_code == 422 and gone.json()["code"] == "invalid_story"
    no_book = client.post(
        "/api/stories",
        json={"card": upload(SERAPHINA), "lorebooks": [{"session_id": first, "name": "Nope"}]},
    )
    assert no_book.status_code == 422 and no_book.json()["code"] == "invalid_story"
    assert "Nope" in no_book.json()["detail"]


def test_import_tells_each_kind_by_its_content(client: TestClient) -> None:
    sid = client.post("/api/sessions", json={"title": "to export"}).json()["session"]["id"]
    tree = client.get(f"/api/sessions/{sid}/exports/tree").content
    files = {
        "card": (SERAPHINA.read_bytes(), "card"),
        "card v1": (REAL_CARD_V1.read_bytes(), "card"),
        "lorebook": (ELDORIA.read_bytes(), "lorebook"),
        "chat": (CHAT.read_bytes(), "chat"),
        "tree": (tree, "tree"),
        "group chat without a header": ((CHATS / "group_no_header.jsonl").read_bytes(), "chat"),
        "empty group chat": (b"\n \n", "chat"),
        "chat with a byte-order mark": (b"\xef\xbb\xbf" + CHAT.read_bytes(), "chat"),
        "card on one line": (json.dumps(MINIMAL_CARD).encode(), "card"),
    }
    for label, (data, kind) in files.items():
        # a misleading name changes nothing: the content says what the file is
        answer = client.post("/api/imports/kind", content=data, params={"filename": "x.txt"})
        assert answer.status_code == 200, (label, answer.text)
        assert answer.json()["kind"] == kind, label
    assert (
        client.post("/api/imports/kind", content=SERAPHINA.read_bytes()).json()["name"]
        == "Seraphina"
    )
    for junk in (b"hello", b"[1, 2]", PNG[:4] + b"nope", b'{"a": 1}'):
        refused = client.post("/api/imports/kind", content=junk, params={"filename": "f.bin"})
        assert refused.status_code == 422, junk
        assert refused.json()["code"] == "unknown_file_kind"
        assert "f.bin" in refused.json()["detail"] and "not JSON" not in refused.json()["detail"]
