"""Large imports run in a worker process (clotho/api/worker.py): the file is imported
whole there, a refusal comes back as the same problem, and nothing is stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import clotho.formats.stchat
import clotho.formats.treefile
import clotho.lore
from clotho.api import exchange, worker
from mnemosyne import Store

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CHAT = FIXTURES / "sillytavern_chat_seraphina.jsonl"
BOOK = FIXTURES / "sillytavern_Eldoria_worldinfo.json"
CARD = FIXTURES / "sillytavern_default_Seraphina.png"


@pytest.fixture
def in_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every upload counts as large, and the importers of *this* process fail: what
    succeeds was imported by a worker process (it imports the real ones)."""
    monkeypatch.setattr(worker, "LARGE_IMPORT_BYTES", 1)

    def not_here(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("imported in the server's process")

    monkeypatch.setattr(clotho.formats.treefile, "import_tree", not_here)
    monkeypatch.setattr(clotho.formats.stchat, "import_chat", not_here)
    monkeypatch.setattr(exchange, "import_chat", not_here)
    monkeypatch.setattr(clotho.lore, "import_lorebook", not_here)
    monkeypatch.setattr(clotho.lore, "import_card", not_here)


@pytest.mark.usefixtures("in_worker")
def test_a_large_chat_and_tree_are_imported_by_a_worker(client: TestClient, store: Store) -> None:
    made = client.post("/api/imports/chat", content=CHAT.read_bytes(), params={"title": "big"})
    assert made.status_code == 201, made.text
    session = made.json()["session"]
    assert session["title"] == "big"
    assert made.json()["imported"]["nodes"] == len(store.tree(session["id"]).nodes) > 2
    exported = client.get(f"/api/sessions/{session['id']}/exports/tree")
    copied = client.post("/api/imports/tree", content=exported.content, params={"new_ids": True})
    assert copied.status_code == 201, copied.text
    copy = copied.json()["session"]["id"]
    assert copy != session["id"]
    assert [n.content for n in store.messages(copy)] == [
        n.content for n in store.messages(session["id"])
    ]


@pytest.mark.usefixtures("in_worker")
def test_a_refused_large_import_is_the_same_problem_and_stores_nothing(
    client: TestClient, store: Store
) -> None:
    before = [s.id for s in store.sessions()]
    lines = CHAT.read_bytes().splitlines()
    broken = b"\n".join([lines[0], b'{"mes": 1}', *lines[2:]])
    refused = client.post("/api/imports/chat", content=broken, params={"filename": "c.jsonl"})
    assert refused.status_code == 422
    body = refused.json()
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert body["code"] == "invalid_chat"
    assert body["detail"].startswith("c.jsonl: line 2")
    tree = client.post("/api/imports/tree", content=b'{"format": "clotho-tree"}')
    assert tree.status_code == 422
    assert tree.json()["code"] == "invalid_tree"
    assert [s.id for s in store.sessions()] == before


@pytest.mark.usefixtures("in_worker")
def test_a_large_lorebook_and_card_are_imported_by_a_worker(client: TestClient) -> None:
    made = client.post("/api/sessions", json={"title": "lore"}).json()["session"]
    sid, before_card = made["id"], made["version"]
    card = client.post(
        f"/api/sessions/{sid}/imports/card", content=CARD.read_bytes(), params={"filename": "s.png"}
    )
    assert card.status_code == 200, card.text
    assert card.json()["imported"]["name"] == "Seraphina"
    assert len(card.json()["nodes"]) >= 1
    version = card.json()["session"]["version"]
    book = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=BOOK.read_bytes(),
        params={"name": "eldoria.json"},
        headers={"If-Match": f'"{version}"'},
    )
    assert book.status_code == 200, book.text
    # the card's own book, sent again: kept once, and the answer says which book holds it
    assert book.json()["imported"]["same_as"] == "Eldoria"
    assert book.json()["imported"]["entries"] > 0
    names = [b["book"] for b in client.get(f"/api/sessions/{sid}/lore").json()]
    assert names == ["Eldoria"]
    stale = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=BOOK.read_bytes(),
        params={"name": "again.json"},
        headers={"If-Match": f'"{before_card}"'},
    )
    assert stale.status_code == 412, stale.text
    assert stale.headers["content-type"].startswith("application/problem+json")
