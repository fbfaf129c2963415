"""Clotho's conversation store against a LangGraph chat app, on the same work.

Run from the repository root::

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/tree_vs_langgraph.py

(``--quick`` for a smoke run of a few seconds: 50 and 200 turns, depth 1,000.)

The work: one chat of N turns, each turn one user message (~300 characters) and one
assistant message (~600 characters). The texts are generated once, before anything
is timed, from a seeded word list with the turn number in them, so that no two
messages are alike; both sides store exactly the same texts.

- **peer** -- a LangGraph ``StateGraph(MessagesState)`` (``add_messages`` reducer)
  compiled with the SQLite checkpointer of ``langgraph-checkpoint-sqlite``
  (``SqliteSaver(sqlite3.connect(path, check_same_thread=False))``, as its
  documentation shows). Its one node returns the canned assistant message (no model
  call). A turn is one ``graph.invoke({"messages": [HumanMessage(user)]}, config)``.
- **ours** -- a Clotho session in a SQLite file opened with ``mnemosyne.Store``; a
  turn is two ``store.append`` calls (user, then assistant), each its own
  transaction.

One continuous chat runs on each side up to the largest ``--turns``; at each value of
``--turns`` the bench reports, per side:

- ``bytes/turn``: the database's size divided by the number of turns. The size is the
  main file plus its ``-wal`` file, measured after ``PRAGMA wal_checkpoint(TRUNCATE)``
  (so the WAL is empty and the figure is the database itself); ``-shm`` (an index
  of the WAL, not data) is not counted. The same is done on both sides.
- ``ms/turn``: mean wall time (``time.perf_counter``) of a turn over the whole run
  so far, and over the last 100 turns.
- ``load ms``: the time to load what the model would see at HEAD -- LangGraph's
  ``graph.get_state(config)`` (its state: the message objects); our
  ``store.messages(session_id)`` (id, role, name and text of each message on the
  path, what the prompt is built from) -- median of 5. The notes give our
  ``store.projection`` too: whole nodes, with metadata, delta and times.
  Both are checked to return all 2N messages, the last one the expected text.

Then a deep test of our side alone, in a separate file: a session grown to
``--depth`` nodes (set-up in batched transactions), our projection at that depth
(median of 5), and single appends (one transaction each, median of 50) at depth 100
and at ``--depth``.

Fairness: both databases are SQLite files in WAL mode in the same temporary
directory. Clotho runs with ``synchronous=NORMAL``; by default the peer's connection
gets the same setting (``--peer-synchronous FULL`` keeps SQLite's default, which is
what the peer uses if nobody sets it). Our side runs first, then the peer. The
checkpoint-history API of LangGraph (``get_state_history``) is never called: it
loads every checkpoint into memory.

The last line is ``ratio storage=<peer/ours> append=<peer/ours> load=<peer/ours> at N
turns`` for the largest N (ms per turn over the whole run; load at N).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from _texts import line

from mnemosyne import Store

THREAD_ID = "bench"
LOAD_REPEATS = 5
APPEND_SAMPLES = 50
SHALLOW_DEPTH = 100
GROW_BATCH = 500
SEED = 20_260_501

T = TypeVar("T")

#: Targets from the issue: peer/ours ratios at the largest turn count...
TARGET_STORAGE = 1_000.0
TARGET_LOAD = 4.0
TARGET_APPEND = 20.0
#: ... and our deep figures.
TARGET_DEEP_PROJECTION_MS = 50.0
TARGET_DEEP_APPEND_RATIO = 1.5

# --- the texts -------------------------------------------------------------------------


def make_turns(count: int) -> list[tuple[str, str]]:
    """``count`` (user, assistant) pairs: ~300 and ~600 characters, all different."""
    rng = random.Random(SEED)
    return [
        (
            line(rng, f"[turn {i}] I", 300),
            line(rng, f"[turn {i}] The narrator:", 600),
        )
        for i in range(count)
    ]


# --- measuring ---------------------------------------------------------------------------


def file_bytes(path: Path) -> int:
    """The main file plus its ``-wal`` (``-shm`` is not data and is not counted)."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def checkpoint_wal(conn: sqlite3.Connection, label: str) -> None:
    """Move the WAL into the main file and truncate it, so the file is the database."""
    busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        print(f"warning: {label}: wal_checkpoint(TRUNCATE) was blocked", file=sys.stderr)


