"""Search every branch (``Store.search``) against the naive scan, on a SQLite file.

Run from the repository root::

    .venv/bin/python bench/search.py            # 100,000 nodes
    .venv/bin/python bench/search.py --quick    # 10,000 nodes

The store: ``--sessions`` sessions (8) of equal size, each a trunk of two fifths of
its nodes (user and assistant in turn, the replies named) with a side branch of three
nodes under every second trunk node; texts of 80 to 800 characters of campaign prose
(bench/_texts.py), one node in 50 with a CJK sentence, one in 1,000 naming
``Zephyrine``, one in 100 ``quicksilver``. Inserted with ``insert_nodes``, which
indexes nothing: the store is indexed lazily (migration 0009), so the first search
after the build indexes every node; it is timed apart, ``first_search_ms=``.

The queries: rare, uncommon and common words, a CJK word, two words at once. Ours is
``Store.search(word)`` over every session (50 hits at most, newest first, snippets
and trunk marks included); the naive scan is what search without an index is:
``SELECT pk, content FROM nodes WHERE content LIKE '%word%'`` over every node (each
word its own LIKE). Each is the median of ``--repeat`` runs per word, after one warm
run; the line printed is ``ratio search=<naive p50 / ours p50> ms=<ours p50> at N
nodes`` (p50 over all the words' runs). Then apart: a query with a word under three
characters (no trigram: a scan), a two-letter non-ASCII word (the casefolded scan),
and the filters (the trunk, under a node, a time span). Last, what the index costs a
write: one ``insert_nodes`` of a fifth as many nodes (773 characters each) into a new
file as shipped (lazy: nothing indexed), with migration 0008's insert trigger put back
(indexed as written), and the first search after the lazy one; with ``--postgresql``
the same insert on a throwaway PostgreSQL server (tests/_postgres.py) without the GIN
index, with it (``fastupdate`` on, PostgreSQL's default) and with ``fastupdate`` off.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _texts import line  # noqa: E402

from mnemosyne import NodeRecord, Store  # noqa: E402

# Migration 0008's insert trigger: indexing each node as it is written.
EAGER_TRIGGER = (
    "CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content);"
    " UPDATE search_index SET indexed_pk = new.pk; END"
)

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


def _records(count: int) -> list[NodeRecord]:
    rng = random.Random(3)
    return [
        NodeRecord(role="user", content=line(rng, f"[{i}]", 773), parent=i - 1 if i else None)
        for i in range(count)
    ]


def _insert_s(store: Store, records: list[NodeRecord]) -> float:
    sid = store.create_session().id
    start = time.perf_counter()
    with store.transaction(sid) as tx:
        tx.insert_nodes(records)
    return time.perf_counter() - start


def _mb(path: Path) -> float:
    """The database's size in MB, its write-ahead log included."""
    wal = path.with_name(path.name + "-wal")
    return (path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)) / 1e6


def write_cost(folder: Path, count: int) -> dict[str, float]:
    """Seconds to insert ``count`` nodes (one ``insert_nodes``) as shipped and with the
    eager trigger, the first search after the lazy one (ms), and the files' sizes."""
    records = _records(count)
    answer: dict[str, float] = {}
    for eager in (False, True):
        path = folder / f"write-{eager}.db"
        with Store.open(f"sqlite:///{path}") as store:
            if eager:
                with store.engine.begin() as conn:
                    conn.exec_driver_sql("DROP TRIGGER nodes_fts_insert")  # the guarded one
                    conn.exec_driver_sql(EAGER_TRIGGER)
            answer[f"insert_{eager}"] = _insert_s(store, records)
            if not eager:
                answer["unindexed_mb"] = _mb(path)
                answer["first_search_ms"] = _ms(lambda s=store: s.search("the"))
        answer[f"size_{eager}"] = _mb(path)
    return answer


def postgres_write_cost(count: int) -> dict[str, float]:
    """Seconds to insert ``count`` nodes on a throwaway PostgreSQL without the GIN
    index, with it (fastupdate on), with fastupdate off; each into a new database."""
    import psycopg

    from tests._postgres import throwaway_server

    records = _records(count)
    answer: dict[str, float] = {}
    with throwaway_server() as base:
        for case in ("no index", "fastupdate on", "fastupdate off"):
            name = "bench_" + case.replace(" ", "_")
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {name}")
            with Store.open(f"{base}/{name}", migrate=True) as store:
                with store.engine.begin() as conn:
                    if case == "no index":
                        conn.exec_driver_sql("DROP INDEX ix_nodes_content_search")
                    elif case == "fastupdate off":
                        conn.exec_driver_sql(
                            "ALTER INDEX ix_nodes_content_search SET (fastupdate = off)"
                        )
                answer[case] = _insert_s(store, records)
                answer[case + " search_ms"] = _ms(lambda s=store: s.search("lantern"))
    return answer


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
    parser.add_argument(
        "--postgresql", action="store_true", help="also the write cost on PostgreSQL"
    )
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.repeat = 10_000, 3
    with (
        tempfile.TemporaryDirectory() as tmp,
        Store.open(f"sqlite:///{Path(tmp) / 'clotho.db'}") as store,
    ):
        began = datetime.now(UTC)
        start = time.perf_counter()
        build(store, args.nodes, args.sessions)
        built = time.perf_counter() - start
        total = sum(store.node_counts().values())
        print(f"built {total} nodes in {args.sessions} sessions in {built:.1f} s")
        first = _ms(lambda: store.search("lantern"))
        print(f"the first search indexes them all: first_search_ms={first:.0f}")
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
        recent = began + timedelta(seconds=built / 2)  # half the nodes written since
        for label, run in (
            ("a word under 3 characters (a scan): '谷'", lambda: store.search("谷")),
            ("a two-letter non-ASCII word (casefolded scan): 'öl'", lambda: store.search("öl")),
            ("'lantern' on the trunks", lambda: store.search("lantern", trunk=True)),
            ("'Zephyrine' on the trunks", lambda: store.search("Zephyrine", trunk=True)),
            (
                "'lantern' since halfway through the build",
                lambda: store.search("lantern", since=recent),
            ),
        ):
            taken = statistics.median(_ms(run) for _ in range(args.repeat))
            print(f"{label}: {taken:.2f} ms")
        sid = store.sessions()[0].id
        node = store.search("lantern", session_id=sid, trunk=True, limit=500)[-1].node_id
        under = statistics.median(
            _ms(lambda: store.search("lantern", session_id=sid, under=node))
            for _ in range(args.repeat)
        )
        print(f"'lantern' under an early trunk node of one session: {under:.2f} ms")
        count = args.nodes // 5
        cost = write_cost(Path(tmp), count)
        print(
            f"what the index costs a write: insert_nodes of {count} nodes"
            f" {cost['insert_False']:.2f} s as shipped (lazy), {cost['insert_True']:.2f} s"
            f" indexed as written (0008's trigger); then the first search"
            f" {cost['first_search_ms']:.0f} ms (indexing them); file"
            f" {cost['unindexed_mb']:.1f} MB before it, {cost['size_False']:.1f} MB after"
        )
    if args.postgresql:
        pg = postgres_write_cost(args.nodes // 5)
        print(
            f"PostgreSQL: insert_nodes of {args.nodes // 5} nodes {pg['no index']:.2f} s without"
            f" the GIN index, {pg['fastupdate on']:.2f} s with it (fastupdate on, the default),"
            f" {pg['fastupdate off']:.2f} s with fastupdate off; a search after each:"
            f" {pg['no index search_ms']:.0f} / {pg['fastupdate on search_ms']:.0f} /"
            f" {pg['fastupdate off search_ms']:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
