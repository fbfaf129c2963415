"""Crash consistency: writers SIGKILLed at random moments leave a whole database.

Each test kills real writer processes on SQLite and on PostgreSQL: turns played by the
engine (a child of ``tests/crash/_writer.py``, wired as ``clotho say`` wires it, against
the scripted model server on loopback), batches of editor operations, and the real
``clotho say`` command. A kill lands after a random sleep, so it falls before, inside
or after a commit. After each one the database must pass ``_invariants.check_session``
(integrity, HEAD, whole nodes and traces, no turn without its reply, the journal), and
the session must be at the last commit the writer logged (then with exactly that tree:
nothing of a later transaction) or one version later (a commit whose log line the
kill cut off): docs/turns.md promises that a turn commits its player message, reply,
delta, trace and HEAD in one transaction, docs/editor.md the same of an edit batch.

The default suite kills a few writers per database; ``-m long`` (or ``CLOTHO_LONG=1``)
kills hundreds.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Store, schema_from_mapping
from orchestrator.loopback import ModelServer, Reply

from ._invariants import (
    TURN_MARK,
    Logged,
    check_session,
    tree_digest,
    undo_redo_round_trip,
    user_turns,
)

REPO = Path(__file__).resolve().parents[2]
CLOTHO = str(Path(sys.executable).parent / "clotho")
SCHEMA = {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
HIT = json.dumps({"operations": [{"op": "inc", "path": "hp", "value": -1}]})


def script(request: dict[str, Any]) -> Reply | str:
    """The game master: a delta for every extraction call, a reply of some words
    (streamed a little slowly, so kills land during the stream too) for the others."""
    if "response_format" in request:
        return HIT
    return Reply(" ".join(f"word{i}" for i in range(30)), chunk_delay=0.002)


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


def writer_env(model: ModelServer, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOTHO_")}
    env.update(
        {
            "CLOTHO_MODEL": "openai/gm",
            "CLOTHO_API_BASE": model.url,
            "CLOTHO_API_KEY": "x",
            "CLOTHO_VECTORS": "false",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_COLOR": "1",
            "HOME": str(home),
            "XDG_DATA_HOME": str(home / "data"),
        }
    )
    return env


@dataclass
class Zygote:
    """The writer process that forks one writer child per kill."""

    process: subprocess.Popen[str]
    stderr: Path

    def spawn(self, mode: str, url: str, session_id: str, log: Path, seed: int) -> int:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(f"{mode} {url} {session_id} {log} {seed}\n")
        stdin.flush()
        line = stdout.readline()
        assert line.strip().isdigit(), (line, self.stderr.read_text())
        return int(line)


@pytest.fixture(scope="module")
def zygote(model: ModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Zygote]:
    home = tmp_path_factory.mktemp("writer")
    errors = home / "stderr"
    with open(errors, "w") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.crash._writer"],
            cwd=REPO,
            env=writer_env(model, home),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    zygote = Zygote(process, errors)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().strip() == "ready", errors.read_text()
        yield zygote
    finally:
        process.kill()
        process.communicate()


def gone(pid: int, timeout: float = 10.0) -> None:
    """Until the killed child is reaped (the zygote ignores SIGCHLD: no zombies)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)
    raise AssertionError(f"writer {pid} still there {timeout} s after SIGKILL")