def median_ms(call: Callable[[], T], repeats: int) -> tuple[float, T]:
    """The median wall time of ``repeats`` calls in ms, and the last call's result."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


@dataclass
class Report:
    """One side's figures at one turn count."""

    side: str
    turns: int
    db_bytes: int
    mean_ms: float
    last100_ms: float
    load_ms: float
    note: str = ""

    @property
    def bytes_per_turn(self) -> float:
        return self.db_bytes / self.turns


class Side:
    """One implementation of a chat: a turn, its database file, a load at HEAD."""

    name = ""
    path: Path

    def turn(self, user: str, assistant: str) -> None:
        raise NotImplementedError

    def settle(self) -> None:
        """Checkpoint the WAL (not timed), before the file is measured."""
        raise NotImplementedError

    def load(self) -> tuple[int, str]:
        """Load the messages at HEAD; their number and the last one's text."""
        raise NotImplementedError

    def note(self) -> str:
        return ""

    def close(self) -> None:
        raise NotImplementedError


class Ours(Side):
    """A Clotho session: two ``store.append`` per turn, one transaction each."""

    name = "clotho"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = Store.open(f"sqlite:///{path}")
        self.session = self.store.create_session(title="bench")

    def turn(self, user: str, assistant: str) -> None:
        store, sid = self.store, self.session.id
        _, session = store.append(sid, "user", user, expected_version=self.session.version)
        _, self.session = store.append(
            sid, "assistant", assistant, expected_version=session.version
        )

    def settle(self) -> None:
        raw = self.store.engine.raw_connection()
        try:
            checkpoint_wal(raw.driver_connection, self.name)
        finally:
            raw.close()

    def load(self) -> tuple[int, str]:
        messages = self.store.messages(self.session.id)
        return len(messages), messages[-1].content

    def note(self) -> str:
        ms, nodes = median_ms(lambda: self.store.projection(self.session.id), LOAD_REPEATS)
        return f"whole-node projection {ms:.2f} ms ({len(nodes)} nodes)"

    def close(self) -> None:
        self.store.close()


