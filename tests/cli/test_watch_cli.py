"""``clotho watch``: a session's changes printed as another process commits them (a real
``clotho`` process, on SQLite and on PostgreSQL)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Store
from mnemosyne.edits import Rewrite


class Watching:
    """``clotho --db URL watch ARGS`` in a process of its own; its stdout line by line."""

    def __init__(self, url: str, tmp_path: Path, *args: str) -> None:
        env = {
            **os.environ,
            "HOME": str(tmp_path / "home"),
            "XDG_DATA_HOME": str(tmp_path / "home" / "data"),
            "NO_COLOR": "1",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "clotho", "--db", url, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = 20.0) -> str:
        found = self.lines.get(timeout=timeout)
        assert found is not None, self.process.stderr.read() if self.process.stderr else ""
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        for pipe in (self.process.stdout, self.process.stderr):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[Any]:
    started: list[Watching] = []

    def start(url: str, *args: str) -> Watching:
        started.append(Watching(url, tmp_path, *args))
        return started[-1]

    yield start
    for each in started:
        each.stop()


def test_watch_prints_a_write_from_another_process(
    store: Store, database_url: str, watching: Any
) -> None:
    sid = store.create_session(title="live").id
    first, session = store.append(sid, "user", "hello")
    since = str(session.version)  # a process slow to start still prints all three
    watcher = watching(database_url, "--json", "watch", sid, "--since", since, "--count", "3")
    time.sleep(1.5)  # usually written once the watcher waits: the live path
    store.append(sid, "assistant", "hi")
    store.edit(sid, Rewrite(node_id=first.id, content="hello there"))
    store.update_session(sid, title="renamed")
    got = [json.loads(watcher.line()) for _ in range(3)]
    assert [(g["event"], g["version"], g["kind"]) for g in got] == [
        ("change", 2, "grow"),
        ("change", 3, "edit"),
        ("change", 4, "session"),
    ]
    assert got[1]["action"] == "rewrite" and got[1]["changed"] == [first.id]
    assert got[2]["title"] == "renamed"
    assert watcher.process.wait(20) == 0  # --count: it stops by itself


def test_watch_since_prints_what_came_since_then_goes_on(
    store: Store, database_url: str, watching: Any
) -> None:
    sid = store.create_session().id
    for i in range(3):
        store.append(sid, "user", f"line {i}")
    watcher = watching(database_url, "watch", sid[:8], "--since", "1", "--count", "3")
    assert watcher.line().startswith(f"watching {sid[:8]}")
    assert watcher.line().startswith("v2  grow  +1  HEAD ")
    assert watcher.line().startswith("v3  grow  +1  HEAD ")
    store.checkout(sid, store.projection(sid)[0].id)
    assert watcher.line() == f"v4  head  HEAD {store.projection(sid)[0].id[:8]}"
    assert watcher.process.wait(20) == 0


def test_watch_since_a_version_the_log_does_not_have_says_reset(
    store: Store, database_url: str, watching: Any
) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "hello")
    watcher = watching(database_url, "--json", "watch", sid, "--since", "7", "--count", "1")
    assert json.loads(watcher.line()) == {"event": "reset", "session_id": sid, "version": 1}
    store.append(sid, "user", "more")
    assert json.loads(watcher.line())["version"] == 2


def test_ctrl_c_stops_it_cleanly(store: Store, database_url: str, watching: Any) -> None:
    sid = store.create_session().id
    watcher = watching(database_url, "watch", sid)
    assert watcher.line().startswith("watching ")
    watcher.process.send_signal(signal.SIGINT)
    assert watcher.process.wait(20) == 0
