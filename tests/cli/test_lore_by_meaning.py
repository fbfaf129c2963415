"""`clotho lore test` finds an entry by meaning with Clotho's own install: the local model
(WordLlama, shipped in its wheel), the lore index in the data folder, no network, no key."""

from __future__ import annotations

import json
from pathlib import Path

from tests.planner.test_chroma_server import FERRY, HOWLING, WOLVES

from .test_cli import InProcess


def test_lore_test_finds_an_entry_by_meaning_offline(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    for name in ("CLOTHO_VECTORS", "CLOTHO_EMBEDDING_MODEL", "CLOTHO_CHROMA_URL"):
        run.env.pop(name, None)  # the defaults: the local model, a folder of the data dir
    book = tmp_path / "north.json"
    book.write_text(json.dumps({"entries": {"0": WOLVES, "1": FERRY}}))
    run("session", "new")
    imported = run("import", "lorebook", str(book))
    assert "keywords only" not in imported.stderr

    text = HOWLING
    assert not any(key in text.lower() for entry in (WOLVES, FERRY) for key in entry["key"])
    done = run("--json", "lore", "test", text)
    assert done.stderr == ""  # no warning: nothing fell back to keywords
    fired = {row["uid"]: row["reason"] for row in json.loads(done.stdout)}
    assert list(fired) == [0]
    assert "similar" in fired[0]
    assert (tmp_path / "home" / "data" / "clotho" / "lore-index").is_dir()
