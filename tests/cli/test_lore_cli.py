"""Lore from the command line: importing SillyTavern's real card and lorebook, testing
which entries fire, campaigns that bring their lore, and broken files refused whole."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mnemosyne import Message
from planner import PlanContext
from planner.lore import LorePlanner
from planner.lorebook import load_world_info
from tests._fixtures import ELDORIA as BOOK
from tests._fixtures import REAL_BOOK_ZH
from tests._fixtures import SERAPHINA as CARD

from .test_cli import InProcess, Run


@pytest.fixture
def lore_run(tmp_path: Path) -> Run:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    run.env["CLOTHO_VECTORS"] = "false"  # keywords only: the model is tested in tests/planner
    return run


def test_the_real_card_and_lorebook_import_and_fire(lore_run: Run) -> None:
    lore_run("session", "new", "--title", "glade")
    card = lore_run.json("import", "card", str(CARD))
    assert card["name"] == "Seraphina" and card["book"] == "Eldoria"
    assert len(card["greetings"]) == 1  # her greeting starts the story
    log = lore_run.json("log")
    assert log[0]["role"] == "assistant" and log[0]["name"] == "Seraphina"
    assert "Seraphina" in log[0]["content"]

    # Her book is Eldoria: the same lore imported again is kept once (the README's walk
    # imported both, and every entry reached the prompt twice: 8 instead of 4).
    book = lore_run.json("import", "lorebook", str(BOOK), "--name", "World")
    assert book == {
        "book": "Eldoria",
        "entries": 4,
        "enabled": 4,
        "same_as": "Eldoria",
        "renamed_from": None,
    }
    said = lore_run("import", "lorebook", str(BOOK)).stdout
    assert "holds the same lore as the book 'Eldoria' already in the session: kept once" in said
    listed = lore_run.json("lore", "list")
    assert [b["book"] for b in listed] == ["Eldoria"]
    assert listed[0]["entries"][1]["keys"][0] == "shadowfang"

    fired = lore_run.json("lore", "test", "Is that a Shadowfang?")
    assert sorted(row["uid"] for row in fired) == [0, 1, 2, 3]  # each once
    reasons = {row["uid"]: row["reason"] for row in fired}
    assert reasons[1] == "key 'shadowfang' in message 1"  # the new message, after the greeting
    vias = {row["uid"]: row["via"] for row in fired}
    assert vias[1] == "key" and set(vias.values()) <= {"key", "recursion"}
    # whole words: 'power' does not fire on 'powerful'
    quiet = lore_run.json("lore", "test", "A powerful silence.")
    reasons = {row["uid"]: row["reason"] for row in quiet}
    assert reasons[3] == "key 'magic' in message 0"  # from her greeting, not 'powerful'


def test_a_different_book_of_a_taken_name_is_named_apart_or_replaces_it(
    lore_run: Run, tmp_path: Path
) -> None:
    lore_run("session", "new")
    assert lore_run.json("import", "lorebook", str(BOOK), "--name", "Lore")["book"] == "Lore"
    other = tmp_path / "Lore.json"
    other.write_text(
        json.dumps({"entries": {"0": {"uid": 0, "key": ["inn"], "content": "An inn."}}})
    )
    said = lore_run("import", "lorebook", str(other)).stdout
    assert "a different book is already named 'Lore': kept as 'Lore (2)'" in said
    assert [b["book"] for b in lore_run.json("lore", "list")] == ["Lore", "Lore (2)"]
    replaced = lore_run.json("import", "lorebook", str(other), "--replace")
    assert replaced["book"] == "Lore" and replaced["entries"] == 1
    assert [len(b["entries"]) for b in lore_run.json("lore", "list")] == [1, 1]


def test_a_card_given_as_a_lorebook_says_to_import_it_as_a_card(lore_run: Run) -> None:
    lore_run("session", "new")
    said = lore_run.fails("import", "lorebook", str(CARD))
    assert said.endswith(
        "this is a character card, not a lorebook: import it with `clotho import card FILE`"
    )
    assert lore_run.json("lore", "list") == []


def test_broken_files_are_refused_and_nothing_is_stored(lore_run: Run, tmp_path: Path) -> None:
    lore_run("session", "new")
    truncated = tmp_path / "cut.png"
    truncated.write_bytes(CARD.read_bytes()[:5000])
    assert "cut.png" in lore_run.fails("import", "card", str(truncated))
    no_card = tmp_path / "plain.png"
    no_card.write_bytes(b"\x89PNG\r\n\x1a\n" + CARD.read_bytes()[8:33] + CARD.read_bytes()[-12:])
    assert "no 'chara' or 'ccv3'" in lore_run.fails("import", "card", str(no_card))
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"entries": {"0": {"uid": 0, "key": "x", "order": "high"}}}))
    assert "entries.0.order" in lore_run.fails("import", "lorebook", str(wrong))
    assert "no such file" in lore_run.fails("import", "lorebook", str(tmp_path / "gone.json"))
    assert lore_run.json("lore", "list") == []
    assert lore_run.json("log") == []


def test_a_campaign_brings_its_card_lorebooks_and_settings(lore_run: Run, tmp_path: Path) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "eldoria.json").write_bytes(BOOK.read_bytes())
    (folder / "campaign.toml").write_text(
        'title = "Glade"\n[lore]\nbooks = ["eldoria.json"]\nscan_depth = 1\n'
        "[lore.vectors]\nhits = 2\n"
    )
    lore_run("session", "new", "--campaign", str(folder))
    assert [b["book"] for b in lore_run.json("lore", "list")] == ["eldoria"]
    lore_run("add", "user", "The beasts came at night.")
    lore_run("add", "assistant", "Rest now.")
    # scan depth 1: only the new message is scanned, so the beasts are not found
    assert lore_run.json("lore", "test", "Thank you.") == []
    fired = {r["uid"]: r["reason"] for r in lore_run.json("lore", "test", "Beasts?")}
    assert fired.pop(1) == "key 'beasts' in message 2"
    assert fired and all("recursion from 'eldoria:" in reason for reason in fired.values())

    (folder / "campaign.toml").write_text('[lore]\nbooks = ["eldoria.json"]\nscan_depht = 1\n')
    assert "scan_depht" in lore_run.fails("session", "new", "--campaign", str(folder))


def test_lore_test_without_a_model_counts_tokens_and_says_with_what(
    lore_run: Run, tmp_path: Path
) -> None:
    """A Chinese book: three bytes a character, about one token. Counted in bytes, the
    budget (25% of the default 8,192-token window) would cut most of it."""
    raw = json.loads(REAL_BOOK_ZH.read_bytes())
    for entry in raw["entries"].values():
        entry["content"] = (entry["content"] + "\n") * 5
    book = tmp_path / "zh.json"
    book.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    text = "我们在路上遇敌了，是盗贼、土匪还是死灵法师？战斗开始！"
    everything = sorted(int(uid) for uid in raw["entries"])

    lore_run("session", "new")
    lore_run("import", "lorebook", str(book))
    fired = lore_run.json("lore", "test", text)
    assert sorted(row["uid"] for row in fired) == everything
    assert "tokens counted with tiktoken cl100k_base" in lore_run("lore", "test", text).stdout

    # the same scan counting bytes leaves entries out: the test above could fail
    planner = LorePlanner([load_world_info(book.read_bytes(), "zh")], seed=1)
    context = PlanContext(history=[Message("", "user", None, text)], state={}, user_text=text)
    by_bytes = asyncio.run(planner.retrieve(asyncio.run(planner.plan(context)), context))
    assert len(by_bytes.hits) < len(everything)
    assert any(skip["reason"].startswith("budget") for skip in by_bytes.skipped)


def test_a_campaign_whose_book_is_its_cards_own_keeps_it_once(
    lore_run: Run, tmp_path: Path
) -> None:
    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "seraphina.png").write_bytes(CARD.read_bytes())
    (folder / "eldoria.json").write_bytes(BOOK.read_bytes())
    (folder / "campaign.toml").write_text(
        '[lore]\ncard = "seraphina.png"\nbooks = ["eldoria.json"]\n'
    )
    made = lore_run("session", "new", "--campaign", str(folder))
    assert "eldoria.json holds the same lore as the book 'Eldoria': kept once" in made.stderr
    assert [b["book"] for b in lore_run.json("lore", "list")] == ["Eldoria"]


def test_a_book_then_its_card_keeps_the_book_once_and_a_book_is_no_card(lore_run: Run) -> None:
    lore_run("session", "new")
    lore_run("import", "lorebook", str(BOOK))
    card = lore_run("import", "card", str(CARD))
    assert (
        "warning: the card's book 'Eldoria' holds the same lore as the book "
        "'sillytavern_Eldoria_worldinfo' already in the session: kept once"
    ) in card.stderr
    listed = lore_run.json("lore", "list")
    assert [b["book"] for b in listed] == ["sillytavern_Eldoria_worldinfo"]

    said = lore_run.fails("import", "card", str(BOOK))
    assert said.endswith(
        "this is a World Info lorebook, not a character card: "
        "import it with `clotho import lorebook FILE`"
    )
