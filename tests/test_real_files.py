"""Every file in tests/fixtures/ (the real ones in ``real/`` and the three beside them) goes
through the ``clotho`` command, as a player would use it, each on a fresh database.

- A chat imports (``clotho import chat``) and exports back (``clotho export chat``) to the
  same bytes: the same JSON on every line, the same line endings, the final newline as the
  file had it.
- A World Info book imports (``clotho import lorebook``) with every entry, and a text that
  holds one of its keys fires that entry for that key (``clotho lore test``).
- A character card imports (``clotho import card``) into a new session that starts with
  its greeting, spoken under the character's name.

A file added to tests/fixtures/ or tests/fixtures/real/ without a case here (or without its
line in the fixtures' README) fails ``test_every_fixture_has_a_case``; the folders beside
``real/`` hold files made for one test module, which tests them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ._fixtures import (
    CHAT,
    ELDORIA,
    FIXTURES,
    REAL,
    REAL_BOOK_ZH,
    REAL_CARD_V1,
    REAL_CARD_V3,
    REAL_CHAT_ZH,
    REAL_GROUP_CHAT,
    REAL_TAVERNAI_BOOK,
    REAL_TAVERNAI_CHAT,
    SERAPHINA,
)
from .cli.test_cli import InProcess

CHATS = [REAL_CHAT_ZH, REAL_GROUP_CHAT, REAL_TAVERNAI_CHAT, CHAT]


@dataclass(frozen=True)
class Book:
    path: Path
    text: str
    """A text that holds one of ``uid``'s keys."""
    uid: int
    key: str


BOOKS = [
    Book(REAL_BOOK_ZH, "夜里遇到了盗贼", uid=2, key="盗贼"),
    Book(REAL_TAVERNAI_BOOK, "She transferred to Tokiwadai last spring.", uid=0, key="Tokiwadai"),
    Book(ELDORIA, "A shadowfang prowls past the camp.", uid=1, key="shadowfang"),
]


@dataclass(frozen=True)
class Card:
    path: Path
    name: str
    spec: str
    book_entries: int


CARDS = [
    Card(REAL_CARD_V1, "Megumin", "v1", 0),
    Card(REAL_CARD_V3, "Seraphina", "v3", 4),
    Card(SERAPHINA, "Seraphina", "v2", 4),
]


class Clotho:
    """Runs ``clotho --json`` (in this process) against one fresh SQLite database with a
    private home directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.run = InProcess(f"sqlite:///{tmp_path / 'real.db'}", tmp_path / "home")
        # keywords only: what is tested here is reading the files; lore by meaning has
        # its own tests (tests/cli/test_lore_by_meaning.py, the Chroma server's)
        self.run.env["CLOTHO_VECTORS"] = "false"

    def __call__(self, *args: str) -> Any:
        return self.run.json(*args)


@pytest.fixture
def clotho(tmp_path: Path) -> Clotho:
    return Clotho(tmp_path)


def test_every_fixture_has_a_case() -> None:
    cased = {*CHATS, *(b.path for b in BOOKS), *(c.path for c in CARDS)}
    on_disk = {p for folder in (FIXTURES, REAL) for p in folder.iterdir() if p.is_file()} - {
        FIXTURES / "README.md"
    }
    assert on_disk == cased
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in sorted(on_disk) if f"`{p.relative_to(FIXTURES)}`" not in readme] == []


@pytest.mark.parametrize("path", CHATS, ids=lambda p: p.name)
def test_a_chat_exports_back_to_the_same_bytes(clotho: Clotho, path: Path, tmp_path: Path) -> None:
    original = path.read_bytes()
    session = clotho("import", "chat", str(path))
    assert session["head_id"] is not None
    out = tmp_path / "out.jsonl"
    clotho("export", "chat", str(out))
    exported = out.read_bytes()
    # Line by line first, so that a difference names its line; then every byte.
    assert [json.loads(line) for line in exported.splitlines() if line.strip()] == [
        json.loads(line) for line in original.splitlines() if line.strip()
    ]
    assert exported == original


@pytest.mark.parametrize("book", BOOKS, ids=lambda b: b.path.name)
def test_a_book_imports_whole_and_its_keys_fire(clotho: Clotho, book: Book) -> None:
    entries = json.loads(book.path.read_text(encoding="utf-8"))["entries"]
    clotho("session", "new", "--title", "real files")
    imported = clotho("import", "lorebook", str(book.path))
    assert imported["entries"] == len(entries)
    fired = clotho("lore", "test", book.text)
    assert any(
        hit["uid"] == book.uid and hit["reason"].startswith(f"key '{book.key}' in message")
        for hit in fired
    ), fired


@pytest.mark.parametrize("card", CARDS, ids=lambda c: c.path.name)
def test_a_card_starts_a_session_with_its_greeting(clotho: Clotho, card: Card) -> None:
    imported = clotho("import", "card", str(card.path))
    assert (
        imported["name"],
        imported["spec"],
        imported["book_entries"],
        imported["new_session"],
    ) == (
        card.name,
        card.spec,
        card.book_entries,
        True,
    )
    log = clotho("log")
    assert [(n["id"], n["role"], n["name"]) for n in log] == [
        (imported["greetings"][0], "assistant", card.name)
    ]
