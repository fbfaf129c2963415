"""What watching a session live costs: a write's event, and the time to deliver it.

Run from the repository root::

    .venv/bin/python bench/events.py                           # SQLite
    .venv/bin/python bench/events.py --db postgresql://...     # an empty PostgreSQL database

- **write**: ``--writes`` appends to one session through the store, each its own
  transaction, with the event row (``session_events``, pruned, notified on PostgreSQL)
  against the same appends with the event left out (its peer in this run); the median
  per append of each.
- **poll**: what SQLite watchers of ``--watched`` sessions read every 0.5 s: one
  ``mnemosyne.events.versions`` of them all (a server's poller), against one
  ``store.events`` per watcher (what each stream read on its own before).
- **delivery**: a real ``clotho serve`` on the database; a client follows
  ``GET .../events`` while another posts ``--messages`` messages, 100 ms apart; each
  delivery timed from the write's answer to the ``change`` event's arrival (negative:
  the event came first). The writes go through the same server, which wakes its streams
  at their commit (another process's writes: NOTIFY on PostgreSQL, a 0.5 s poll on
  SQLite).

Last line: ``event_write_ms=<with - without, per append> poll_ms=<one read>
poll_apart_ms=<a read per watcher> delivery_p50_ms=<ms> delivery_max_ms=<ms> on
<database>``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mnemosyne import Store, events  # noqa: E402
from tests.api._server import TOKEN, running  # noqa: E402


def _appends(store: Store, writes: int) -> float:
    sid = store.create_session().id
    took = []
    for i in range(writes):
        started = time.perf_counter()
        store.append(sid, "user", f"line {i}")
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


def write_cost(url: str, writes: int) -> tuple[float, float]:
    with Store.open(url, migrate=True) as store:
        _appends(store, 20)  # warm up
        with_event = _appends(store, writes)
        kept = events.record
        events.record = lambda *args, **kwargs: None  # the same write, no event
        try:
            without = _appends(store, writes)
        finally:
            events.record = kept
    return with_event, without


def poll_cost(url: str, watched: int) -> tuple[float, float]:
    """Median ms of one read of ``watched`` sessions' versions, and of one events read
    per session."""
    with Store.open(url, migrate=True) as store:
        sids = [store.create_session().id for _ in range(watched)]
        together, apart = [], []
        for _ in range(20):
            started = time.perf_counter()
            events.versions(store.engine, sids)
            together.append(time.perf_counter() - started)
            started = time.perf_counter()
            for sid in sids:
                store.events(sid, after=0)
            apart.append(time.perf_counter() - started)
    return statistics.median(together) * 1000, statistics.median(apart) * 1000


def delivery(url: str, folder: Path, messages: int) -> list[float]:
    arrived: dict[int, float] = {}
    with running(url, folder / "data") as server, server.client() as client:
        sid = client.post("/api/sessions", json={"title": "bench"}).json()["session"]["id"]
        ready = threading.Event()

        def follow() -> None:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            timeout = httpx.Timeout(30.0, read=120.0)
            with (
                httpx.Client(base_url=server.url, headers=headers, timeout=timeout) as reader,
                reader.stream("GET", f"/api/sessions/{sid}/events") as stream,
            ):
                for line in stream.iter_lines():
                    if line.startswith("event: ready"):
                        ready.set()
                    elif line.startswith("data:") and '"kind"' in line:
                        arrived[json.loads(line[5:])["version"]] = time.perf_counter()
                        if len(arrived) >= messages:
                            return

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        assert ready.wait(30)
        answered: dict[int, float] = {}
        for i in range(messages):
            answer = client.post(
                f"/api/sessions/{sid}/messages", json={"role": "user", "content": f"m{i}"}
            )
            answered[answer.json()["session"]["version"]] = time.perf_counter()
            time.sleep(0.1)
        thread.join(30)
    return [(arrived[v] - answered[v]) * 1000 for v in answered if v in arrived]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a database URL (default: a new SQLite file)")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--messages", type=int, default=30)
    parser.add_argument("--watched", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = args.db or f"sqlite:///{folder / 'bench.db'}"
        name = url.split(":", 1)[0]
        with_event, without = write_cost(url, args.writes)
        print(f"write: {with_event:.2f} ms per append with its event, {without:.2f} ms without")
        together, apart = poll_cost(url, args.watched)
        print(
            f"poll: {args.watched} sessions' versions in one read {together:.2f} ms,"
            f" one events read each {apart:.2f} ms"
        )
        delays = sorted(delivery(url, folder, args.messages))
        p50 = statistics.median(delays)
        print(f"delivery: {len(delays)} events, p50 {p50:.0f} ms, max {delays[-1]:.0f} ms")
        print(
            f"event_write_ms={with_event - without:.2f} poll_ms={together:.2f}"
            f" poll_apart_ms={apart:.2f} delivery_p50_ms={p50:.0f}"
            f" delivery_max_ms={delays[-1]:.0f} on {name}"
        )


if __name__ == "__main__":
    main()
