"""The session's names: the prompt, the nodes a turn stores and `export chat` call the
player and the character by name (the campaign's player, the card's or the imported
chat's character), never "User"/"Assistant"/"Player"; and a broken chat is worded as a
broken lorebook is."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.loopback import ModelServer
from tests._fixtures import FIXTURES

from .test_cli import InProcess
from .test_play import campaign_session, script


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


def speakers(path: Path) -> list[tuple[bool, str]]:
    lines = path.read_text().splitlines()
    return [(m["is_user"], m["name"]) for m in map(json.loads, lines) if "mes" in m]


def test_a_campaign_chat_exports_with_the_players_and_characters_names(
    model: ModelServer, tmp_path: Path
) -> None:
    play = campaign_session(model, tmp_path)
    play("say", "I attack the guard.")
    play("reroll")
    assert [(n["role"], n["name"]) for n in play.json("log")] == [
        ("user", "Tom"),
        ("assistant", "Marla"),
    ]
    target = tmp_path / "cave.jsonl"
    play("export", "chat", str(target))
    assert speakers(target) == [(True, "Tom"), (False, "Marla")]
    header = json.loads(target.read_text().splitlines()[0])
    assert "mes" not in header and "chat_metadata" in header


def test_an_imported_chat_goes_on_with_its_own_names(model: ModelServer, tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'chat.db'}", tmp_path / "home")
    run.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": model.url})
    run("import", "chat", str(FIXTURES / "chats" / "greeting_swipes.jsonl"))
    run("say", "I look around.")
    turn = next(
        body
        for body in map(json.loads, (r.body for r in model.requests))
        if "response_format" not in body
    )
    system = turn["messages"][0]["content"]
    assert "every character except Aldric" in system and "Player" not in system
    target = tmp_path / "out.jsonl"
    run("export", "chat", str(target))
    assert speakers(target) == [(False, "Seraphina"), (True, "Aldric"), (False, "Seraphina")]


def test_a_chat_and_a_lorebook_word_a_json_error_the_same_way(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'e.db'}", tmp_path / "home")
    run("session", "new", "--title", "errors")
    book, chat = tmp_path / "book.json", tmp_path / "chat.jsonl"
    book.write_text('{"entries": {\n  "0": {"key": ["a"],}\n}}\n')
    chat.write_text('{"chat_metadata": {}}\n{"mes": "a",}\n')
    wording = re.compile(r"not JSON: [^()]+ \(line 2, column \d+\)")
    for kind, path in (("lorebook", book), ("chat", chat)):
        error = run.fails("import", kind, str(path))
        assert wording.search(error), f"import {kind}: {error}"
