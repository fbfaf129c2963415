"""``clotho tag``, ``clotho branch``, ``clotho tags`` as a player runs them, on SQLite and
PostgreSQL: names taken by checkout, log and show; marked in the log and the tree;
refusals on one line, nothing stored; undo takes a change back."""

from __future__ import annotations

from pathlib import Path

import pytest

from .test_cli import InProcess, Run


@pytest.fixture
def run(database_url: str, tmp_path: Path) -> Run:
    return InProcess(database_url, tmp_path / "home")


def test_tags_and_branches_from_the_command_line(run: Run) -> None:
    run("session", "new", "--title", "Names")
    ids = [
        run.json("add", role, text)["id"]
        for role, text in [
            ("user", "Hello there."),
            ("assistant", "Well met."),
            ("user", "Who are you?"),
            ("assistant", "I am Seraphina."),
        ]
    ]
    made = run.json("tag", "HEAD~2", "first-meeting")
    assert (made["action"], made["node_id"]) == ("tag", ids[1])
    run("branch", "main")
    names = run.json("tags")
    assert [(n["name"], n["kind"], n["node_id"], n["at_head"]) for n in names] == [
        ("first-meeting", "tag", ids[1], False),
        ("main", "branch", ids[3], True),
    ]
    assert names[0]["text"] == "Well met." and names[0]["place"] == "tree"
    assert [n["name"] for n in run.json("branch")] == ["main"]
    assert [n["name"] for n in run.json("tag")] == ["first-meeting"]

    # names wherever a node is taken
    assert run.json("checkout", "first-meeting")["id"] == ids[1]
    assert run.json("show", "first-meeting~1")["id"] == ids[0]
    run("add", "user", "I walk away.")
    run("checkout", "main")
    log = run("log").stdout
    assert "#2 " + ids[1][:8] + " assistant (tag: first-meeting)" in log
    assert "(HEAD) (main)" in log
    tree = run("tree").stdout
    assert "(tag: first-meeting)" in tree and "(HEAD) (main)" in tree

    # refusals: one line, nothing stored
    version = run.json("session", "list")[0]["version"]
    assert "'cafe' cannot be a tag or branch name: it is all hex" in run.fails("tag", "@", "cafe")
    assert "tag 'first-meeting' exists already" in run.fails("tag", "@", "first-meeting")
    assert "no branch named 'first-meeting'" in run.fails("branch", "-d", "first-meeting")
    assert "no branch named 'first-meeting'" in run.fails("branch", "-m", "first-meeting", "x")
    assert "no tag named 'main'" in run.fails("tag", "-m", "main", "trunk")
    assert "has no tag or branch named 'nowhere'" in run.fails("checkout", "nowhere")
    assert "give the node and the tag's name" in run.fails("tag", "HEAD")
    assert run.json("session", "list")[0]["version"] == version

    # rename, move, delete; each one undo step
    run("branch", "-m", "main", "seraphina")
    run("branch", "-f", "seraphina", "HEAD~1")
    run("tag", "-d", "first-meeting")
    assert [(n["name"], n["node_id"]) for n in run.json("tags")] == [("seraphina", ids[2])]
    run("undo")
    run("undo")
    assert [(n["name"], n["node_id"]) for n in run.json("tags")] == [
        ("first-meeting", ids[1]),
        ("seraphina", ids[3]),
    ]


def test_a_tag_list_prints_no_escape_sequence(run: Run) -> None:
    run("session", "new", "--title", "Escapes")
    run("add", "user", "\x1b]0;pwned\x07Hello\x1b[2J there.")
    run("tag", "@", "hello")
    listed = run("tags").stdout
    assert "\x1b" not in listed and "\x07" not in listed
    assert "Hello there." in listed
