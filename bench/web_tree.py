"""The tree view with 5,000 nodes, measured in the browser.

Run from the repository root (needs Debian's Chromium and the test extra's Playwright)::

    .venv/bin/python bench/web_tree.py             # 5,000 nodes, 3 cold loads, 5 expands
    .venv/bin/python bench/web_tree.py --nodes 20000

The session (SQLite, written with the bulk insert): a trunk of half the nodes
(player and game master in turn, texts of 80-400 characters), and at every fifth trunk
node an alternative reply with a short story of its own below it (the other half of
the nodes), so the tree has a few hundred folded branches. A real ``clotho serve``
serves it; headless Chromium opens the page on the tree view.

- **render** -- from the start of the navigation (a new browser context each time:
  nothing cached) to the first paint of the tree view after it is drawn: loading the
  page and d3, ``GET /api/sessions``, ``GET .../tree`` (every node, with its text),
  the layout, the SVG, the paint. The page marks that moment
  (``performance.mark("clotho:tree-rendered")``, taken in a ``setTimeout`` queued
  from ``requestAnimationFrame``, i.e. once the frame is painted).
- **expand** -- a click on a folded branch's ``+N`` badge, from the click event's
  ``timeStamp`` to the paint of the new layout (the page's ``clotho:tree-fold``
  measure); branches spread over the trunk, each its own click.

Also printed: opening every branch at once (all the nodes shown). Last line:
``tree_render_ms=<median> expand_ms=<median> at <N> nodes``. Targets: render under
1,500 ms, expand under 200 ms.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _texts import line  # noqa: E402

from mnemosyne import NodeRecord, Store  # noqa: E402
from tests.api._server import TOKEN, running  # noqa: E402
from tests.web._browser import chromium, chromium_path, missing  # noqa: E402

BRANCH_EVERY = 5


def build(store: Store, nodes: int, seed: int = 7) -> tuple[str, int]:
    """A session of ``nodes`` nodes; its id and how many branches it has."""
    rng = random.Random(seed)
    trunk_size = nodes // 2
    branches = trunk_size // BRANCH_EVERY
    rest = nodes - trunk_size
    records: list[NodeRecord] = []
    trunk: list[int] = []
    for i in range(trunk_size):  # records 0..trunk_size-1; each goes on to the next
        role = "user" if i % 2 == 0 else "assistant"
        text = line(rng, f"[{i}]", rng.randint(80, 400))
        parent = i - 1 if i else None
        following = i + 1 if i + 1 < trunk_size else None
        records.append(NodeRecord(role=role, content=text, parent=parent, active_child=following))
        trunk.append(i)
    # Alternatives of every fifth trunk node, each a short story of its own.
    sizes = [rest // branches + (1 if b < rest % branches else 0) for b in range(branches)]
    for b, size in enumerate(sizes):
        at = trunk[b * BRANCH_EVERY + 1]  # an assistant reply
        parent: int | None = records[at].parent  # type: ignore[assignment]
        for j in range(size):
            role = "assistant" if j % 2 == 0 else "user"
            text = line(rng, f"[alt {b}.{j}]", rng.randint(80, 400))
            records.append(NodeRecord(role=role, content=text, parent=parent))
            parent = len(records) - 1
    session = store.create_session(title=f"{nodes} nodes")
    with store.transaction(session.id) as tx:
        tx.insert_nodes(records, head=trunk[-1])
    return session.id, branches


def cold_render(browser, url: str, sid: str) -> tuple[float, int, int]:
    """One load of the tree view in a fresh context: ms to the painted tree, and the
    nodes shown / in the tree."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{url}/#token={TOKEN}&session={sid}&view=tree")
        page.wait_for_function(
            "() => performance.getEntriesByName('clotho:tree-rendered').length > 0", timeout=120_000
        )
        ms = page.evaluate("performance.getEntriesByName('clotho:tree-rendered')[0].startTime")
        svg = page.locator("#tree-svg")
        return ms, int(svg.get_attribute("data-visible")), int(svg.get_attribute("data-total"))
    finally:
        context.close()


