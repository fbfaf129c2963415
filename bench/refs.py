"""Tags and branches: what reading a session's names costs a log or a tree, and what
a session without branches pays per node added.

Run from the repository root::

    .venv/bin/python bench/refs.py            # a chain of 5,000 nodes, 30 names
    .venv/bin/python bench/refs.py --quick    # 1,000 nodes

On SQLite (a file in a temporary directory): a chain of N nodes with 30 tags spread
along it (one in the trash), then

- **marks**: ``mnemosyne.refs.marked`` (name, kind, node id: what ``clotho log`` and
  ``clotho tree`` mark nodes with), median of 50 reads;
- **listed**: ``mnemosyne.refs.listed`` (with each node's text and where it is: what
  ``clotho tags`` and the page's list show; the places read for all names in one
  query), median of 50 reads;
- **append**: ms per ``Store.append`` at the tip, in a session with no names and in
  one with a branch elsewhere, 300 each (median of 3 runs of 100); and ms per
  ``SessionTransaction.append`` in one transaction of 2,000 (median of 3), no names.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from mnemosyne import Store, refs
from mnemosyne.edits import Delete


def _median_ms(call: Callable[[], object], times: int) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        call()
        spent.append((time.perf_counter() - start) * 1000)
    return statistics.median(spent)


def _chain(store: Store, size: int) -> tuple[str, list[str]]:
    sid = store.create_session(title=f"bench {size}").id
    with store.transaction(sid) as tx:
        ids = [
            tx.append("user" if i % 2 == 0 else "assistant", f"message {i}").id for i in range(size)
        ]
    return sid, ids


def _appends(store: Store, sid: str, count: int) -> float:
    runs = []
    for _ in range(3):
        start = time.perf_counter()
        for i in range(count // 3):
            store.append(sid, "user", f"more {i}")
        runs.append((time.perf_counter() - start) * 1000 / (count // 3))
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a chain of 1,000 nodes")
    size = 1000 if parser.parse_args().quick else 5000
    with tempfile.TemporaryDirectory() as folder:
        store = Store.open(f"sqlite:///{Path(folder) / 'bench.db'}")
        sid, ids = _chain(store, size)
        for i in range(30):
            refs.name_node(store, sid, f"mark-{i}", "tag", ids[i * (size // 30)])
        side = store.add_sibling(sid, ids[size // 2], "a side reply")[0]
        refs.name_node(store, sid, "gone", "tag", side.id)
        store.edit(sid, Delete(node_id=side.id))
        store.checkout(sid, ids[-1])
        marks = _median_ms(lambda: refs.marked(store, sid), 50)
        listed = _median_ms(lambda: refs.listed(store, sid), 50)
        print(f"{size} nodes, 31 names: marks {marks:.2f} ms, listed {listed:.2f} ms")

        bare, _ = _chain(store, 50)
        branched, _ = _chain(store, 50)
        refs.name_node(store, branched, "elsewhere", "branch", "HEAD~10")
        plain_ms = _appends(store, bare, 300)
        branch_ms = _appends(store, branched, 300)
        print(f"append: {plain_ms:.3f} ms with no names, {branch_ms:.3f} ms with a branch")
        chain_ms = _median_ms(lambda: _chain(store, 2000), 3) / 2000
        print(f"append in one transaction of 2000, no names: {chain_ms:.3f} ms")
        store.close()


if __name__ == "__main__":
    main()
