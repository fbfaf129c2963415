"""The lore manager's API: a book read in full, an entry changed, added and deleted, a book
switched off and on and removed, each with If-Match in one transaction; the lore test and
the next turn play the lore as changed; a bad change changes nothing; a book exports as the
World Info file it came as, unknown fields kept. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from orchestrator.loopback import ModelServer
from tests._fixtures import ELDORIA

from .test_api import new_session, problem

#: A book as another tool might write it: fields SillyTavern and Clotho do not know, at
#: the top and in an entry, and an entry that leaves most fields out.
ODD_BOOK = {
    "name": "Harbour",
    "toolVersion": "9.1",
    "entries": {
        "0": {
            "uid": 0,
            "key": ["harbour"],
            "content": "Gulls over the harbour.",
            "myTool": {"colour": "teal", "pinned": True},
            "position": 0,
        },
        "7": {"key": ["ferry"], "content": "The ferry leaves at dawn."},
    },
}


def _book(client: TestClient, sid: str, data: bytes, name: str) -> None:
    made = client.post(
        f"/api/sessions/{sid}/imports/lorebook", content=data, params={"name": f"{name}.json"}
    )
    assert made.status_code == 200, made.text


def _fired(client: TestClient, sid: str, text: str) -> dict[str, Any]:
    answer = client.post(
        f"/api/sessions/{sid}/lore/test", params={"skipped": "true"}, json={"text": text}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _version(client: TestClient, sid: str) -> int:
    return int(client.get(f"/api/sessions/{sid}").json()["version"])


def test_an_entry_changed_fires_by_its_new_key_and_the_book_reads_in_full(
    client: TestClient,
) -> None:
    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")
    read = client.get(f"/api/sessions/{sid}/lore/books/Eldoria")
    assert read.status_code == 200, read.text
    book = read.json()
    assert (book["book"], book["enabled"], book["kind"]) == ("Eldoria", True, "world_info")
    glade = next(entry for entry in book["entries"] if entry["uid"] == 2)
    assert glade["keys"] == ["glade", "safe haven", "refuge"]
    assert (glade["selective_logic"], glade["sticky"], glade["condition"]) == (0, None, None)
    assert [hit["uid"] for hit in _fired(client, sid, "The moonwell glows.")["fired"]] == []

    version = int(read.headers["etag"].strip('"'))
    change = {
        "keys": ["moonwell"],
        "comment": "The moonwell",
        "sticky": 2,
        "condition": "'cursed' not in flags",
    }
    changed = client.patch(
        f"/api/sessions/{sid}/lore/books/Eldoria/entries/2",
        json=change,
        headers={"If-Match": f'"{version}"'},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["session"]["version"] == version + 1
    assert changed.json()["results"][0]["action"] == "lore_change"

    test = _fired(client, sid, "The moonwell glows.")
    by_uid = {hit["uid"]: hit for hit in test["fired"]}  # and by recursion what it names
    hit = by_uid[2]
    assert (hit["book"], hit["uid"], hit["via"], hit["comment"]) == (
        "Eldoria",
        2,
        "key",
        "The moonwell",
    )
    assert "moonwell" in hit["reason"]
    assert test["budget"] > 0 and test["tokens"] > 0
    assert _fired(client, sid, "A safe haven.")["fired"] == []  # the old keys are gone
    again = client.get(f"/api/sessions/{sid}/lore/books/Eldoria").json()["entries"][2]
    assert (again["keys"], again["sticky"], again["condition"]) == (
        ["moonwell"],
        2,
        "'cursed' not in flags",
    )

    stale = client.patch(
        f"/api/sessions/{sid}/lore/books/Eldoria/entries/2",
        json={"keys": ["ruin"]},
        headers={"If-Match": f'"{version}"'},
    )
    problem(stale, 412, "conflict")
    assert client.get(f"/api/sessions/{sid}/lore/books/Eldoria").json()["entries"][2] == again


def test_a_bad_change_changes_nothing_and_names_the_field(client: TestClient) -> None:
    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")
    before = client.get(f"/api/sessions/{sid}/lore/books/Eldoria/export").content
    version = _version(client, sid)
    url = f"/api/sessions/{sid}/lore/books/Eldoria/entries/1"

    wrong_type = problem(client.patch(url, json={"order": "high"}), 422, "invalid_request")
    assert any("order" in error["field"] for error in wrong_type["errors"])
    problem(client.patch(url, json={"keys": None}), 422)  # keys cannot be null
    problem(client.patch(url, json={"position": 9}), 422)
    problem(client.patch(url, json={"uid": 5}), 422)  # not a field players edit
    bad_condition = problem(client.patch(url, json={"condition": "hp <"}), 422)
    assert bad_condition["code"] == "invalid_condition"
    problem(client.patch(f"/api/sessions/{sid}/lore/books/Eldoria/entries/99", json={}), 404)
    problem(client.patch(f"/api/sessions/{sid}/lore/books/Nowhere/entries/1", json={}), 404)
    problem(client.post(f"/api/sessions/{sid}/lore/books/Eldoria/entries", json={"depth": -1}), 422)

    assert client.get(f"/api/sessions/{sid}/lore/books/Eldoria/export").content == before
    assert _version(client, sid) == version


def test_a_book_exports_as_it_came_with_the_changes_written_in(client: TestClient) -> None:
    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")
    exported = client.get(f"/api/sessions/{sid}/lore/books/Eldoria/export")
    assert exported.status_code == 200, exported.text
    assert exported.content == ELDORIA.read_bytes()  # unchanged: byte for byte
    assert 'filename="Eldoria.json"' in exported.headers["content-disposition"]

    _book(client, sid, json.dumps(ODD_BOOK).encode(), "Harbour")
    url = f"/api/sessions/{sid}/lore/books/Harbour"
    changed = client.patch(
        f"{url}/entries/0", json={"content": "Gulls and rain.", "enabled": False}
    )
    assert changed.status_code == 200, changed.text
    assert client.patch(f"{url}/entries/7", json={"keys": ["ferry", "boat"]}).status_code == 200
    document = client.get(f"{url}/export").json()
    assert (document["name"], document["toolVersion"]) == ("Harbour", "9.1")
    first = document["entries"]["0"]
    assert first["myTool"] == {"colour": "teal", "pinned": True}
    assert (first["content"], first["disable"]) == ("Gulls and rain.", True)
    assert list(first)[:4] == ["uid", "key", "content", "myTool"]  # the file's order kept
    assert document["entries"]["7"] == {
        "key": ["ferry", "boat"],
        "content": "The ferry leaves at dawn.",
    }

    # the exported file is a lorebook again, as it was changed
    other = new_session(client)["id"]
    _book(client, other, client.get(f"{url}/export").content, "Harbour")
    entries = client.get(f"/api/sessions/{other}/lore/books/Harbour").json()["entries"]
    assert [(e["uid"], e["enabled"], e["keys"]) for e in entries] == [
        (0, False, ["harbour"]),
        (7, True, ["ferry", "boat"]),
    ]


def test_entries_added_and_deleted_books_switched_off_and_removed(client: TestClient) -> None:
    sid = new_session(client)["id"]
    _book(client, sid, json.dumps(ODD_BOOK).encode(), "Harbour")
    url = f"/api/sessions/{sid}/lore/books/Harbour"
    added = client.post(f"{url}/entries", json={"keys": ["lighthouse"], "content": "It blinks."})
    assert added.status_code == 201, added.text
    assert added.json()["results"][0]["count"] == 8  # the next free uid
    entry = client.get(url).json()["entries"][-1]
    assert (entry["uid"], entry["keys"], entry["order"], entry["selective"]) == (
        8,
        ["lighthouse"],
        100,
        True,
    )
    assert [hit["uid"] for hit in _fired(client, sid, "The lighthouse.")["fired"]] == [8]

    assert client.delete(f"{url}/entries/0").status_code == 200
    assert [e["uid"] for e in client.get(url).json()["entries"]] == [7, 8]
    problem(client.delete(f"{url}/entries/0"), 404)

    off = client.patch(url, json={"enabled": False})
    assert off.status_code == 200 and off.json()["results"][0]["count"] == 1
    assert _fired(client, sid, "The lighthouse.")["fired"] == []
    listed = client.get(f"/api/sessions/{sid}/lore").json()
    assert [(b["book"], b["enabled"]) for b in listed] == [("Harbour", False)]
    assert client.patch(url, json={"enabled": False}).json()["results"][0]["count"] == 0
    assert client.patch(url, json={"enabled": True}).status_code == 200
    assert [hit["uid"] for hit in _fired(client, sid, "The lighthouse.")["fired"]] == [8]

    client.patch(url, json={"enabled": False})
    again = client.post(  # the same lore again: kept once, and said to be switched off
        f"/api/sessions/{sid}/imports/lorebook",
        content=client.get(f"{url}/export").content,
        params={"name": "Harbour.json"},
    )
    assert again.json()["imported"]["same_as"] == "Harbour"
    assert "switched off" in again.json()["results"][0]["note"]
    removed = client.delete(url)
    assert removed.status_code == 200 and removed.json()["results"][0]["count"] == 2
    assert client.get(f"/api/sessions/{sid}/lore").json() == []
    problem(client.get(url), 404)
    _book(client, sid, json.dumps(ODD_BOOK).encode(), "Harbour")  # back, and switched on
    assert client.get(url).json()["enabled"] is True


def test_the_next_turn_plays_the_entry_as_changed(
    make_client: Callable[..., TestClient], serve: Callable[..., ModelServer]
) -> None:
    server = serve(lambda request: "The forest listens.")
    client = make_client(server)
    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")

    def turn(text: str) -> str:
        """What the reply's call of a turn sent (its last message the player's)."""
        before = len(server.requests)
        played = client.post(f"/api/sessions/{sid}/turns", json={"kind": "say", "text": text})
        assert played.status_code == 201, played.text
        calls = [r.messages for r in server.requests[before:]]
        [sent] = [m for m in calls if m[-1] == {"role": "user", "content": text}]
        return json.dumps(sent)

    assert "Shadowfangs" in turn("A shadowfang!")  # the engine is built and kept
    change = {"content": "Shadowfangs are made of smoke and teeth."}
    assert client.patch(f"/api/sessions/{sid}/lore/books/Eldoria/entries/1", json=change)
    sent = turn("Another shadowfang!")
    assert "made of smoke and teeth" in sent and "What are Shadowfangs?" not in sent


def test_a_new_entry_takes_neither_a_uid_nor_a_key_in_use(client: TestClient) -> None:
    sid = new_session(client)["id"]
    keyed_apart = {"entries": {"2": {"uid": 1, "key": ["well"], "content": "A deep well."}}}
    _book(client, sid, json.dumps(keyed_apart).encode(), "Well")
    url = f"/api/sessions/{sid}/lore/books/Well"
    added = client.post(f"{url}/entries", json={"keys": ["bucket"]})
    assert added.json()["results"][0]["count"] == 3
    document = client.get(f"{url}/export").json()
    assert document["entries"]["2"]["key"] == ["well"]  # still there, under its own key
    assert document["entries"]["3"]["key"] == ["bucket"]


def test_an_older_book_of_entries_in_a_list_keeps_its_shape_and_uids(client: TestClient) -> None:
    sid = new_session(client)["id"]
    older = {"entries": [{"key": ["ash"], "content": "Ash."}, {"key": ["oak"], "content": "Oak."}]}
    _book(client, sid, json.dumps(older).encode(), "Trees")
    url = f"/api/sessions/{sid}/lore/books/Trees"
    assert client.patch(f"{url}/entries/1", json={"keys": ["oak", "acorn"]}).status_code == 200
    assert client.delete(f"{url}/entries/0").status_code == 200
    assert client.post(f"{url}/entries", json={"keys": ["elm"]}).json()["results"][0]["count"] == 2
    entries = client.get(f"{url}/export").json()["entries"]
    assert isinstance(entries, list)
    assert [(e["uid"], e["key"]) for e in entries] == [(1, ["oak", "acorn"]), (2, ["elm"])]
    assert [hit["uid"] for hit in _fired(client, sid, "An acorn falls.")["fired"]] == [1]


def test_a_change_to_what_an_entry_already_is_writes_nothing(client: TestClient) -> None:
    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")
    version = _version(client, sid)
    url = f"/api/sessions/{sid}/lore/books/Eldoria/entries/2"
    same = client.patch(url, json={"keys": ["glade", "safe haven", "refuge"], "constant": False})
    assert same.status_code == 200, same.text
    assert same.json()["session"]["version"] == version and same.json()["results"][0]["note"] == ""
    assert client.patch(url, json={}).json()["session"]["version"] == version


def test_the_command_line_lists_a_book_switched_off_as_such(
    client: TestClient, database_url: str, tmp_path: Path
) -> None:
    from tests.cli.test_cli import Run

    sid = new_session(client)["id"]
    _book(client, sid, ELDORIA.read_bytes(), "Eldoria")
    assert client.patch(f"/api/sessions/{sid}/lore/books/Eldoria", json={"enabled": False})
    run = Run(database_url, tmp_path / "home")
    run.env["CLOTHO_SESSION"] = sid
    assert [(b["book"], b["enabled"]) for b in run.json("lore", "list")] == [("Eldoria", False)]
    assert "Eldoria (4 entries)  switched off" in run("lore", "list").stdout