def expands(browser, url: str, sid: str, count: int) -> tuple[list[float], list[int], float, int]:
    """Clicks on ``count`` folded branches spread over the trunk (each opened, then
    folded back): ms each, the nodes shown after each; then every branch opened at
    once: ms and nodes shown."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.goto(f"{url}/#token={TOKEN}&session={sid}&view=tree")
        page.wait_for_function(
            "() => performance.getEntriesByName('clotho:tree-rendered').length > 0"
        )
        folds = page.eval_on_selector_all(
            "g.fold:not([display])", "nodes => nodes.map(n => n.dataset.foldId)"
        )
        picks = [folds[int(i * (len(folds) - 1) / max(1, count - 1))] for i in range(count)]
        times, shown = [], []
        for fold in picks:
            page.evaluate("id => clotho.views.tree.centerOn(id)", fold)
            before = page.evaluate("performance.getEntriesByName('clotho:tree-fold').length")
            page.click(f'g.fold[data-fold-id="{fold}"]')
            page.wait_for_function(
                "n => performance.getEntriesByName('clotho:tree-fold').length > n", arg=before
            )
            times.append(
                page.evaluate("performance.getEntriesByName('clotho:tree-fold').at(-1).duration")
            )
            shown.append(int(page.locator("#tree-svg").get_attribute("data-visible")))
            page.evaluate("id => clotho.views.tree.toggleFold(id)", fold)  # fold it back
        every = page.evaluate(
            """() => new Promise((resolve) => {
                const tree = clotho.views.tree;
                const started = performance.now();
                for (const [id, kids] of tree.kids) if (kids.length > 1) tree.open.add(id);
                tree.draw();
                const done = () => resolve(performance.now() - started);
                requestAnimationFrame(() => setTimeout(done, 0));
            })"""
        )
        return times, shown, every, int(page.locator("#tree-svg").get_attribute("data-visible"))
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--loads", type=int, default=3, help="cold loads of the tree view")
    parser.add_argument("--expands", type=int, default=5, help="branches opened one by one")
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    with tempfile.TemporaryDirectory(prefix="clotho-bench-web-") as work:
        folder = Path(work)
        url = f"sqlite:///{folder / 'clotho.db'}"
        started = time.perf_counter()
        with Store.open(url) as store:
            sid, branches = build(store, args.nodes)
        print(
            f"session: {args.nodes} nodes ({args.nodes // 2} on the trunk, {branches} folded "
            f"branches), written in {time.perf_counter() - started:.1f} s (not timed)"
        )
        with running(url, folder / "data") as server, chromium() as browser:
            print(f"browser: {browser.version} ({chromium_path()}), page served by clotho serve")
            loads = [cold_render(browser, server.url, sid) for _ in range(args.loads)]
            renders = [ms for ms, _, _ in loads]
            _, visible, total = loads[0]
            print(
                f"render (navigation to painted tree, cold, {args.loads} loads): "
                + ", ".join(f"{ms:.0f}" for ms in renders)
                + f" ms; {visible} of {total} nodes shown"
            )
            times, shown, every, all_shown = expands(browser, server.url, sid, args.expands)
            print(
                f"expand (click on +N to painted, {len(times)} branches): "
                + ", ".join(f"{ms:.0f}" for ms in times)
                + f" ms; nodes shown after each: {sorted(set(shown))}"
            )
            print(f"open every branch at once: {every:.0f} ms, {all_shown} nodes shown")
    render_ms, expand_ms = statistics.median(renders), statistics.median(times)
    verdict = [
        f"render {render_ms:.0f} < 1500 {'ok' if render_ms < 1500 else 'MISSED'}",
        f"expand {expand_ms:.0f} < 200 {'ok' if expand_ms < 200 else 'MISSED'}",
    ]
    print(f"targets at {args.nodes} nodes: " + "; ".join(verdict))
    print(f"tree_render_ms={render_ms:.0f} expand_ms={expand_ms:.0f} at {args.nodes} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
