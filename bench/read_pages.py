"""A long list read a page at a time against the same list read whole, over HTTP.

Run from the repository root::

    .venv/bin/python bench/read_pages.py                 # a 20,000-node tree, SQLite
    .venv/bin/python bench/read_pages.py --nodes 5000

The session is bench/web_tree.py's (a trunk of half the nodes, a short branch at every
fifth trunk node). A real ``clotho serve`` serves it; one client reads, each read timed
from the request to the last byte (median of ``--repeat``):

- **whole**: every node through its pages (``GET .../tree?limit=1000``, ``next`` to the
  end), what the page's tree view reads;
- **page**: one page of 1,000 nodes: the first, one in the middle, the last (a cursor
  far into the tree: its place is found among the tree's keys);
- **history**: a page of the undo journal; **sessions**: a page of the sessions list.

Last line: ``tree_page_ms=<median over the three pages> tree_whole_ms=<ms> at <N> nodes``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from web_tree import build  # noqa: E402

from mnemosyne import Store  # noqa: E402
from mnemosyne.edits import Rewrite  # noqa: E402
from tests.api._server import TOKEN, running  # noqa: E402


def timed(client: httpx.Client, url: str, repeat: int) -> tuple[float, dict]:
    """The median ms of ``repeat`` reads of ``url``, and the last answer."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url)
        response.raise_for_status()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), response.json()


def whole_tree(client: httpx.Client, url: str) -> tuple[float, int, int]:
    """ms to read every page of the tree; nodes read, pages."""
    start = time.perf_counter()
    page = client.get(url).json()
    nodes, pages = len(page["nodes"]), 1
    while page["next"]:
        page = client.get(page["next"]).json()
        nodes += len(page["nodes"])
        pages += 1
    return (time.perf_counter() - start) * 1000, nodes, pages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'clotho.db'}"
        with Store.open(url) as store:
            sid, _ = build(store, args.nodes)
            first = store.projection(sid)[0]
            for i in range(20):  # a journal to page through
                store.edit(sid, Rewrite(node_id=first.id, content=f"rewritten {i}"))
            for i in range(200):
                store.create_session(title=f"other {i}")
            ids = [node.id for node in store.tree(sid).nodes]
        with (
            running(url, folder / "data") as server,
            httpx.Client(
                base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120
            ) as client,
        ):
            tree = f"/api/sessions/{sid}/tree"
            timed(client, f"{tree}?limit=1000", 2)  # warm-up
            wholes = [whole_tree(client, f"{tree}?limit=1000") for _ in range(args.repeat)]
            whole_ms = statistics.median(ms for ms, _, _ in wholes)
            _, read, pages = wholes[0]
            assert read == len(ids), (read, len(ids))
            print(f"whole tree        {whole_ms:8.1f} ms  ({read} nodes, {pages} pages)")
            page_ms = []
            for name, after in (
                ("first page", None),
                ("middle page", ids[len(ids) // 2]),
                ("last page", ids[-1001]),
            ):
                query = "limit=1000" + (f"&after={after}" if after else "")
                ms, body = timed(client, f"{tree}?{query}", args.repeat)
                page_ms.append(ms)
                print(f"{name:<17} {ms:8.1f} ms  ({len(body['nodes'])} nodes)")
            ms, body = timed(client, f"/api/sessions/{sid}/history?limit=50", args.repeat)
            print(f"history page      {ms:8.1f} ms  ({len(body['entries'])} entries)")
            ms, body = timed(client, "/api/sessions?limit=50", args.repeat)
            print(f"sessions page     {ms:8.1f} ms  ({len(body['sessions'])} of {body['total']})")
            print(
                f"tree_page_ms={statistics.median(page_ms):.1f} "
                f"tree_whole_ms={whole_ms:.1f} at {len(ids)} nodes"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
