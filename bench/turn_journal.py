"""What making a turn undoable costs its commit: a turn's nodes journaled (one entry,
undo sends them to the trash) against the breakpoint the seed design has (the journal
cleared), on the same store, in the same run.

Run from the repository root::

    .venv/bin/python bench/turn_journal.py            # stories of 200 and 2,000 turns
    .venv/bin/python bench/turn_journal.py --quick    # 50 and 200 turns

For each size, a session on SQLite grown to N turns (a player's message and a reply of
~600 characters each), then, alternately, 60 more turns committed each way:

- **journaled** -- ``with store.transaction(sid) as tx, tx.journaled("say")``: the two
  nodes, and the journal entry (the new top's images in the tree and in the trash, its
  parent's, a snapshot of the affected part every 15 entries; at most 50 kept).
- **breakpoint** -- the same two appends with no ``journaled``: the journal cleared.

Only the commit is timed (no model: the engine's turn commits exactly this). Then the
last 40 journaled turns are undone and redone one by one (timed too). Printed: median
and mean ms per commit each way, the difference, the undo/redo medians, and the
journal's bytes. Last line: ``turn_journal extra_ms=<median difference> undo_ms=<median>
at N turns`` for the largest N.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, select

from mnemosyne import Store
from mnemosyne._schema import journal

REPLY = ("The goblin circles you, blade low, and the torchlight shakes on the wet stone. " * 8)[
    :600
]
TIMED = 60
UNDONE = 40


def grow(store: Store, sid: str, turns: int) -> None:
    with store.transaction(sid) as tx:
        for i in range(turns):
            tx.append("user", f"I step forward ({i}).")
            tx.append("assistant", REPLY)


def commit(store: Store, sid: str, i: int, journaled: bool) -> float:
    start = time.perf_counter()
    with store.transaction(sid) as tx:
        if journaled:
            with tx.journaled("say"):
                tx.append("user", f"I attack ({i}).")
                tx.append("assistant", REPLY)
        else:
            tx.append("user", f"I attack ({i}).")
            tx.append("assistant", REPLY)
    return (time.perf_counter() - start) * 1000


def run(size: int, folder: Path) -> dict[str, float]:
    with Store.open(f"sqlite:///{folder / f'turns{size}.db'}") as store:
        sid = store.create_session(title="bench").id
        grow(store, sid, size)
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(TIMED):
            for journaled in (i % 2 == 0, i % 2 == 1):  # alternate which goes first
                times[journaled].append(commit(store, sid, i, journaled))
        for i in range(UNDONE):  # a journal of turns to undo
            commit(store, sid, TIMED + i, True)
        with store.read() as conn:
            size_bytes = conn.execute(select(func.sum(func.length(journal.c.payload)))).scalar()
        undo, redo = [], []
        for _ in range(UNDONE):
            start = time.perf_counter()
            store.undo(sid)
            undo.append((time.perf_counter() - start) * 1000)
        for _ in range(UNDONE):
            start = time.perf_counter()
            store.redo(sid)
            redo.append((time.perf_counter() - start) * 1000)
    out = {
        "journaled": statistics.median(times[True]),
        "breakpoint": statistics.median(times[False]),
        "journaled_mean": statistics.mean(times[True]),
        "breakpoint_mean": statistics.mean(times[False]),
        "undo": statistics.median(undo),
        "redo": statistics.median(redo),
        "journal_bytes": float(size_bytes or 0),
    }
    out["extra"] = out["journaled"] - out["breakpoint"]
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="stories of 50 and 200 turns")
    sizes = [50, 200] if parser.parse_args(argv).quick else [200, 2000]
    print(f"sizes={sizes} timed={TIMED} each way, undone={UNDONE} python={sys.version.split()[0]}")
    header = "turns   journaled ms  breakpoint ms  extra ms  (means)          undo ms  redo ms"
    print(header + "  journal KB")
    last: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="clotho-bench-") as folder:
        for size in sizes:
            last = run(size, Path(folder))
            print(
                f"{size:>5}   {last['journaled']:>12.2f}  {last['breakpoint']:>13.2f}  "
                f"{last['extra']:>8.2f}  ({last['journaled_mean']:.2f} / "
                f"{last['breakpoint_mean']:.2f})  {last['undo']:>7.2f}  {last['redo']:>7.2f}  "
                f"{last['journal_bytes'] / 1024:>10.1f}"
            )
    print(
        f"turn_journal extra_ms={last['extra']:.2f} undo_ms={last['undo']:.2f} at {sizes[-1]} turns"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
