"""Search every branch (``Store.search``) against the naive scan, on a SQLite file.

Run from the repository root::

    .venv/bin/python bench/search.py            # 100,000 nodes
    .venv/bin/python bench/search.py --quick    # 10,000 nodes

The store: ``--sessions`` sessions (8) of equal size, each a trunk of two fifths of
its nodes (user and assistant in turn, the replies named) with a side branch of three
nodes under every second trunk node; texts of 80 to 800 characters of campaign prose
(bench/_texts.py), one node in 50 with a CJK sentence, one in 1,000 naming
``Zephyrine``, one in 100 ``quicksilver``. Inserted with ``insert_nodes`` (the FTS
triggers index them as they go).

The queries: rare, uncommon and common words, a CJK word, two words at once. Ours is
``Store.search(word)`` over every session (50 hits at most, newest first, snippets
and trunk marks included); the naive scan is what search without an index is:
``SELECT pk, content FROM nodes WHERE content LIKE '%word%'`` over every node (each
word its own LIKE). Each is the median of ``--repeat`` runs per word, after one warm
run; the line printed is ``ratio search=<naive p50 / ours p50> ms=<ours p50> at N
nodes`` (p50 over all the words' runs). A query with a word under three characters
has no trigram and is answered by LIKE (a scan): timed apart, after the ratio. Last,
what the index costs a write: one ``insert_nodes`` of a fifth as many nodes (773
characters each) into a new file with the triggers dropped, then as shipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _texts import line  # noqa: E402

from mnemosyne import NodeRecord, Store  # noqa: E402

CJK = "旅人们围着篝火坐下，龙之谷的风很冷。"
QUERIES = ("Zephyrine", "quicksilver", "ferryman", "lantern", "龙之谷", "crescent moon")


def _text(rng: random.Random, i: int) -> str:
    text = line(rng, f"[{i}]", rng.choice((80, 200, 400, 800)))
    if i % 50 == 7:
        text += " " + CJK
    if i % 1000 == 13:
        text += " Zephyrine waves from the pier."
    if i % 100 == 31:
        text += " A vial of quicksilver."
    return text


def build(store: Store, nodes: int, sessions: int, seed: int = 7) -> None:
    """The sessions as the module's docstring says."""
    rng = random.Random(seed)
    per_session = nodes // sessions
    counter = 0
    for s in range(sessions):
        records: list[NodeRecord] = []
        trunk: list[int] = []
        while len(records) < per_session:
            role = "user" if len(trunk) % 2 == 0 else "assistant"
            parent = trunk[-1] if trunk else None
            records.append(
                NodeRecord(
                    role=role,
                    content=_text(rng, counter),
                    parent=parent,
                    name="Seraphina" if role == "assistant" else None,
                )
            )
            counter += 1
            trunk.append(len(records) - 1)
            if len(trunk) % 2 == 0 and parent is not None:
                below: int = parent
                for j in range(3):
                    if len(records) >= per_session:
                        break
                    records.append(
                        NodeRecord(
                            role="assistant" if j % 2 == 0 else "user",
                            content=_text(rng, counter),
                            parent=below,
                        )
                    )
                    counter += 1
                    below = len(records) - 1
        for index, record in enumerate(trunk[:-1]):
            records[record] = dataclasses.replace(records[record], active_child=trunk[index + 1])
        session = store.create_session(title=f"Session {s}")
        with store.transaction(session.id) as tx:
            tx.insert_nodes(records, head=trunk[-1])


def write_cost(folder: Path, count: int) -> tuple[float, float, int, int]:
    """Seconds to insert ``count`` nodes (one ``insert_nodes``, texts of 773
    characters) without and with the search index's triggers, and the files' sizes."""
    rng = random.Random(3)
    texts = [line(rng, f"[{i}]", 773) for i in range(count)]
    answers: list[tuple[float, int]] = []
    for indexed in (False, True):
        path = folder / f"write-{indexed}.db"
        with Store.open(f"sqlite:///{path}") as store:
            if not indexed:
                with store.engine.begin() as conn:
                    for trigger in ("nodes_fts_insert", "nodes_fts_update", "nodes_fts_delete"):
                        conn.exec_driver_sql(f"DROP TRIGGER {trigger}")
            records = [
                NodeRecord(role="user", content=text, parent=i - 1 if i else None)
                for i, text in enumerate(texts)
            ]
            sid = store.create_session().id
            start = time.perf_counter()
            with store.transaction(sid) as tx:
                tx.insert_nodes(records)
            answers.append((time.perf_counter() - start, 0))
        answers[-1] = (answers[-1][0], path.stat().st_size)
    (plain, plain_size), (indexed_s, indexed_size) = answers
    return plain, indexed_s, plain_size, indexed_size


def _ms(run: object) -> float:
    start = time.perf_counter()
    run()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


def naive(store: Store, query: str) -> int:
    """Every node holding every word, by LIKE over every node."""
    words = query.split()
    where = " AND ".join("content LIKE ?" for _ in words)
    with store.engine.connect() as conn:
        cursor = conn.connection.cursor()
        cursor.execute(f"SELECT pk, content FROM nodes WHERE {where}", [f"%{w}%" for w in words])
        return len(cursor.fetchall())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="10,000 nodes, 3 runs")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.repeat = 10_000, 3
    with (
        tempfile.TemporaryDirectory() as tmp,
        Store.open(f"sqlite:///{Path(tmp) / 'clotho.db'}") as store,
    ):
        start = time.perf_counter()
        build(store, args.nodes, args.sessions)
        built = time.perf_counter() - start
        total = sum(store.node_counts().values())
        print(f"built {total} nodes in {args.sessions} sessions in {built:.1f} s")
        ours_all: list[float] = []
        naive_all: list[float] = []
        for query in QUERIES:
            hits = store.search(query)  # warm: the file cache, the trunks' paths
            matched = naive(store, query)
            ours = [_ms(lambda q=query: store.search(q)) for _ in range(args.repeat)]
            scan = [_ms(lambda q=query: naive(store, q)) for _ in range(args.repeat)]
            ours_all += ours
            naive_all += scan
            print(
                f"{query!r:>16}: ours {statistics.median(ours):7.2f} ms ({len(hits)} hits)"
                f"  naive {statistics.median(scan):7.2f} ms ({matched} nodes)"
            )
        ours_p50 = statistics.median(ours_all)
        ratio = statistics.median(naive_all) / ours_p50
        print(f"ratio search={ratio:.1f} ms={ours_p50:.2f} at {total} nodes")
        short = statistics.median(_ms(lambda: store.search("谷")) for _ in range(args.repeat))
        print(f"a word under 3 characters (LIKE, no index): '谷' {short:.2f} ms")
        count = args.nodes // 5
        plain, indexed, plain_size, indexed_size = write_cost(Path(tmp), count)
        print(
            f"what the index costs a write: insert_nodes of {count} nodes {plain:.2f} s"
            f" without its triggers, {indexed:.2f} s with; file {plain_size / 1e6:.1f} MB"
            f" -> {indexed_size / 1e6:.1f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
