"""``clotho log`` and ``clotho tree`` as a player runs them: ``--last``, the JSON
documents as they were, and the pager: used on a terminal (a real pseudo-terminal)
when the output is longer than the screen, never on a pipe, and never in the way (a
pager quit early, missing or failing)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest
from rich.cells import cell_len

from mnemosyne import NodeRecord, Store

from .terminal import Terminal
from .test_cli import CLOTHO, InProcess, Run

MESSAGES = 40
DISABLED = 5  # the number of the message stored disabled
INCOMPLETE = 38  # ...and of the reply cut short
SENTENCE = "The lantern gutters as you step into the hall of the drowned king. "


def _story(url: str) -> str:
    """A session of MESSAGES messages (about 100 KB of text, more than a pipe holds)
    and a side branch of two under the third; its id."""
    records = []
    for i in range(1, MESSAGES + 1):
        role = "user" if i % 2 else "assistant"
        records.append(
            NodeRecord(
                role=role,
                content=f"Message {i}. " + SENTENCE * 38,
                parent=len(records) - 1 if records else None,
                name="Seraphina" if role == "assistant" else None,
                enabled=i != DISABLED,
                metadata={"incomplete": True} if i == INCOMPLETE else None,
                active_child=len(records) + 1 if i < MESSAGES else None,
            )
        )
    records.append(NodeRecord(role="assistant", content="Another third", parent=1))
    records.append(NodeRecord(role="user", content="and a fourth", parent=len(records) - 1))
    with Store.open(url) as store:
        session = store.create_session(title="long")
        with store.transaction(session.id) as tx:
            tx.insert_nodes(records, head=MESSAGES - 1)
        return session.id


@pytest.fixture
def story(tmp_path: Path) -> Run:
    run = InProcess(f"sqlite:///{tmp_path / 'story.db'}", tmp_path / "home")
    run.env["CLOTHO_SESSION"] = _story(run.url)
    for variable in ("PAGER", "CLOTHO_PAGER", "LESS", "COLUMNS", "LINES"):
        run.env.pop(variable, None)
    return run


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def test_last_and_the_json_documents(story: Run, tmp_path: Path) -> None:
    # On a pipe the pager is never used, whatever the variables say.
    paged = tmp_path / "paged.txt"
    story.env["CLOTHO_PAGER"] = f"cat > {paged}"
    last = story("log", "--last", "3").stdout
    assert headers(last) == [
        f"#38 {headers_id(story, 38)} Seraphina (incomplete)",
        f"#39 {headers_id(story, 39)} user",
        f"#40 {headers_id(story, 40)} Seraphina (HEAD)",
    ]
    assert " ".join(last.split()).count(SENTENCE.strip()) == 3 * 38  # each once, whole
    whole = story("log").stdout
    assert len(headers(whole)) == MESSAGES  # the disabled one too, marked
    assert f"#{DISABLED} {headers_id(story, DISABLED)} user (disabled)" in headers(whole)
    assert not paged.exists()

    # The JSON: the projection as the model sees it (no disabled message), as before.
    log = story.json("log")
    assert len(log) == MESSAGES - 1 and all(n["enabled"] for n in log)
    assert set(log[0]) >= {"id", "parent_id", "role", "name", "content", "enabled", "delta"}
    assert story.json("log", "--last", "3") == log[-3:]
    tree = story.json("tree", "--depth", "2")
    assert set(tree) == {"session_id", "head_id", "version", "nodes"}
    assert len(tree["nodes"]) == MESSAGES + 2

    drawn = story("tree", "--last", "2").stdout.splitlines()
    assert drawn[0] == "⋮ 38 earlier messages above #39"
    assert [line[:5] for line in drawn[1:]] == ["* #39", "* #40"]
    story.fails("log", "--last", "0", code=2)


_IDS: dict[str, list[str]] = {}


def headers_id(run: Run, number: int) -> str:
    """The short id of message ``number`` on the path (disabled ones included)."""
    session = run.env["CLOTHO_SESSION"]
    if session not in _IDS:
        with Store.open(run.url) as store:
            _, turns = store.projection_turns(session, disabled=True)
        _IDS[session] = [t.node.id[:8] for t in turns]
    return _IDS[session][number - 1]


def on_terminal(env: Mapping[str, str], *args: str, rows: int = 10) -> tuple[int, str]:
    """``clotho ARGS`` on a pseudo-terminal of 80 x ``rows``: its exit code, and what it
    wrote there."""
    with Terminal(list(args), env, columns=80, rows=rows) as term:
        code = term.wait_exit(timeout=60)
        return code, term.raw().replace("\r\n", "\n")


def test_the_pager_on_a_terminal(story: Run, tmp_path: Path) -> None:
    paged, less = tmp_path / "paged.txt", tmp_path / "less.txt"
    story.env["CLOTHO_PAGER"] = f'echo "$LESS" > {less}; cat > {paged}'
    code, shown = on_terminal(story.env, "log")  # longer than the screen: through the pager
    assert code == 0 and shown.strip() == ""
    text = paged.read_text()
    assert len(headers(text)) == MESSAGES
    assert max(cell_len(line) for line in text.splitlines()) == 80  # the terminal's width
    assert less.read_text() == "FRX\n"  # less shows colours, and quits if it fits

    paged.unlink()
    code, shown = on_terminal(story.env, "tree", "--last", "3")  # fits the screen: printed
    assert code == 0 and len(headers_of_tree(shown)) == 3 and not paged.exists()
    code, shown = on_terminal(story.env, "log", "--no-pager")
    assert code == 0 and len(headers(shown)) == MESSAGES and not paged.exists()

    story.env["PAGER"] = f"cat > {tmp_path / 'not-this.txt'}"  # CLOTHO_PAGER first
    code, shown = on_terminal(story.env, "tree", "--all")
    assert code == 0 and shown.strip() == "" and "* #40" in paged.read_text()
    assert not (tmp_path / "not-this.txt").exists()


def headers_of_tree(shown: str) -> list[str]:
    return [line for line in shown.splitlines() if line.startswith("* #")]


@pytest.mark.parametrize(
    "pager",
    [
        "head -n 1 > /dev/null",  # quit before reading it all, as q in less
        "/nonexistent/pager",  # missing: the text is printed instead
        "false",  # failed: the same
    ],
)
def test_a_pager_quit_early_missing_or_failing_is_no_error(story: Run, pager: str) -> None:
    story.env["CLOTHO_PAGER"] = pager
    code, shown = on_terminal(story.env, "log")
    assert code == 0, shown
    assert "Traceback" not in shown and "BrokenPipe" not in shown
    if pager != "head -n 1 > /dev/null":
        assert len(headers(shown)) == MESSAGES  # nothing lost
    else:
        assert headers(shown) == []


def test_a_reader_that_stops_early_is_no_error(story: Run) -> None:
    # `clotho log | head -2`: the log is longer than a pipe holds; head closes it.
    reader = subprocess.Popen(
        [CLOTHO, "log"], env=story.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.read(100).startswith(b"#1 ")
    reader.stdout.close()
    with reader.stderr:
        assert reader.wait(timeout=60) == 0
        assert reader.stderr.read() == b""
