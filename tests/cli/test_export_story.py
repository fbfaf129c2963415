"""`clotho export story FILE [--head NODE] [--format md|html]`, on SQLite and
PostgreSQL: the format chosen by the file's suffix or by --format, `-` for stdout, the
branch to another node, state notes, and a file or format it cannot use refused with a
line naming what was wrong (nothing written)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._fixtures import SERAPHINA

from .test_cli import InProcess, Run


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    return InProcess(database_url, tmp_path / "home")


@pytest.fixture
def story(run: Run) -> dict[str, str]:
    run.json("session", "new", "--title", "Night <watch>")
    greeting = run.json(
        "add", "assistant", "*Bram looks up.* Who goes there?", "--name", "Bram",
        "--delta", '[{"op":"set","path":"hp","value":10}]',
    )  # fmt: skip
    hello = run.json("add", "user", "A friend. 你好！", "--name", "Aria")
    run.json("add", "user", "(OOC: brb)", "--disabled")
    answer = run.json(
        "add", "assistant", "<script>alert(1)</script> Pass, friend.", "--name", "Bram",
        "--delta", '[{"op":"set","path":"hp","value":8}]',
    )  # fmt: skip
    return {"greeting": greeting["id"], "hello": hello["id"], "answer": answer["id"]}


def test_markdown_by_the_suffix(run: Run, story: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "book.md"
    assert run.json("export", "story", str(target)) == {
        "file": str(target),
        "format": "md",
        "messages": 3,
    }
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# Night \\<watch\\>\n")
    assert "**Bram**\n\n*Bram looks up.* Who goes there?" in text
    assert "**Aria**\n\nA friend. 你好！" in text
    assert "OOC" not in text


def test_html_by_the_suffix_or_the_option(run: Run, story: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "book.html"
    assert "Wrote the story (3 messages) to" in run("export", "story", str(target)).stdout
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Pass, friend." in page
    assert "<script" not in page
    other = tmp_path / "book.txt"
    run("export", "story", str(other), "--format", "html")
    assert other.read_text(encoding="utf-8") == page


def test_stdout_to_a_node_with_notes(run: Run, story: dict[str, str]) -> None:
    text = run("export", "story", "-", "--head", story["hello"], "--state-at", story["greeting"])
    assert "A friend." in text.stdout and "Pass, friend." not in text.stdout
    assert "> State: hp: — → 10" in text.stdout
    every = run("export", "story", "-", "--state-every", "1").stdout
    assert every.count("> State:") == 3 and "> State: hp: 10 → 8" in every
    page = run("export", "story", "-", "--format", "html").stdout
    assert page.startswith("<!DOCTYPE html>")


def test_what_it_cannot_use_is_refused(run: Run, story: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "book.pdf"
    assert "book.pdf: not .md or .html; say --format md or html" in run.fails(
        "export", "story", str(target)
    )
    assert "format 'pdf': a story is written as md or html" in run.fails(
        "export", "story", str(target), "--format", "pdf"
    )
    assert "not on the exported branch" in run.fails(
        "export", "story", str(tmp_path / "b.md"), "--head", story["hello"],
        "--state-at", story["answer"],
    )  # fmt: skip
    assert not target.exists() and not (tmp_path / "b.md").exists()


def test_the_casts_pictures(run: Run, story: dict[str, str], tmp_path: Path) -> None:
    run.json("cast", "add", str(SERAPHINA))
    run.json("add", "assistant", "*She smiles.*", "--name", "Seraphina")
    page = run("export", "story", "-", "--format", "html", "--pictures").stdout
    assert page.count('<img class="face" alt="" src="data:image/png;base64,') == 1
    assert "<img" not in run("export", "story", "-", "--format", "html").stdout
