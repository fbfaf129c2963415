"""The chat exchange through the API: a group chat with CRLF line endings comes back
byte for byte, an empty one (whitespace) is an empty session, and a message with no
name of its own is exported under the session's names."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from mnemosyne import Store
from tests._fixtures import FIXTURES

CHATS = FIXTURES / "chats"


def test_a_group_chat_comes_back_byte_for_byte(client: TestClient) -> None:
    for path in (CHATS / "group_with_header_crlf.jsonl", CHATS / "group_no_header.jsonl"):
        data = path.read_bytes()
        made = client.post("/api/imports/chat", content=data, params={"filename": path.name})
        assert made.status_code == 201, made.text
        sid = made.json()["session"]["id"]
        assert client.get(f"/api/sessions/{sid}/exports/chat").content == data


def test_an_empty_group_chat_is_an_empty_session(client: TestClient) -> None:
    made = client.post("/api/imports/chat", content=b"\n \n", params={"filename": "g.jsonl"})
    assert made.status_code == 201, made.text
    assert made.json()["imported"]["nodes"] == 0 and made.json()["session"]["head_id"] is None


def test_a_nameless_message_is_exported_under_the_sessions_names(
    client: TestClient, store: Store
) -> None:
    data = (CHATS / "greeting_swipes.jsonl").read_bytes()
    sid = client.post("/api/imports/chat", content=data).json()["session"]["id"]
    store.append(sid, "user", "I sit up.")  # no name: added by hand
    store.append(sid, "assistant", "She smiles.")
    lines = client.get(f"/api/sessions/{sid}/exports/chat").text.splitlines()
    assert [json.loads(line)["name"] for line in lines[1:]] == ["Seraphina", "Aldric", "Seraphina"]


def test_a_chat_and_a_book_named_in_any_script_download(client: TestClient, store: Store) -> None:
    """A non-Latin title or book name cannot go in a header's bare filename: it is sent
    as RFC 6266's filename* (it was a 500)."""
    from urllib.parse import quote

    from tests._fixtures import REAL_BOOK_ZH

    session = store.create_session(title="夜の物語")
    store.append(session.id, "user", "こんばんは")
    chat = client.get(f"/api/sessions/{session.id}/exports/chat")
    assert chat.status_code == 200, chat.text
    assert f"filename*=UTF-8''{quote('夜の物語.jsonl')}" in chat.headers["content-disposition"]
    from clotho.lore import import_lorebook

    kept, _ = import_lorebook(store, session.id, REAL_BOOK_ZH.read_bytes(), "奇遇")
    name = kept.book.name
    book = client.get(f"/api/sessions/{session.id}/lore/books/{quote(name)}/export")
    assert book.status_code == 200, book.text
    assert f"filename*=UTF-8''{quote(name + '.json')}" in book.headers["content-disposition"]
