"""Hostile files from the command line: ``clotho import lorebook|card|chat|tree`` refuses
a 5,000-digit integer, ``NaN``, 100,000 levels of nesting, a text past the limit, too
many entries (and a card PNG's decompression bombs) with exit 1 and one line on stderr
naming the file, the place and the limit; the database is exactly as it was; the real
files still import. (SQLite: the API's tests run the same files on both backends.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clotho.formats.stchat import import_chat
from clotho.formats.treefile import export_tree
from mnemosyne import Store
from tests import _hostile_files as h

from .test_cli import InProcess, Run

COMMANDS = {
    "lorebook": ("import", "lorebook", "--name", "book"),
    "card_json": ("import", "card"),
    "card_png": ("import", "card"),
    "chat": ("import", "chat"),
    "tree": ("import", "tree"),
}


def snapshot(url: str) -> list[Any]:
    with Store.open(url) as store:
        return [
            (
                session.id,
                session.version,
                [(d.kind, d.name, d.hash) for d in store.documents(session.id)],
                len(store.tree(session.id).nodes),
            )
            for session in store.sessions()
        ]


@pytest.fixture
def hostile_run(tmp_path: Path) -> Run:
    run = InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")
    run.env["CLOTHO_VECTORS"] = "false"
    return run


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_hostile_files_are_refused_in_one_line_and_change_nothing(
    hostile_run: Run, tmp_path: Path, kind: str
) -> None:
    hostile_run("session", "new", "--title", "target")
    if kind == "tree":
        with Store.open(f"sqlite:///{tmp_path / 'source.db'}", migrate=True) as source:
            session = import_chat(source, h.CHAT.read_bytes(), h.CHAT.name)
            document = export_tree(source, session.id)
        cases, real = h.trees(document), json.dumps(document).encode()
    else:
        cases = h.BUILDERS[kind]()
        real = {
            "lorebook": h.BOOK.read_bytes(),
            "card_json": json.dumps(h.card_document()).encode(),
            "card_png": h.CARD.read_bytes(),
            "chat": h.CHAT.read_bytes(),
        }[kind]
    before = snapshot(hostile_run.url)
    folder = tmp_path / "files"
    folder.mkdir()
    command = COMMANDS[kind]
    for case, hostile in cases.items():
        path = folder / hostile.filename
        path.write_bytes(hostile.data)
        line = hostile_run.fails(*command[:2], str(path), *command[2:])
        # ``fails`` checked there is exactly one line and exit 1
        assert line.startswith(f"error: {hostile.place}"), (case, line)
        assert hostile.says in line, (case, line)
        assert len(line) < 400 and "set_int_max_str_digits" not in line, line
        assert snapshot(hostile_run.url) == before, case
    path = folder / f"real{Path(hostile.filename).suffix}"
    path.write_bytes(real)
    hostile_run(*command[:2], str(path), *command[2:])
    assert snapshot(hostile_run.url) != before


@pytest.mark.parametrize(
    ("toml", "says"),
    [
        ("x = " + "9" * 5000, "a number of more than 100 digits (the limit)"),
        (
            "x = " + "[" * 100_000 + "]" * 100_000,
            "nested too deep: more than 64 levels (the limit)",
        ),
        ("[model]\ntemperature = nan", "nan is not a finite number"),
        ("[model]\ntemperature = -inf", "-inf is not a finite number"),
    ],
    ids=["digits", "deep", "nan", "inf"],
)
def test_a_hostile_campaign_toml_is_one_line(tmp_path: Path, toml: str, says: str) -> None:
    from clotho.formats.campaign import CampaignError, load_campaign

    folder = tmp_path / "campaign"
    folder.mkdir()
    (folder / "campaign.toml").write_text('title = "t"\n' + toml + "\n")
    with pytest.raises(CampaignError) as caught:
        load_campaign(folder)
    assert str(caught.value) == f"{folder / 'campaign.toml'}: not a campaign file: {says}"


def test_campaign_toml_brackets_and_digits_in_texts_and_comments_are_text(tmp_path: Path) -> None:
    from clotho.formats.campaign import load_campaign

    folder = tmp_path / "campaign"
    folder.mkdir()
    brackets = "[" * 100
    (folder / "campaign.toml").write_text(
        f'title = "{brackets} {"1" * 200}"\n# {brackets}\n'
        f"[character]\ndescription = '''{brackets}\n{brackets}'''\n"
    )
    assert load_campaign(folder).title == f"{brackets} {'1' * 200}"