def logged(log: Path, timeout: float = 60.0) -> None:
    """Until the writer has logged a commit."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().strip():
            return
        time.sleep(0.01)
    raise AssertionError(f"the writer logged no commit in {timeout:.0f} s")


def logged_now(url: str, session_id: str) -> Logged:
    with Store.open(url) as store:
        dump = store.dump(session_id)
    return Logged(dump.session.version, user_turns(dump), tree_digest(dump))


def after_kill(url: str, session_id: str, log: Path, before: Logged, *, turns: bool) -> int:
    """Every invariant after one kill; returns the commits the writer made."""
    dump = check_session(url, session_id, turns=turns)
    last = Logged.last(str(log), before)
    version = dump.session.version
    if version == last.version:
        assert tree_digest(dump) == last.digest, "the session changed without its version"
        assert user_turns(dump) == last.users
    else:
        assert version == last.version + 1, (version, last)  # one commit not yet logged
        if turns:
            assert user_turns(dump) - last.users in (0, 1)
    return version - before.version


@dataclass
class Tally:
    kills: int = 0
    commits: int = 0
    kills_with_a_commit: int = 0

    def add(self, commits: int) -> None:
        self.kills += 1
        self.commits += commits
        self.kills_with_a_commit += commits > 0


def kill_writers(
    zygote: Zygote,
    url: str,
    session_id: str,
    mode: str,
    kills: int,
    window: tuple[float, float],
    logs: Path,
    rng: random.Random,
) -> Tally:
    """``kills`` writer children, each SIGKILLed after a random time within ``window``,
    the invariants checked after each."""
    tally = Tally()
    turns = mode == "turns"
    for n in range(kills):
        before = logged_now(url, session_id)
        log = logs / f"{mode}-{n}.log"
        pid = zygote.spawn(mode, url, session_id, log, rng.randrange(2**32))
        if n == kills - 1 and tally.commits == 0:
            # On a slow machine every kill so far may have come before the first commit:
            # the last one waits for a commit, so that a kill after commits is tested too.
            logged(log)
        time.sleep(rng.uniform(*window))
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            raise AssertionError(
                f"the writer died on its own: {zygote.stderr.read_text()}"
            ) from None
        gone(pid)
        tally.add(after_kill(url, session_id, log, before, turns=turns))
        if not turns:
            undo_redo_round_trip(url, session_id)
    return tally


def turn_session(url: str) -> str:
    with Store.open(url, migrate=True) as store:
        return store.create_session(title="crash", schema=schema_from_mapping(SCHEMA)).id


def edit_session(url: str, nodes: int = 40) -> str:
    """A session with a tree to edit: a trunk of alternating messages and some forks."""
    rng = random.Random(7)
    with Store.open(url, migrate=True) as store:
        session = store.create_session(title="edits", schema=schema_from_mapping(SCHEMA))
        ids: list[str] = []
        for i in range(nodes):
            if ids and rng.random() < 0.2:
                store.checkout(session.id, rng.choice(ids))
            role = "user" if i % 2 else "assistant"
            delta = [{"op": "inc", "path": "hp", "value": -1}] if role == "assistant" else None
            ids.append(store.append(session.id, role, f"message {i}", delta=delta)[0].id)
        return session.id


def run_turn_kills(zygote: Zygote, url: str, logs: Path, kills: int, seed: int) -> Tally:
    session_id = turn_session(url)
    tally = kill_writers(
        zygote, url, session_id, "turns", kills, (0.3, 2.0), logs, random.Random(seed)
    )
    return tally


def run_edit_kills(zygote: Zygote, url: str, logs: Path, kills: int, seed: int) -> Tally:
    session_id = edit_session(url)
    return kill_writers(
        zygote, url, session_id, "edits", kills, (0.05, 0.8), logs, random.Random(seed)
    )


def test_turns_killed_at_random_leave_whole_turns(
    zygote: Zygote, database_url: str, tmp_path: Path
) -> None:
    tally = run_turn_kills(zygote, database_url, tmp_path, kills=3, seed=1)
    assert tally.commits > 0, "no writer committed a turn before its kill: nothing was tested"


def test_edit_batches_killed_at_random_are_whole_or_absent(
    zygote: Zygote, database_url: str, tmp_path: Path
) -> None:
    tally = run_edit_kills(zygote, database_url, tmp_path, kills=4, seed=2)
    assert tally.commits > 0, "no writer committed a batch before its kill: nothing was tested"


def clotho_say_kills(
    model: ModelServer, url: str, home: Path, kills: int, rng: random.Random
) -> Tally:
    """The real command: ``clotho say`` killed anywhere from its start-up to its exit."""
    session_id = turn_session(url)
    env = writer_env(model, home) | {"CLOTHO_DATABASE_URL": url, "CLOTHO_SESSION": session_id}
    tally = Tally()
    finished = []
    for n in range(kills):
        before = logged_now(url, session_id)
        started = time.monotonic()
        with subprocess.Popen(
            [CLOTHO, "say", f"{TURN_MARK}{n}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        ) as process:
            # A full `clotho say` takes ~4-6 s here (litellm's import): kill anywhere in it.
            time.sleep(rng.uniform(0.2, 7.0))
            process.send_signal(signal.SIGKILL)
            _, err = process.communicate()
        if process.returncode == 0:
            finished.append(time.monotonic() - started)
        else:
            assert process.returncode == -signal.SIGKILL, err.decode(errors="replace")
        dump = check_session(url, session_id, turns=True)
        assert dump.session.version - before.version in (0, 1)
        assert user_turns(dump) - before.users == dump.session.version - before.version
        tally.add(dump.session.version - before.version)
    return tally


def test_clotho_say_killed_at_random_leaves_a_whole_database(
    model: ModelServer, database_url: str, tmp_path: Path
) -> None:
    clotho_say_kills(model, database_url, tmp_path / "home", kills=1, rng=random.Random(3))


@pytest.mark.long
def test_long_many_kills_of_every_writer(
    zygote: Zygote, model: ModelServer, database_url: str, tmp_path: Path
) -> None:
    """Hundreds of kills: turns (120), edit batches (120), `clotho say` (20)."""
    turns = run_turn_kills(zygote, database_url, tmp_path, kills=120, seed=11)
    edits = run_edit_kills(zygote, database_url, tmp_path, kills=120, seed=12)
    said = clotho_say_kills(model, database_url, tmp_path / "home", 20, random.Random(13))
    print(f"turns {turns}; edits {edits}; clotho say {said}")
    assert turns.kills_with_a_commit > 30 and edits.kills_with_a_commit > 30
    assert said.commits > 0
