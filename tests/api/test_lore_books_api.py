"""Lorebooks over the API, kept once: a card's own book imported again as a lorebook adds
nothing and says so (`imported.same_as`), a different book of a taken name is named apart
(`imported.renamed_from`), a card sent as a lorebook is refused with the way to import it.
On SQLite and PostgreSQL."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests._fixtures import ELDORIA, SERAPHINA

from .test_api import new_session, problem


def test_a_book_is_kept_once_and_a_taken_name_is_named_apart(client: TestClient) -> None:
    sid = new_session(client)["id"]
    card = client.post(
        f"/api/sessions/{sid}/imports/card",
        content=SERAPHINA.read_bytes(),
        params={"filename": "Seraphina.png"},
    )
    assert card.status_code == 200, card.text
    again = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=ELDORIA.read_bytes(),
        params={"name": "Eldoria.json"},
    )
    assert again.status_code == 200, again.text
    imported = again.json()["imported"]
    assert (imported["same_as"], imported["renamed_from"], imported["book"]) == (
        "Eldoria",
        None,
        "Eldoria",
    )
    assert "kept once" in again.json()["results"][0]["note"]
    assert [b["book"] for b in client.get(f"/api/sessions/{sid}/lore").json()] == ["Eldoria"]
    fired = client.post(f"/api/sessions/{sid}/lore/test", json={"text": "A shadowfang!"}).json()
    assert sorted(row["uid"] for row in fired) == [0, 1, 2, 3]  # each entry once, not twice
    assert {row["uid"]: row["via"] for row in fired}[1] == "key"

    other = {"entries": {"0": {"uid": 0, "key": ["inn"], "content": "An inn."}}}
    renamed = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=json.dumps(other).encode(),
        params={"name": "Eldoria.json"},
    )
    imported = renamed.json()["imported"]
    assert (imported["same_as"], imported["renamed_from"], imported["book"]) == (
        None,
        "Eldoria",
        "Eldoria (2)",
    )
    books = client.get(f"/api/sessions/{sid}/lore").json()
    assert [(b["book"], len(b["entries"])) for b in books] == [("Eldoria", 4), ("Eldoria (2)", 1)]


def test_a_card_sent_as_a_lorebook_says_to_import_it_as_a_card(client: TestClient) -> None:
    sid = new_session(client)["id"]
    refused = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=SERAPHINA.read_bytes(),
        params={"name": "Seraphina.png"},
    )
    detail = problem(refused, 422, "invalid_lorebook")["detail"]
    assert "this is a character card, not a lorebook" in detail
    assert client.get(f"/api/sessions/{sid}/lore").json() == []
