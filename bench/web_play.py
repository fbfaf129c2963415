"""A new story from the page, measured in the browser: from opening the page to the first
streamed token of a story made from Seraphina's card.

Run from the repository root (needs Debian's Chromium and the test extra's Playwright)::

    .venv/bin/python bench/web_play.py            # 5 runs
    .venv/bin/python bench/web_play.py --runs 10

A real ``clotho serve`` (SQLite, a fresh database) with the scripted game master on
loopback as its model (``clotho demo``'s, through the OpenAI protocol); headless
Chromium, a new browser context each run (nothing cached). Each run plays what a player
does, without the player's pauses:

1. open the page (``page.goto``: the navigation's start is time 0);
2. New, upload ``tests/fixtures/sillytavern_default_Seraphina.png`` (the server tells
   it is a card, its picture is shown), Start the story (``POST /api/stories``: the
   session, the card, the avatar, the RPG schema, the greeting);
3. type a line, Enter; the first token of the reply painted in its bubble (a
   MutationObserver on the chat, read as ``performance.now()`` from the navigation's
   start).

The runs start once the server is warm (``GET /api/health`` says ``ready``: it loads
what the first turn needs in the background at start-up, as a player finds it a few
seconds after ``clotho serve`` printed its address). Printed for each run: the page
ready (the story picker filled), the story made (its greeting shown), Enter to the first
token, and the whole. Then the page's weight: each file the page loaded (the browser's
resource entries) gzipped at level 6 (as a server or proxy would send it), and every
file under ``clotho/web/static`` but Swagger UI's (the API's ``/docs``, not the page).
Last line: ``new_story_first_token_ms=<median> page_weight_gzip_kb=<loaded>``. Target:
under 1,500 ms.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from clotho.cli.gamemaster import serve_game_master  # noqa: E402
from tests.api._server import running_with_model  # noqa: E402
from tests.web._browser import chromium, chromium_path, missing  # noqa: E402

CARD = ROOT / "tests" / "fixtures" / "sillytavern_default_Seraphina.png"
STATIC = ROOT / "clotho" / "web" / "static"
TARGET_MS = 1500

# Keeps performance.now() in window.clothoFirstToken once the streaming bubble shows
# its first token.
FIRST_TOKEN = """() => {
  const list = document.getElementById("messages");
  window.clothoFirstToken = null;
  const observer = new MutationObserver(() => {
    const content = list.querySelector("article.message.assistant.pending.streaming .content");
    if (content && content.textContent.length > 0) {
      window.clothoFirstToken = performance.now();
      observer.disconnect();
    }
  });
  observer.observe(list, { childList: true, subtree: true, characterData: true });
}"""


def wait_warm(url: str) -> float:
    """Wait until the server has loaded what the first turn needs (as a player would find
    it, some seconds after ``clotho serve`` printed its address); the seconds waited."""
    started = time.perf_counter()
    while httpx.get(f"{url}/api/health").json().get("warm") != "ready":
        if time.perf_counter() - started > 120:
            raise RuntimeError("the server did not warm within 120 s")
        time.sleep(0.1)
    return time.perf_counter() - started


def gzipped(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=6))


def run(browser, url: str, token: str) -> dict[str, float | list[str]]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(f"{url}/#token={token}&view=chat")
        page.wait_for_selector("#session-select option", state="attached")
        ready = page.evaluate("performance.now()")
        page.click("#new-session")
        page.locator("#new-story label.story-upload input").first.set_input_files(str(CARD))
        page.wait_for_selector('#new-story li.story-card[aria-selected="true"]')
        page.click("#new-story button.primary")
        page.wait_for_selector("#new-story", state="hidden")
        page.locator("article.message.assistant:not(.pending)").first.wait_for()
        made = page.evaluate("performance.now()")
        page.evaluate(FIRST_TOKEN)  # the observer is set before Enter
        page.fill("#composer-input", "I sit up and look around.")
        entered = page.evaluate("performance.now()")
        page.press("#composer-input", "Enter")
        page.wait_for_function("() => window.clothoFirstToken !== null")
        token_at = page.evaluate("window.clothoFirstToken")
        page.wait_for_selector("#chat-view:not(.busy)")
        loaded = page.evaluate(
            "performance.getEntriesByType('resource').map((e) => e.name)"
            ".concat([location.origin + '/static/index.html'])"
        )
        return {
            "ready": ready,
            "made": made,
            "enter_to_token": token_at - entered,
            "first_token": token_at,
            "loaded": loaded,
        }
    finally:
        context.close()


def page_weight(loaded: list[str]) -> tuple[int, int, int, int]:
    """(files, gzip bytes) of what the page loaded, and of every static file but
    Swagger UI's."""
    paths = set()
    for address in loaded:
        path = urlparse(address).path
        if path.startswith("/static/"):
            paths.add(STATIC / path.removeprefix("/static/"))
    loaded_files = [p for p in paths if p.is_file()]
    every = [
        p
        for p in STATIC.rglob("*")
        if p.is_file() and "swagger" not in p.name and p.suffix not in (".md", ".txt")
    ]
    return (
        len(loaded_files),
        sum(gzipped(p.read_bytes()) for p in loaded_files),
        len(every),
        sum(gzipped(p.read_bytes()) for p in every),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    reason = missing()
    if reason:
        print(f"cannot run: {reason}")
        return 2
    with (
        tempfile.TemporaryDirectory(prefix="clotho-bench-play-") as work,
        running_with_model(serve_game_master(), Path(work)) as server,
        chromium() as browser,
    ):
        warmed = wait_warm(server.url)
        print(f"browser: {browser.version} ({chromium_path()}), page served by clotho serve")
        print(f"server warm (GET /api/health: ready) {warmed:.1f} s after it answered (not timed)")
        print("model: the scripted game master on loopback (OpenAI protocol, streamed)")
        runs = [run(browser, server.url, server.token) for _ in range(args.runs)]
    for number, measured in enumerate(runs, 1):
        print(
            f"run {number}: page ready {measured['ready']:.0f} ms, story made "
            f"{measured['made']:.0f} ms, Enter to first token {measured['enter_to_token']:.0f}"
            f" ms; first token at {measured['first_token']:.0f} ms"
        )
    firsts = [float(m["first_token"]) for m in runs]  # type: ignore[arg-type]
    median = statistics.median(firsts)
    files, weight, every_files, every_weight = page_weight(runs[0]["loaded"])  # type: ignore[arg-type]
    print(
        f"page weight (gzip -6): what the page loads {weight / 1024:.1f} KB in {files} files; "
        f"every file of the page (clotho/web/static but Swagger UI) {every_weight / 1024:.1f} KB "
        f"in {every_files} files"
    )
    verdict = "ok" if median < TARGET_MS else "MISSED"
    print(f"target: first token {median:.0f} < {TARGET_MS} ms {verdict} (median of {len(runs)})")
    print(f"new_story_first_token_ms={median:.0f} page_weight_gzip_kb={weight / 1024:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
