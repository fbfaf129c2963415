"""What an Idempotency-Key costs a write, and what a replayed answer costs.

Run from the repository root::

    .venv/bin/python bench/idempotency.py            # 400 writes of each kind
    .venv/bin/python bench/idempotency.py --quick    # 50, a smoke run

The work, through the HTTP API in process (FastAPI's TestClient: the routes, the
validation and the response model as a server runs them, without the socket) over a
SQLite file: a session gets ``--writes`` messages (``POST .../messages``) sent

- **plain**: without a key (the peer: what a write cost before keys);
- **keyed**: each with its own ``Idempotency-Key`` (looked up, then stored with the
  write in its transaction, with the answer);
- **replayed**: each keyed write sent again (the stored answer read back, nothing
  written).

Printed: the median and p95 of each, in ms. Last line:
``ratio keyed=<keyed median / plain median> replay_ms=<replayed median> at N writes``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from clotho.api import create_app
from clotho.settings import Settings
from mnemosyne import Store

TOKEN = "bench-token-3f2a9c0d"


def timed(client: TestClient, path: str, body: dict[str, str], key: str | None) -> float:
    headers = {"Idempotency-Key": key} if key else {}
    start = time.perf_counter()
    answer = client.post(path, json=body, headers=headers)
    elapsed = (time.perf_counter() - start) * 1000
    assert answer.status_code == 201, answer.text
    return elapsed


def summary(name: str, times: list[float]) -> float:
    median = statistics.median(times)
    p95 = sorted(times)[int(len(times) * 0.95) - 1]
    print(f"{name:>9}: median {median:6.2f} ms  p95 {p95:6.2f} ms  ({len(times)} writes)")
    return median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=400)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    writes = 50 if args.quick else args.writes
    with tempfile.TemporaryDirectory() as folder:
        store = Store.open(f"sqlite:///{Path(folder) / 'bench.db'}")
        settings = Settings(data_dir=Path(folder), vectors=False, api_token=TOKEN)
        app = create_app(settings, store=store, token=TOKEN, hosts=["testserver"])
        with TestClient(app, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            sid = client.post("/api/sessions", json={"title": "keys"}).json()["session"]["id"]
            path = f"/api/sessions/{sid}/messages"
            for i in range(20):  # warm up
                timed(client, path, {"role": "user", "content": f"warm {i}"}, None)
            plain, keyed, replayed = [], [], []
            for i in range(writes):  # interleaved, so that both see the same tree sizes
                plain.append(timed(client, path, {"role": "user", "content": f"p{i}"}, None))
                body = {"role": "user", "content": f"k{i}"}
                keyed.append(timed(client, path, body, f"key-{i}"))
            for i in range(writes):
                body = {"role": "user", "content": f"k{i}"}
                replayed.append(timed(client, path, body, f"key-{i}"))
        store.close()
    base = summary("plain", plain)
    with_key = summary("keyed", keyed)
    replay = summary("replayed", replayed)
    print(f"ratio keyed={with_key / base:.2f} replay_ms={replay:.2f} at {writes} writes")


if __name__ == "__main__":
    main()
