"""Undo/redo of tree edits: our journal against a deep copy of the session per entry.

Run from the repository root::

    .venv/bin/python bench/undo.py            # sessions of 500 and 5,000 nodes
    .venv/bin/python bench/undo.py --quick    # 200 and 500 nodes

The work, for each size: a session of N nodes (a chain with an alternative every 10
nodes) on SQLite, then 200 mixed edits (rewrite, toggle, inject, prune + graft back,
move, copy of a short branch, delete + restore) drawn from a seeded generator, then
undo of everything the journal holds, then redo of it all. An edit's time is its
``Store.edit`` calls (prune + graft back, delete + restore count as one step of two
edits); reading the ids to pick from is not timed.

- **ours** -- ``Store.edit`` / ``undo`` / ``redo``: journal entries hold the before
  and after rows of what an edit touched (plus a snapshot of the affected part now
  and then), at most 50 entries.
- **peer** -- the naive design the seed warns against, run in the same process on
  the same operations in a session of its own: after every edit, a deep copy of all
  the session's node rows is kept as the journal entry (at most 50, as ours); undo
  writes the previous copy back (every row of the session), redo the next one.

Printed per side: mean ms per edit, undo and redo, and the journal's bytes (ours: the
JSON payloads in the journal table; the peer's: its copies as JSON). Last line:
``ratio undo=<peer ms / ours> journal_bytes=<peer bytes / ours> at N nodes`` for the
largest N.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete, func, insert, select, update

from mnemosyne import InvalidOperationError, Store
from mnemosyne import _queries as q
from mnemosyne._schema import journal, nodes, sessions
from mnemosyne.edits import Copy, Delete, Graft, Inject, Move, Prune, Restore, Rewrite, Toggle

EDITS = 200
LIMIT = 50
TARGET_MS, TARGET_BYTES, TARGET_UNDO = 20.0, 20.0, 2.0


def build(store: Store, size: int) -> str:
    sid = store.create_session(title=f"bench {size}").id
    with store.transaction(sid) as tx:
        made = []
        for i in range(size):
            if i % 10 == 9 and made:
                node = tx.add_sibling(made[-1].id, f"alternative {i} " * 8)
            else:
                node = tx.append("user" if i % 2 else "assistant", f"message {i} " * 8)
            made.append(node)
    return sid


def plan(seed: int, count: int) -> list[tuple[str, float, float]]:
    rng = random.Random(seed)
    kinds = ["rewrite", "toggle", "inject", "prune", "move", "copy", "delete"]
    return [(rng.choice(kinds), rng.random(), rng.random()) for _ in range(count)]


def node_ids(store: Store, sid: str) -> list[str]:
    return [n.id for n in store.tree(sid).nodes]


def apply_edit(store: Store, sid: str, ids: list[str], kind: str, a: float, b: float) -> None:
    node, target = ids[int(a * len(ids))], ids[int(b * len(ids))]
    try:
        if kind == "rewrite":
            store.edit(sid, Rewrite(node_id=node, content=f"rewritten {a:.5f}"))
        elif kind == "toggle":
            store.edit(sid, Toggle(node_id=node))
        elif kind == "inject":
            store.edit(sid, Inject(parent_id=node, role="system", content="an injected note"))
        elif kind == "prune":
            store.edit(sid, Prune(node_id=node))
            store.edit(sid, Graft(node_id=node, parent_id=ids[0] if node != ids[0] else target))
        elif kind == "move":
            store.edit(sid, Move(node_id=node, parent_id=target))
        elif kind == "copy":
            leafish = ids[-1 - int(a * min(5, len(ids) - 1))]
            store.edit(sid, Copy(node_id=leafish, parent_id=target))
        else:
            store.edit(sid, Delete(node_id=node))
            store.edit(sid, Restore(node_id=node))
    except InvalidOperationError:
        pass  # a refused edit (a cycle...): nothing changed, as for the peer


class NaiveJournal:
    """Deep copies of every node row of the session, one per edit."""

    def __init__(self, store: Store, sid: str) -> None:
        self.store = store
        with store.read() as conn:
            self.session_pk = q.session_record(conn, sid).pk
        self.sid = sid
        self.entries: list[tuple[list[dict[str, Any]], int | None]] = [self.copy()]
        self.position = 0

    def copy(self) -> tuple[list[dict[str, Any]], int | None]:
        with self.store.read() as conn:
            rows = [
                dict(r._mapping)
                for r in conn.execute(select(nodes).where(nodes.c.session_pk == self.session_pk))
            ]
            head = conn.execute(
                select(sessions.c.head_pk).where(sessions.c.pk == self.session_pk)
            ).scalar_one()
        return copy.deepcopy(rows), head

    def record(self) -> None:
        del self.entries[self.position + 1 :]
        self.entries.append(self.copy())
        if len(self.entries) > LIMIT + 1:
            del self.entries[0]
        self.position = len(self.entries) - 1

    def restore(self, index: int) -> None:
        rows, head = self.entries[index]
        with self.store.write() as conn:
            conn.execute(
                update(sessions).where(sessions.c.pk == self.session_pk).values(head_pk=None)
            )
            conn.execute(delete(nodes).where(nodes.c.session_pk == self.session_pk))
            conn.execute(insert(nodes), copy.deepcopy(rows))
            conn.execute(
                update(sessions).where(sessions.c.pk == self.session_pk).values(head_pk=head)
            )
        self.position = index

    def bytes(self) -> int:
        return sum(len(json.dumps(rows, default=str)) for rows, _ in self.entries)


def timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


def run_size(directory: Path, size: int) -> dict[str, float]:
    store = Store.open(f"sqlite:///{directory / f'undo{size}.db'}")
    ours_sid, peer_sid = build(store, size), build(store, size)
    steps = plan(size, EDITS)
    peer = NaiveJournal(store, peer_sid)
    ours_edit, peer_edit = [], []
    for s in steps:  # the ids to pick from are read outside the timed part
        ids = node_ids(store, ours_sid)
        ours_edit.append(timed(lambda s=s, ids=ids: apply_edit(store, ours_sid, ids, *s)))
    for s in steps:
        ids = node_ids(store, peer_sid)
        peer_edit.append(
            timed(lambda s=s, ids=ids: (apply_edit(store, peer_sid, ids, *s), peer.record()))
        )
    with store.read() as conn:
        pk = q.session_record(conn, ours_sid).pk
        ours_bytes = conn.execute(
            select(func.coalesce(func.sum(func.length(journal.c.payload)), 0)).where(
                journal.c.session_pk == pk
            )
        ).scalar_one()
    peer_bytes = peer.bytes()
    depth = len(store.history(ours_sid))
    ours_undo = [timed(lambda: store.undo(ours_sid)) for _ in range(depth)]
    ours_redo = [timed(lambda: store.redo(ours_sid)) for _ in range(depth)]
    peer_depth = peer.position
    peer_undo = [timed(lambda: peer.restore(peer.position - 1)) for _ in range(peer_depth)]
    peer_redo = [timed(lambda: peer.restore(peer.position + 1)) for _ in range(peer_depth)]
    store.close()
    figures = {
        "ours_edit": statistics.fmean(ours_edit),
        "ours_undo": statistics.fmean(ours_undo),
        "ours_redo": statistics.fmean(ours_redo),
        "peer_edit": statistics.fmean(peer_edit),
        "peer_undo": statistics.fmean(peer_undo),
        "peer_redo": statistics.fmean(peer_redo),
        "ours_bytes": ours_bytes,
        "peer_bytes": peer_bytes,
        "entries": depth,
    }
    print(f"\n== {size} nodes, {EDITS} edits, {depth} entries undone and redone ==")
    print(f"{'side':<6} {'edit ms':>9} {'undo ms':>9} {'redo ms':>9} {'journal bytes':>15}")
    for side in ("ours", "peer"):
        print(
            f"{side:<6} {figures[side + '_edit']:>9.2f} {figures[side + '_undo']:>9.2f} "
            f"{figures[side + '_redo']:>9.2f} {figures[side + '_bytes']:>15,}"
        )
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 5000])
    parser.add_argument("--quick", action="store_true", help="sizes 200 and 500")
    args = parser.parse_args(argv)
    sizes = [200, 500] if args.quick else args.sizes
    with tempfile.TemporaryDirectory(prefix="clotho-undo-bench-") as tmp:
        results = {size: run_size(Path(tmp), size) for size in sizes}
    size = max(sizes)
    last = results[size]
    undo = last["peer_undo"] / last["ours_undo"]
    journal_bytes = last["peer_bytes"] / last["ours_bytes"]
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    print(
        f"\ntargets at {size} nodes: undo {last['ours_undo']:.2f} ms < {TARGET_MS:g} "
        f"{ok(last['ours_undo'] < TARGET_MS)}; redo {last['ours_redo']:.2f} ms < {TARGET_MS:g} "
        f"{ok(last['ours_redo'] < TARGET_MS)}; journal_bytes {journal_bytes:.1f} >= "
        f"{TARGET_BYTES:g} {ok(journal_bytes >= TARGET_BYTES)}; undo {undo:.1f} >= "
        f"{TARGET_UNDO:g} {ok(undo >= TARGET_UNDO)}"
    )
    print(f"ratio undo={undo:.1f} journal_bytes={journal_bytes:.1f} at {size} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
