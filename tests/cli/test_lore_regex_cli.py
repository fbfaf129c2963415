"""`clotho lore test` with a regex key that backtracks catastrophically: it answers at
once, a good key still fires, and the slow key is named as skipped for the scan."""

from __future__ import annotations

import json
from pathlib import Path

from .test_cli import InProcess

TEXT = "A dragon lands. " + "a" * 60 + "!"
"""Unbounded, ``/(a|a)*$/`` would take longer than anyone waits on this."""


def test_a_slow_regex_key_is_skipped_and_named(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    run.env["CLOTHO_VECTORS"] = "false"
    book = tmp_path / "bombs.json"
    entries = {
        "0": {"uid": 0, "key": ["/dra(g|k)on/i"], "content": "Dragons.", "comment": "dragons"},
        "3": {"uid": 3, "key": ["/(a|a)*$/"], "content": "Never.", "comment": "bomb"},
    }
    book.write_text(json.dumps({"entries": entries}))
    run("session", "new")
    run("import", "lorebook", str(book))

    shown = run("lore", "test", TEXT).stdout.splitlines()
    assert shown[0] == "bombs:0 dragons  regex /dra(g|k)on/i in message 0"
    assert shown[1].startswith("not bombs:3  regex /(a|a)*$/ took longer than ")
    assert shown[1].endswith(" ms and was skipped for this scan")

    assert [row["uid"] for row in run.json("lore", "test", TEXT)] == [0]
    explained = run.json("lore", "test", "--skipped", TEXT)
    assert [row["uid"] for row in explained["fired"]] == [0]
    assert [(row["uid"], row["reason"][:22]) for row in explained["skipped"]] == [
        (3, "regex /(a|a)*$/ took l")
    ]