class Peer(Side):
    """A LangGraph chat app: ``MessagesState`` + ``SqliteSaver``, one invoke per turn."""

    name = "langgraph"

    def __init__(self, path: Path, turns: Sequence[tuple[str, str]], synchronous: str) -> None:
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.path = path
        self.conn = sqlite3.connect(str(path), check_same_thread=False)
        self.saver = SqliteSaver(self.conn)
        self.saver.setup()  # creates the tables and switches the file to WAL
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")

        def respond(state: MessagesState) -> dict[str, Any]:
            # The canned reply of this turn: the state holds 2i + 1 messages at turn i.
            return {"messages": [AIMessage(content=turns[len(state["messages"]) // 2][1])]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        builder.add_edge("respond", END)
        self.graph = builder.compile(checkpointer=self.saver)
        self.config: Any = {"configurable": {"thread_id": THREAD_ID}}
        self._human = HumanMessage

    def turn(self, user: str, assistant: str) -> None:
        self.graph.invoke({"messages": [self._human(content=user)]}, self.config)

    def settle(self) -> None:
        with self.saver.lock:
            checkpoint_wal(self.conn, self.name)

    def load(self) -> tuple[int, str]:
        messages = self.graph.get_state(self.config).values["messages"]
        return len(messages), messages[-1].content

    def note(self) -> str:
        with self.saver.lock:
            checkpoints = self.conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
            writes = self.conn.execute("SELECT count(*) FROM writes").fetchone()[0]
        return f"checkpoints={checkpoints} writes={writes}"

    def close(self) -> None:
        self.conn.close()


def run_side(
    side: Side, turns: Sequence[tuple[str, str]], report_at: Sequence[int]
) -> list[Report]:
    """One continuous chat up to ``max(report_at)``; a report at each of ``report_at``."""
    times: list[float] = []
    reports = []
    for stop in report_at:
        for user, assistant in turns[len(times) : stop]:
            start = time.perf_counter()
            side.turn(user, assistant)
            times.append(time.perf_counter() - start)
        side.settle()
        size = file_bytes(side.path)
        load_ms, (count, last) = median_ms(side.load, LOAD_REPEATS)
        if count != 2 * stop or last != turns[stop - 1][1]:
            raise SystemExit(f"{side.name}: loaded {count} messages at {stop} turns, wrong")
        report = Report(
            side=side.name,
            turns=stop,
            db_bytes=size,
            mean_ms=statistics.fmean(times) * 1000,
            last100_ms=statistics.fmean(times[-100:]) * 1000,
            load_ms=load_ms,
            note=side.note(),
        )
        reports.append(report)
        print(
            f"  {side.name} {stop} turns: {report.bytes_per_turn:,.0f} B/turn, "
            f"{report.mean_ms:.2f} ms/turn, load {report.load_ms:.2f} ms {report.note}",
            flush=True,
        )
    return reports


# --- the deep test ---------------------------------------------------------------------------


def deep_test(path: Path, depth: int, turns: Sequence[tuple[str, str]]) -> dict[str, float]:
    """Our projection at ``depth`` and single appends at depth 100 and at ``depth``."""

    def text(i: int) -> tuple[str, str]:
        user, assistant = turns[(i // 2) % len(turns)]
        return ("user", user) if i % 2 == 0 else ("assistant", assistant)

    with Store.open(f"sqlite:///{path}") as store:
        sid = store.create_session(title="deep").id
        grown = 0

        def grow(target: int) -> None:
            nonlocal grown
            while grown < target:
                with store.transaction(sid) as tx:
                    for i in range(grown, min(target, grown + GROW_BATCH)):
                        tx.append(*text(i))
                grown = min(target, grown + GROW_BATCH)

        def appends() -> float:
            nonlocal grown
            times = []
            for _ in range(APPEND_SAMPLES):
                role, content = text(grown)
                start = time.perf_counter()
                store.append(sid, role, content)
                times.append(time.perf_counter() - start)
                grown += 1
            return statistics.median(times) * 1000

        grow(SHALLOW_DEPTH)
        shallow = appends()
        grow(depth)
        projection_ms, nodes = median_ms(lambda: store.projection(sid), LOAD_REPEATS)
        if len(nodes) != depth:
            raise SystemExit(f"deep projection returned {len(nodes)} nodes, not {depth}")
        messages_ms, messages = median_ms(lambda: store.messages(sid), LOAD_REPEATS)
        if len(messages) != depth:
            raise SystemExit(f"deep messages returned {len(messages)}, not {depth}")
        deep = appends()
    return {
        "projection_ms": projection_ms,
        "messages_ms": messages_ms,
        "shallow_ms": shallow,
        "deep_ms": deep,
    }


# --- output --------------------------------------------------------------------------------


def print_table(ours: Report, peer: Report) -> None:
    print(f"\n== {ours.turns} turns ==")
    print(
        f"{'side':<10} {'db bytes':>15} {'bytes/turn':>12} {'ms/turn':>9} "
        f"{'last 100':>9} {'load ms':>9}  notes"
    )
    for r in (peer, ours):
        print(
            f"{r.side:<10} {r.db_bytes:>15,} {r.bytes_per_turn:>12,.0f} {r.mean_ms:>9.2f} "
            f"{r.last100_ms:>9.2f} {r.load_ms:>9.2f}  {r.note}"
        )
    print(
        f"{'peer/ours':<10} {peer.db_bytes / ours.db_bytes:>15,.1f} {'':>12} "
        f"{peer.mean_ms / ours.mean_ms:>9.1f} {peer.last100_ms / ours.last100_ms:>9.1f} "
        f"{peer.load_ms / ours.load_ms:>9.1f}"
    )


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--turns", type=int, nargs="+", help="turn counts to report at (default 500 2000)"
    )
    parser.add_argument("--depth", type=int, help="depth of the deep test (default 10000)")
    parser.add_argument("--quick", action="store_true", help="smoke run: turns 50 200, depth 1000")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the temporary databases go (default: the system temp directory)",
    )
    parser.add_argument(
        "--peer-synchronous",
        choices=("NORMAL", "FULL"),
        default="NORMAL",
        help="PRAGMA synchronous of the peer's connection (ours is NORMAL)",
    )
    args = parser.parse_args(argv)
    args.turns = sorted(set(args.turns or ([50, 200] if args.quick else [500, 2000])))
    args.depth = args.depth or (1_000 if args.quick else 10_000)
    if args.turns[0] < 1 or args.depth <= SHALLOW_DEPTH + APPEND_SAMPLES:
        parser.error(f"turns must be positive and depth above {SHALLOW_DEPTH + APPEND_SAMPLES}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        versions = {p: metadata.version(p) for p in ("langgraph", "langgraph-checkpoint-sqlite")}
    except metadata.PackageNotFoundError:
        print("LangGraph is missing: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 2
    most = args.turns[-1]
    # The peer's file grows with the square of the turns: ~2 KB x turns^2 with these texts.
    need = 2_500 * most * most + (1 << 30)
    free = shutil.disk_usage(args.dir).free
    if free < need:
        print(f"{args.dir} has {free / 1e9:.1f} GB free, the run needs ~{need / 1e9:.1f} GB")
        return 2
    print(
        f"turns={args.turns} depth={args.depth} python={sys.version.split()[0]} "
        f"sqlite={sqlite3.sqlite_version} "
        + " ".join(f"{k}={v}" for k, v in versions.items())
        + f" peer synchronous={args.peer_synchronous} (ours NORMAL)",
        flush=True,
    )
    print("db bytes = main file + -wal after wal_checkpoint(TRUNCATE); -shm not counted")
    turns = make_turns(most)
    with tempfile.TemporaryDirectory(prefix="clotho-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"files in {directory} (deleted at the end)", flush=True)

        ours_side = Ours(directory / "clotho.db")
        try:
            ours = run_side(ours_side, turns, args.turns)
        finally:
            ours_side.close()
        deep = deep_test(directory / "deep.db", args.depth, turns)
        print(f"  clotho deep test done at depth {args.depth}", flush=True)

        peer_side = Peer(directory / "langgraph.db", turns, args.peer_synchronous)
        try:
            peer = run_side(peer_side, turns, args.turns)
        finally:
            peer_side.close()
        for name in sorted(os.listdir(directory)):
            print(f"  {name}: {(directory / name).stat().st_size:,} bytes on disk at the end")

    for o, p in zip(ours, peer, strict=True):
        print_table(o, p)

    deep_ratio = deep["deep_ms"] / deep["shallow_ms"]
    print(
        f"\ndeep projection_ms={deep['projection_ms']:.2f} messages_ms={deep['messages_ms']:.2f} "
        f"append_ms@{SHALLOW_DEPTH}={deep['shallow_ms']:.2f} "
        f"append_ms@{args.depth}={deep['deep_ms']:.2f} ratio={deep_ratio:.2f}"
    )
    o, p = ours[-1], peer[-1]
    storage = p.bytes_per_turn / o.bytes_per_turn
    append = p.mean_ms / o.mean_ms
    load = p.load_ms / o.load_ms
    print(
        f"targets: storage {storage:.1f} >= {TARGET_STORAGE:g} "
        f"{verdict(storage >= TARGET_STORAGE)}; "
        f"load {load:.1f} >= {TARGET_LOAD:g} {verdict(load >= TARGET_LOAD)}; "
        f"append {append:.1f} >= {TARGET_APPEND:g} {verdict(append >= TARGET_APPEND)}; "
        f"deep projection {deep['projection_ms']:.1f} ms < {TARGET_DEEP_PROJECTION_MS:g} "
        f"{verdict(deep['projection_ms'] < TARGET_DEEP_PROJECTION_MS)}; "
        f"deep append ratio {deep_ratio:.2f} <= {TARGET_DEEP_APPEND_RATIO:g} "
        f"{verdict(deep_ratio <= TARGET_DEEP_APPEND_RATIO)}"
    )
    print(f"ratio storage={storage:.1f} append={append:.1f} load={load:.1f} at {o.turns} turns")
    return 0


if __name__ == "__main__":
    sys.exit(main())
