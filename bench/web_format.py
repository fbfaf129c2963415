"""The chat's roleplay formatting (``clotho/web/static/format.js``) on long and hostile
replies, measured in the browser.

Run from the repository root (needs Debian's Chromium and the test extra's Playwright)::

    .venv/bin/python bench/web_format.py

A real ``clotho serve`` serves the module; headless Chromium imports it and formats each
text (about 100 KB each) five times. Printed per text: its length and the median time of
``formatText`` (building the nodes, not drawing them). The texts: a long roleplay reply
(actions, speech, bold), and hostile ones that a naive parser takes quadratic time on:
100,000 asterisks, 33,333 unclosed ``*a``, ``_a`` and ``"`` openers. Last line:
``format_100kb_ms=<the slowest median>``; target: under 300 ms (a reply is formatted once,
when the story is drawn).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.api._server import TOKEN, running  # noqa: E402
from tests.web._browser import chromium, chromium_path, missing  # noqa: E402

RUNS = 5
TEXTS = {
    "roleplay": ('*She smiles.* "Hello **there**, traveller," she says. ' * 1900).strip(),
    "asterisks": "*" * 100_000,
    "unclosed_stars": " *a" * 33_333,
    "unclosed_underscores": " _a" * 33_333,
    "quotes": 'x "' * 33_333,
}

MEASURE = """async ([texts, runs]) => {
  const { formatText } = await import("/static/format.js");
  const out = {};
  for (const [name, text] of Object.entries(texts)) {
    const times = [];
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      formatText(text);
      times.push(performance.now() - start);
    }
    out[name] = times;
  }
  return out;
}"""


def main() -> int:
    reason = missing()
    if reason:
        print(f"skipped: {reason}")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'clotho.db'}"
        with running(url, folder / "data") as server, chromium() as browser:
            print(f"browser: {browser.version} ({chromium_path()}), page served by clotho serve")
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{server.url}/#token={TOKEN}")
            page.wait_for_selector("#composer-input")
            times = page.evaluate(MEASURE, [TEXTS, RUNS])
            context.close()
    medians = {}
    for name, runs in times.items():
        medians[name] = statistics.median(runs)
        print(f"{name:22} {len(TEXTS[name]):7,} chars  median {medians[name]:6.1f} ms")
    print(f"format_100kb_ms={max(medians.values()):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
