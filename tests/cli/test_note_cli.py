"""`clotho note`: the author's note set from the command line, shown by `clotho state`,
rolled back by `checkout`, taken back by `undo`; a bad note is refused in one line."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from orchestrator.loopback import ModelServer

from .test_cli import InProcess, Run


@pytest.fixture
def run_sqlite(tmp_path: Path) -> Run:
    return InProcess(f"sqlite:///{tmp_path / 'cli.db'}", tmp_path / "home")


def test_note_is_state_at_head(run_sqlite: Run) -> None:
    run = run_sqlite
    run.json("session", "new", "--title", "Rain")
    first = run.json("add", "assistant", "The road is long.")
    run.json("add", "user", "I walk on.")
    run.json("note", "{{user}} is tired.", "--every", "2", "--depth", "1", "--role", "user")
    note = run.json("state")["author_note"]
    assert note == {
        "text": "{{user}} is tired.",
        "depth": 1,
        "position": "in_chat",
        "interval": 2,
        "role": "user",
    }
    shown = run("state").stdout
    assert "author note  {{user}} is tired.  (in the chat at depth 1, every 2" in shown
    assert run.json("state", first["id"])["author_note"] is None  # earlier: none
    run.json("undo")
    assert run.json("state")["author_note"] is None
    message = run.fails("note", "x", "--position", "top")
    assert "note.position" in message
    assert "--clear" in run("note", code=2).stderr


def test_the_trace_says_where_the_note_went(
    run_sqlite: Run, serve: Callable[..., ModelServer]
) -> None:
    run = run_sqlite
    server = serve(lambda request: "{}" if "response_format" in request else "The wind howls.")
    run.env.update({"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": server.url})
    run.json("session", "new")
    run.json("add", "assistant", "The pass is steep.")
    run.json("note", "Snow falls on {{user}}.", "--depth", "0")
    run("say", "I climb.")
    sent = next(r.messages for r in server.requests if "response_format" not in r.json)
    assert sent[-1] == {"role": "system", "content": "Snow falls on Player."}
    shown = run("trace").stdout
    assert "author's note: inserted in every prompt" in shown and "at depth 0" in shown
