"""``clotho grep``: search every branch from the command line (in this process, SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clotho.cli.search import hit_line
from mnemosyne import Store

from .test_cli import InProcess


@pytest.fixture
def clotho(tmp_path: Path) -> InProcess:
    return InProcess.on_sqlite(tmp_path)


def _story(clotho: InProcess) -> dict[str, str]:
    """A session chosen as the current one: a trunk and a side branch; and another."""
    url = clotho.env["CLOTHO_DATABASE_URL"]
    with Store.open(url) as store:
        sid = store.create_session(title="Lighthouse").id
        store.append(sid, "user", "We climb to the lantern room.")
        trunk, _ = store.append(sid, "assistant", "The keeper trims the wick.", name="Mira")
        side, _ = store.add_sibling(sid, trunk.id, "A wyvern\nperches on the rail.", name="Mira")
        store.checkout(sid, trunk.id)
        other = store.create_session(title="Elsewhere").id
        store.append(other, "user", "A wyvern in another story.")
    clotho("session", "use", sid)
    return {"sid": sid, "trunk": trunk.id, "side": side.id, "other": other}


def test_grep_finds_a_side_branch_and_says_where(clotho: InProcess) -> None:
    ids = _story(clotho)
    lines = clotho("grep", "wyvern").stdout.splitlines()
    assert len(lines) == 1  # the other session is not searched
    assert lines[0].startswith(ids["side"][:8])
    assert "Mira" in lines[0] and "branch" in lines[0]
    assert "A wyvern perches on the rail." in lines[0]  # on one line
    [trunk] = clotho("grep", "keeper").stdout.splitlines()
    assert trunk.startswith(ids["trunk"][:8]) and "trunk" in trunk


def test_grep_json_lists_the_hits(clotho: InProcess) -> None:
    ids = _story(clotho)
    hits = clotho.json("grep", "wyvern", "--all-sessions")
    assert [h["session_id"] for h in hits] == [ids["other"], ids["sid"]]  # newest first
    assert hits[1]["node_id"] == ids["side"]
    assert hits[1]["on_trunk"] is False and hits[1]["enabled"] is True
    start, end = hits[1]["matches"][0]
    assert hits[1]["snippet"][start:end] == "wyvern"
    [only] = clotho.json("grep", "wyvern", "--all-sessions", "--role", "assistant")
    assert only["node_id"] == ids["side"]


def test_grep_with_no_match_and_bad_input(clotho: InProcess) -> None:
    _story(clotho)
    assert clotho("grep", "kraken").stdout.strip() == "no match"
    assert clotho.json("grep", '"NEAR* -x') == []
    assert "role" in clotho.fails("grep", "wyvern", "--role", "narrator")
    assert "200" in clotho.fails("grep", "x" * 201)


def test_a_hit_line_bolds_the_words_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime

    from clotho.cli import style
    from mnemosyne import SearchHit

    monkeypatch.setattr(style, "COLOR", True)
    hit = SearchHit("ab" * 16, "cd" * 16, "assistant", None, "a wyvern!", ((2, 8),), False,
                    False, datetime.now(UTC))  # fmt: skip
    line = hit_line(hit, width=None, with_session=True)
    assert "\x1b[1mwyvern\x1b[0m" in line
    assert "disabled" in line and "assistant" in line and "[cdcdcdcd]" in line


def test_grep_filters_by_trunk_subtree_and_time(clotho: InProcess) -> None:
    ids = _story(clotho)
    assert clotho.json("grep", "wyvern", "--trunk") == []  # only on a side branch
    [trunk] = clotho.json("grep", "keeper", "--trunk")
    assert trunk["node_id"] == ids["trunk"]
    [side] = clotho.json("grep", "wyvern", "--under", ids["side"][:8])
    assert side["node_id"] == ids["side"]
    assert clotho.json("grep", "wyvern", "--under", ids["trunk"]) == []
    assert len(clotho.json("grep", "the", "--since", "1h")) == 3
    assert clotho.json("grep", "the", "--until", "1h") == []
    assert clotho.json("grep", "the", "--since", "2999-01-01") == []
    assert len(clotho.json("grep", "the", "--until", "2999-01-01")) == 3
    assert "ISO date" in clotho.fails("grep", "the", "--since", "yesterday")
    assert "--all-sessions" in clotho.fails("grep", "the", "--all-sessions", "--under", "HEAD")
    assert "after" in clotho.fails("grep", "the", "--since", "1h", "--until", "2h")
    assert "UTF-8" in clotho.fails("grep", "\udcff")  # clotho grep $'\\xff'


@pytest.mark.parametrize(
    ("option", "value"),
    [("--since", "999999w"), ("--until", "9999-12-31"), ("--since", "0001-01-01T00:00+05:00")],
)
def test_grep_refuses_a_moment_out_of_range_by_name(
    clotho: InProcess, option: str, value: str
) -> None:
    _story(clotho)
    line = clotho.fails("grep", "the", option, value)
    assert option in line and "out of range" in line


def test_a_clipped_hit_line_bolds_the_words_it_keeps_not_the_ellipsis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from datetime import UTC, datetime

    from clotho.cli import style
    from mnemosyne import SearchHit

    monkeypatch.setattr(style, "COLOR", True)
    text = "x" * 30 + " wyvern and more"
    hit = SearchHit("ab" * 16, "cd" * 16, "user", None, text, ((31, 37),), True, True,
                    datetime.now(UTC))  # fmt: skip
    lead = len("abababab  user  trunk  ")
    line = hit_line(hit, width=lead + 37, with_session=False)  # the cut: "wyver…"
    assert line.endswith("\x1b[1mwyver\x1b[0m…")
    line = hit_line(hit, width=lead + 34, with_session=False)  # the cut: "wy…"
    assert line.endswith("\x1b[1mwy\x1b[0m…")


def test_a_hit_line_prints_no_control_character_and_keeps_its_offsets() -> None:
    from datetime import UTC, datetime

    from mnemosyne import SearchHit

    text = "\x1b]0;pwned\x07\x1b[2J a wyvern\x7f\x9b!"
    start = text.index("wyvern")
    hit = SearchHit("ab" * 16, "cd" * 16, "user", None, text, ((start, start + 6),), True,
                    True, datetime.now(UTC))  # fmt: skip
    line = hit_line(hit, width=None, with_session=False)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line)
    assert line.endswith(" ]0;pwned  [2J a wyvern  !")  # one space for one control
