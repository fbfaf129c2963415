"""The world state at a node: keyframes + deltas, against the two obvious designs.

Run from the repository root::

    .venv/bin/python bench/state_at.py            # depth 10,000
    .venv/bin/python bench/state_at.py --quick    # depth 1,000, a smoke run

The work: one chain of ``--depth`` nodes in a session whose schema has 40 variables
(bounded ints, floats, bools, enums, sets, maps of NPC affinities, three "recent
events" lists of at most 20 entries, text); every node carries 1 to 3 operations
drawn from a seeded generator (always valid ones: increments are clamped by the
schema, sets are of the right type, an event log drops its oldest entry when
full). The size of the state at HEAD (as JSON) is printed: what a snapshot costs.
The three sides store the same nodes with the same deltas, each in its own SQLite
file:

- **ours** -- ``mnemosyne.Store`` as shipped: a keyframe (the whole state) at the
  root and every 16 levels; the state at a node is the nearest keyframe above plus
  fewer than 16 deltas.
- **replay** -- the design without keyframes: the same file with the keyframes
  deleted, so the state is every delta replayed from the root (our own code does
  the replay: it is the fallback when no keyframe is found).
- **snapshot** -- the seed's "space for time": a whole state on every node
  (``keyframe_every=1``).

Printed: for each side the database bytes (main file after a WAL checkpoint) and
the time of ``store.state(session)`` at HEAD (median of 15), then our time at depths
along the chain (the target is under 5 ms at any depth). Last line:
``ratio replay=<replay ms / ours> snapshot_bytes=<snapshot bytes / ours> at depth N``.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mnemosyne import Store, schema_from_mapping

REPEATS = 15
BATCH = 500
TARGET_REPLAY, TARGET_SNAPSHOT_BYTES, TARGET_MS = 100.0, 5.0, 5.0


def make_schema() -> Any:
    variables: dict[str, dict[str, Any]] = {}
    for i in range(12):
        variables[f"stat{i}"] = {"type": "int", "default": 50, "min": 0, "max": 100}
    for i in range(6):
        variables[f"rate{i}"] = {"type": "float", "default": 1.0, "min": 0.0, "max": 10.0}
    for i in range(6):
        variables[f"flag{i}"] = {"type": "bool"}
    for i in range(5):
        variables[f"mood{i}"] = {"type": "enum", "choices": ["calm", "wary", "angry", "glad"]}
    for i in range(4):
        variables[f"tags{i}"] = {"type": "set"}
    for i in range(3):
        variables[f"log{i}"] = {"type": "list"}
    for i in range(2):
        variables[f"affinity{i}"] = {
            "type": "map",
            "values": {"type": "int", "min": -100, "max": 100},
        }
    variables["note0"] = {"type": "str"}
    variables["note1"] = {"type": "str"}
    assert len(variables) == 40
    return schema_from_mapping({"variables": variables})


def make_deltas(depth: int, seed: int = 7) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    npcs = [f"npc{i}" for i in range(20)]
    words = ["sword", "rope", "torch", "map", "coin", "ring", "cloak", "key"]
    logs: list[list[str]] = [[] for _ in range(3)]  # "recent events": the last 20 each

    def operation() -> dict[str, Any]:
        kind = rng.randrange(10)
        if kind == 9:
            which = rng.randrange(3)
            event = f"turn {rng.randrange(10**6)}: {rng.choice(words)} {rng.choice(npcs)}"
            if len(logs[which]) >= 20:
                return {"op": "remove", "path": f"log{which}", "value": logs[which].pop(0)}
            logs[which].append(event)
            return {"op": "append", "path": f"log{which}", "value": event}
        if kind < 3:
            return {"op": "inc", "path": f"stat{rng.randrange(12)}", "value": rng.randint(-9, 9)}
        if kind == 3:
            return {"op": "inc", "path": f"rate{rng.randrange(6)}", "value": rng.random() - 0.5}
        if kind == 4:
            return {"op": "set", "path": f"flag{rng.randrange(6)}", "value": rng.random() < 0.5}
        if kind == 5:
            mood = rng.choice(["calm", "wary", "angry", "glad"])
            return {"op": "set", "path": f"mood{rng.randrange(5)}", "value": mood}
        if kind == 6:
            return {"op": "append", "path": f"tags{rng.randrange(4)}", "value": rng.choice(words)}
        if kind == 7:
            path = f"affinity{rng.randrange(2)}.{rng.choice(npcs)}"
            return {"op": "inc", "path": path, "value": rng.randint(-5, 5)}
        return {"op": "set", "path": f"note{rng.randrange(2)}", "value": f"turn {rng.random():.6f}"}

    return [[operation() for _ in range(rng.randint(1, 3))] for _ in range(depth)]


def build(path: Path, deltas: Sequence[list[dict[str, Any]]], every: int) -> tuple[Store, str]:
    store = Store.open(f"sqlite:///{path}", keyframe_every=every)
    sid = store.create_session(title="bench", schema=make_schema()).id
    for start in range(0, len(deltas), BATCH):
        with store.transaction(sid) as tx:
            for i, delta in enumerate(deltas[start : start + BATCH], start):
                tx.append("user" if i % 2 else "assistant", f"message {i}", delta=delta)
    return store, sid


def settle(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


def median_ms(call: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000, result


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="depth 1,000")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    depth = 1_000 if args.quick else args.depth
    deltas = make_deltas(depth)
    print(f"depth={depth} variables=40 operations={sum(len(d) for d in deltas)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="clotho-state-bench-") as tmp:
        directory = Path(tmp)
        ours, sid = build(directory / "ours.db", deltas, every=16)
        snap, snap_sid = build(directory / "snapshot.db", deltas, every=1)
        ours.close()
        snap.close()
        # The replay side: our file without its keyframes.
        replay_path = directory / "replay.db"
        replay_path.write_bytes((directory / "ours.db").read_bytes())
        with sqlite3.connect(replay_path) as conn:
            conn.execute("DELETE FROM keyframes")
        with sqlite3.connect(replay_path) as conn:
            conn.execute("VACUUM")
        sizes = {name: settle(directory / f"{name}.db") for name in ("ours", "replay", "snapshot")}

        results: dict[str, float] = {}
        states = {}
        for name, session in (("ours", sid), ("replay", sid), ("snapshot", snap_sid)):
            with Store.open(f"sqlite:///{directory / name}.db") as store:
                store.state(session)  # warm the connection
                results[name], states[name] = median_ms(lambda s=store, i=session: s.state(i))
        if not states["ours"] == states["replay"] == states["snapshot"]:
            raise SystemExit("the three sides disagree on the state at HEAD")

        state_bytes = len(json.dumps(states["ours"].as_dict(), separators=(",", ":")))
        print(f"state at HEAD: {state_bytes:,} bytes of JSON")
        print(f"\n{'side':<10} {'db bytes':>14} {'bytes/node':>11} {'state@HEAD ms':>14}")
        for name in ("ours", "replay", "snapshot"):
            per_node = sizes[name] / depth
            print(f"{name:<10} {sizes[name]:>14,} {per_node:>11,.0f} {results[name]:>14.3f}")

        with Store.open(f"sqlite:///{directory / 'ours.db'}") as store:
            path_ids = [m.id for m in store.messages(sid)]
            worst = 0.0
            along = []
            for at in sorted({1, 15, 16, 17, 100, depth // 2, depth - 1, depth}):
                node = path_ids[min(at, depth) - 1]
                ms, _ = median_ms(lambda s=store, n=node: s.state(sid, n))
                along.append(f"{at}:{ms:.3f}")
                worst = max(worst, ms)
        print(f"\nours state-at ms by depth: {' '.join(along)} (worst {worst:.3f})")

    replay = results["replay"] / results["ours"]
    snapshot_bytes = sizes["snapshot"] / sizes["ours"]
    verdict = lambda ok: "ok" if ok else "MISSED"  # noqa: E731
    print(
        f"targets: replay {replay:.1f} >= {TARGET_REPLAY:g} {verdict(replay >= TARGET_REPLAY)}; "
        f"snapshot_bytes {snapshot_bytes:.1f} >= {TARGET_SNAPSHOT_BYTES:g} "
        f"{verdict(snapshot_bytes >= TARGET_SNAPSHOT_BYTES)}; "
        f"worst state-at {worst:.2f} ms < {TARGET_MS:g} {verdict(worst < TARGET_MS)}"
    )
    print(f"ratio replay={replay:.1f} snapshot_bytes={snapshot_bytes:.1f} at depth {depth}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
