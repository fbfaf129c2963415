"""Hostile uploads through the HTTP API, on each backend: every importer refuses a
5,000-digit integer, ``NaN``, 100,000 levels of nesting, a text past the limit, too many
entries (and a card PNG's ``zTXt``/``iTXt`` decompression bombs) with a 4xx problem
document whose one-line detail names the place and the limit; the database is exactly
as it was; the real files still import."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from clotho.formats.stchat import import_chat
from clotho.formats.treefile import export_tree
from mnemosyne import Store, jsontext
from tests import _hostile_files as h

from .test_api import new_session, problem

MAX_DETAIL = 400
#: The limit a problem names, by case (NaN and a bomb pass no limit of the JSON reader).
LIMITS = {
    "digits": "max_digits",
    "deep": "max_depth",
    "huge_string": "max_string",
    "too_many_entries": "max_entries",
}


def snapshot(store: Store) -> list[Any]:
    """Everything the imports could change: sessions, versions, documents, nodes."""
    return [
        (
            session.id,
            session.version,
            session.head_id,
            [(d.kind, d.name, d.hash) for d in store.documents(session.id)],
            len(store.tree(session.id).nodes),
        )
        for session in store.sessions()
    ]


def refused(response: Any, *says: str, status: int = 422) -> dict[str, Any]:
    body = problem(response, status)
    detail = body["detail"]
    for part in says:
        assert part in detail, (part, detail)
    assert "\n" not in detail and len(detail) < MAX_DETAIL, detail
    assert "Traceback" not in detail and "set_int_max_str_digits" not in detail
    return body


@pytest.mark.parametrize("kind", ["lorebook", "card_json", "card_png"])
def test_hostile_lore_files_are_refused_and_change_nothing(
    client: TestClient, store: Store, kind: str
) -> None:
    sid = new_session(client)["id"]
    if kind == "lorebook":
        route, params = f"/api/sessions/{sid}/imports/lorebook", {"name": "book"}
        real = h.BOOK.read_bytes()
    else:
        route, params = f"/api/sessions/{sid}/imports/card", {"filename": f"card.{kind[5:]}"}
        real = h.CARD.read_bytes() if kind == "card_png" else json.dumps(h.card_document())
    before = snapshot(store)
    cases = h.BUILDERS[kind]()
    expected = {"digits", "nan", "deep", "huge_string", "too_many_entries"}
    if kind == "card_png":
        expected |= {"ztxt_bomb", "itxt_bomb"}
    assert set(cases) == expected
    for case, hostile in cases.items():
        response = client.post(route, content=hostile.data, params=params)
        body = refused(response, hostile.place, hostile.says)
        assert body["detail"].startswith(hostile.place)
        assert body.get("limit") == LIMITS.get(case), (case, body)
        assert snapshot(store) == before, case
    assert client.post(route, content=real, params=params).status_code == 200


def test_hostile_chats_are_refused_and_change_nothing(client: TestClient, store: Store) -> None:
    before = snapshot(store)
    cases = h.chats()
    assert set(cases) == {"digits", "nan", "deep", "huge_string", "too_many_entries"}
    for hostile in cases.values():
        response = client.post(
            "/api/imports/chat", content=hostile.data, params={"filename": hostile.filename}
        )
        assert refused(response, hostile.place, hostile.says)["detail"].startswith(hostile.place)
        assert snapshot(store) == before
    real = client.post("/api/imports/chat", content=h.CHAT.read_bytes())
    assert real.status_code == 201, real.text


def test_hostile_tree_files_are_refused_and_change_nothing(
    client: TestClient, store: Store
) -> None:
    session = import_chat(store, h.CHAT.read_bytes(), h.CHAT.name)
    document = export_tree(store, session.id)
    before = snapshot(store)
    cases = h.trees(document)
    assert set(cases) == {"digits", "nan", "deep", "huge_string", "too_many_entries"}
    for hostile in cases.values():
        response = client.post(
            "/api/imports/tree", content=hostile.data, params={"filename": hostile.filename}
        )
        assert refused(response, hostile.place, hostile.says)["detail"].startswith(hostile.place)
        assert snapshot(store) == before
    copied = client.post(
        "/api/imports/tree", content=json.dumps(document), params={"new_ids": True}
    )
    assert copied.status_code == 201, copied.text


def test_a_file_past_the_size_limit_is_a_413_naming_the_limit(
    client: TestClient, store: Store
) -> None:
    sid = new_session(client)["id"]
    before = snapshot(store)
    padding = " " * (jsontext.MAX_DOCUMENT_BYTES + 1)
    response = client.post(
        f"/api/sessions/{sid}/imports/lorebook",
        content=('{"entries": {}}' + padding).encode(),
        params={"name": "big"},
    )
    body = refused(response, f"more than the {jsontext.MAX_DOCUMENT_BYTES:,} allowed", status=413)
    assert body["limit"] == "max_bytes" and body["code"] == "invalid_lorebook"
    assert snapshot(store) == before


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('{"role": "user", "content": "a", "delta": ' + h.DEEP + "}", "nested too deep"),
        (
            '{"role": "user", "content": "a", "delta": [{"op": "set", "path": "hp", "value": '
            + h.DIGITS
            + "}]}",
            "a number of more than 4,300 digits",
        ),
    ],
    ids=["deep", "digits"],
)
def test_a_json_body_the_decoder_gives_up_on_is_a_422(
    client: TestClient, store: Store, body: str, says: str
) -> None:
    sid = new_session(client)["id"]
    before = snapshot(store)
    response = client.post(
        f"/api/sessions/{sid}/messages",
        content=body.encode(),
        headers={"content-type": "application/json"},
    )
    assert refused(response, says)["code"] == "invalid_body"
    assert snapshot(store) == before
