"""A session made from a card starts as SillyTavern starts a chat (the card's greeting,
its alternate greetings as alternatives), whichever way it is made: a campaign's
``[lore] card``, ``clotho import card`` on an empty session or on a new database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clotho.lore import CARD, LOREBOOK
from clotho.sessions import card_session, new_session
from mnemosyne import Store
from planner.cards import load_card
from tests._fixtures import SERAPHINA

from .test_cli import InProcess, Run


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    return InProcess(database_url, tmp_path / "home")


@pytest.fixture
def run_sqlite(tmp_path: Path) -> Run:
    return InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")


GREETINGS = ["*The inn is warm.* Welcome, {{user}}.", "*Rain.* You again?", "Sit down."]


def _card(tmp_path: Path, *, greetings: list[str] = GREETINGS) -> Path:
    path = tmp_path / "mira.json"
    data = {
        "name": "Mira",
        "first_mes": greetings[0],
        "alternate_greetings": greetings[1:],
        "description": "An innkeeper.",
        "character_book": {
            "name": "Inn",
            "entries": [{"keys": ["ale"], "content": "The ale is sour.", "id": 0}],
        },
    }
    path.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}))
    return path


def _campaign(tmp_path: Path, card: Path) -> Path:
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / card.name).write_bytes(card.read_bytes())
    (folder / "campaign.toml").write_text(f'title = "The inn"\n[lore]\ncard = "{card.name}"\n')
    return folder


def _greetings(store: Store, session_id: str) -> list[tuple[str, str | None, str]]:
    tree = store.tree(session_id)
    return [(n.role, n.name, n.content) for n in tree.nodes if n.parent_id is None]


def test_a_campaign_with_a_card_starts_with_its_greetings(store: Store, tmp_path: Path) -> None:
    session = new_session(store, campaign=_campaign(tmp_path, _card(tmp_path)))
    assert session.title == "The inn"
    roots = _greetings(store, session.id)
    assert roots == [("assistant", "Mira", text) for text in GREETINGS]  # alternatives
    head = store.node(session.id, session.head_id or "")
    assert head.content == GREETINGS[0]  # the story goes on from the first greeting
    assert [d.name for d in store.documents(session.id, LOREBOOK)] == ["Inn"]


def test_a_campaign_without_a_card_starts_empty(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "campaign.toml").write_text('title = "Plain"\n')
    session = new_session(store, campaign=folder)
    assert session.head_id is None and store.tree(session.id).nodes == []


def test_a_card_with_no_greeting_makes_an_empty_session(store: Store, tmp_path: Path) -> None:
    card = load_card(_card(tmp_path, greetings=["  "]).read_bytes(), "mira.json")
    session, greeted = card_session(store, card)
    assert greeted == [] and session.head_id is None
    assert session.title == "Mira"
    assert [d.name for d in store.documents(session.id, CARD)] == ["Mira"]


def test_import_card_on_a_new_database_creates_its_session(run: Run, tmp_path: Path) -> None:
    done = run.json("import", "card", str(SERAPHINA))
    assert done["new_session"] is True and done["name"] == "Seraphina"
    listed = run.json("session", "list")
    assert [(s["id"], s["title"], s["current"]) for s in listed] == [
        (done["session_id"], "Seraphina", True)
    ]
    log = run.json("log")
    assert [n["id"] for n in log] == done["greetings"]
    assert log[0]["name"] == "Seraphina"

    # a second card goes into the session now current, which has its greeting already
    again = run.json("import", "card", str(_card(tmp_path)))
    assert again["new_session"] is False and again["greetings"] == []
    assert again["session_id"] == done["session_id"]
    said = run("import", "card", str(SERAPHINA), "--session", done["session_id"]).stdout
    assert "created session" not in said and "Imported card Seraphina" in said


def test_the_new_session_is_announced(run_sqlite: Run, tmp_path: Path) -> None:
    said = run_sqlite("import", "card", str(_card(tmp_path))).stdout
    assert "No session was chosen: created session" in said and "(Mira)" in said
    assert "3 in all, as alternatives" in said


@pytest.mark.parametrize("broken", [b"", b"{", b'{"spec": "chara_card_v2"}'])
def test_a_bad_card_on_a_new_database_creates_nothing(
    run_sqlite: Run, tmp_path: Path, broken: bytes
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(broken)
    assert "bad.json" in run_sqlite.fails("import", "card", str(path))
    assert run_sqlite.json("session", "list") == []


def test_the_api_starts_a_campaign_session_with_its_greetings(store: Store, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from clotho.api import create_app
    from clotho.settings import Settings

    token = "test-token-5e1d2c"
    settings = Settings(
        data_dir=tmp_path / "data", vectors=False, api_token=token, allowed_hosts=["testserver"]
    )
    app = create_app(settings, store=store, token=token)
    with TestClient(app, headers={"Authorization": f"Bearer {token}"}) as client:
        made = client.post(
            "/api/sessions", json={"campaign": str(_campaign(tmp_path, _card(tmp_path)))}
        )
        assert made.status_code == 201, made.text
        session = made.json()["session"]
    assert store.node(session["id"], session["head_id"]).content == GREETINGS[0]
    assert len(_greetings(store, session["id"])) == 3
