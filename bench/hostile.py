"""Hostile files against the command line and the HTTP API: refused cleanly, in time, in memory?

Run from the repository root::

    .venv/bin/python bench/hostile.py               # every case, CLI and API
    .venv/bin/python bench/hostile.py --only png    # the cases whose name holds "png"

A catalogue of files built from the real fixtures (``tests/fixtures``, mutated by
``tests/fuzz/_hostile.py``), for each importer (lorebook, card JSON, card PNG, tree
file, SillyTavern chat): numbers of 5,000 digits (past Python's ``int`` limit),
``NaN``, nesting 100,000 deep, fields of 16 MB, 100,000 entries / messages / nodes,
lone UTF-16 surrogates, PNG text chunks inflating to 512 MB (``zTXt``, ``iTXt``) or
50,000 of them; and lorebooks keyed by backtracking regexes, run by ``clotho lore
test``, by a turn's scan (``clotho say`` / ``POST .../turns`` against the scripted
model on loopback) and by ``POST .../lore/test``.

- **CLI** -- each case in a fresh SQLite database (its session, and for the scans the
  bomb lorebook, made first, untimed), then the command as a subprocess, with a
  timeout (``--timeout``, 30 s) and an address space capped at 8 GB (so a bomb is a
  ``MemoryError``, not a machine out of memory). Time is the wall time of the process;
  memory its own peak RSS (``os.wait4``'s ``ru_maxrss``, this child alone). Both are
  printed above the *baseline* of the same command on the real, benign file (start-up,
  imports: ``clotho say`` imports litellm, ~4 s), and that excess is what is judged.
  Clean: exit 0 (imported), or exit 1 with exactly one line on stderr and no
  ``Traceback`` (refused).
- **API** -- one real ``clotho serve`` on loopback (SQLite, ``CLOTHO_VECTORS=false``,
  the scripted model on loopback), each case against a new session. Time is the
  request's wall time; memory the server's peak RSS during the request above its RSS
  before it (``/proc/PID/clear_refs`` reset to 5 before each case, then ``VmHWM``
  minus the ``VmRSS`` read before). Clean: a 2xx (imported), or a 4xx
  ``application/problem+json`` (refused). A timeout or a dead server is followed by a
  fresh server. Then the slowest API case is played again against a fresh server while
  a thread polls ``GET /api/health`` every 50 ms: the worst health latency is printed
  (a server busy in one request should still answer others).

Each line: surface, case, outcome (refused / imported / crashed / timeout), time (ms
above baseline for the CLI), peak MB above baseline, and what it said. The last line
is ``hostile cases=N refused_clean=N worst_ms=MS worst_mb=MB`` (refused_clean: refused
cleanly or imported; worst over every case; targets: every case clean, worst under
1,000 ms and 200 MB). Save it with ``| tee bench/results/hostile.txt``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from orchestrator.loopback import ModelServer, Reply  # noqa: E402
from tests.fuzz import _hostile as h  # noqa: E402

CLOTHO = str(Path(sys.executable).parent / "clotho")
TOKEN = "hostile-bench-token-7c1d"
AS_CAP = 8 << 30
#: Children run through prlimit (exec, not a fork of this process: its memory would
#: count in the child's peak RSS), their address space capped.
CAPPED = ["prlimit", f"--as={AS_CAP}", "--"]
TARGET_MS, TARGET_MB = 1000.0, 200.0
HUGE = 16 * 1024 * 1024
MANY = 100_000
DEEP = 100_000
DIGITS = "9" * 5000


def script(request: dict[str, Any]) -> Reply | str:
    if "response_format" in request:
        return '{"operations": []}'
    return "The goblin shrugs."


# -- the catalogue ----------------------------------------------------------------------


@dataclass
class Case:
    """One hostile file and what is done with it."""

    name: str
    kind: str  # lorebook, card, chat, tree, lore-test, turn
    data: bytes
    filename: str
    text: str = ""  # lore-test and turn: the message
    baseline: bool = False


def _deep() -> str:
    return "[" * DEEP + "]" * DEEP


def _tree_document() -> dict[str, Any]:
    from mnemosyne import Store

    with (
        tempfile.TemporaryDirectory() as folder,
        Store.open(f"sqlite:///{folder}/t.db", migrate=True) as store,
    ):
        return h.tree_document(store, h.CHAT.read_bytes())


def _tree_with_nodes(document: dict[str, Any], count: int) -> dict[str, Any]:
    """The tree file with a chain of ``count`` nodes (each the child of the previous): a
    valid file, as a long campaign's export is."""
    first = dict(document["nodes"][1])
    nodes = []
    for i in range(count):
        node = {
            **first,
            "id": f"{i:032x}",
            "parent_id": f"{i - 1:032x}" if i else None,
            "active_child_id": f"{i + 1:032x}" if i < count - 1 else None,
        }
        nodes.append(node)
    return {
        **document,
        "nodes": nodes,
        "traces": {},
        "session": {**document["session"], "head_id": nodes[-1]["id"]},
    }


def _past_the_size_limit(document: dict[str, Any]) -> bytes:
    """A tree file one byte longer than any file may be (spaces after the JSON)."""
    from mnemosyne.jsontext import MAX_FILE_BYTES

    text = json.dumps(document).encode()
    return text + b" " * (MAX_FILE_BYTES + 1 - len(text))


def catalogue() -> list[Case]:
    book = h.lorebook()
    card = h.card()
    chat = h.chat_lines()
    tree = _tree_document()
    chat_text = "\n".join(json.dumps(line, ensure_ascii=False) for line in chat)
    bombs = h.lorebook_with_regex_keys(list(h.REGEX_BOMBS)).encode()
    surrogate = '"\\ud800 lone"'
    many_messages = [chat[0]] + [
        {
            **chat[1],
            "mes": f"message {i}",
            "swipes": [f"message {i}"],
            "swipe_id": 0,
            "swipe_info": chat[1].get("swipe_info", [{}])[:1],
        }
        for i in range(MANY)
    ]
    e0 = ("entries", "0")
    cases = [
        # baselines: the real files (and benign scans), to subtract start-up and imports
        Case("lorebook-real", "lorebook", h.LOREBOOK.read_bytes(), "book.json", baseline=True),
        Case("card-json-real", "card", json.dumps(card).encode(), "card.json", baseline=True),
        Case("card-png-real", "card", h.CARD_PNG.read_bytes(), "card.png", baseline=True),
        Case("chat-real", "chat", h.CHAT.read_bytes(), "chat.jsonl", baseline=True),
        Case("tree-real", "tree", json.dumps(tree).encode(), "tree.json", baseline=True),
        Case(
            "lore-test-real",
            "lore-test",
            h.LOREBOOK.read_bytes(),
            "book.json",
            "the forest",
            baseline=True,
        ),
        Case(
            "turn-real", "turn", h.LOREBOOK.read_bytes(), "book.json", "the forest", baseline=True
        ),
        # lorebooks
        Case(
            "lorebook-int-5000-digits",
            "lorebook",
            h.replaced(book, (*e0, "order"), DIGITS).encode(),
            "book.json",
        ),
        Case(
            "lorebook-nan",
            "lorebook",
            h.replaced(book, (*e0, "probability"), "NaN").encode(),
            "book.json",
        ),
        Case(
            "lorebook-deep-nesting",
            "lorebook",
            h.replaced(book, (*e0, "key"), _deep()).encode(),
            "book.json",
        ),
        Case(
            "lorebook-huge-content",
            "lorebook",
            h.replaced(book, (*e0, "content"), json.dumps("x" * HUGE)).encode(),
            "book.json",
        ),
        Case(
            "lorebook-100k-entries", "lorebook", h.lorebook_with_entries(MANY).encode(), "book.json"
        ),
        Case(
            "lorebook-lone-surrogate",
            "lorebook",
            h.replaced(book, (*e0, "content"), surrogate).encode(),
            "book.json",
        ),
        Case("lorebook-regex-bomb-import", "lorebook", bombs, "book.json"),
        Case("lore-test-regex-bomb", "lore-test", bombs, "book.json", h.BOMB_TEXT),
        Case("turn-scan-regex-bomb", "turn", bombs, "book.json", h.BOMB_TEXT),
        # card JSON
        Case(
            "card-int-5000-digits",
            "card",
            h.replaced(card, ("data", "character_version"), DIGITS).encode(),
            "card.json",
        ),
        Case(
            "card-deep-nesting",
            "card",
            h.replaced(card, ("data", "extensions"), _deep()).encode(),
            "card.json",
        ),
        Case(
            "card-huge-field",
            "card",
            h.replaced(card, ("data", "description"), json.dumps("x" * HUGE)).encode(),
            "card.json",
        ),
        Case("card-book-100k-entries", "card", _card_with_book(card, MANY).encode(), "card.json"),
        Case(
            "card-lone-surrogate",
            "card",
            h.replaced(card, ("data", "description"), surrogate).encode(),
            "card.json",
        ),
        # card PNG
        Case("png-ztxt-bomb-512mb", "card", h.png_with([h.ztxt_bomb(512 << 20)]), "card.png"),
        Case("png-itxt-bomb-512mb", "card", h.png_with([h.itxt_bomb(512 << 20)]), "card.png"),
        Case(
            "png-50k-text-chunks",
            "card",
            h.png_with([h.chunk(b"tEXt", b"junk\0x")] * 50_000 + [h.card_chunk(json.dumps(card))]),
            "card.png",
        ),
        Case(
            "png-length-past-end",
            "card",
            h.png_with([h.chunk(b"tEXt", b"chara\0AAAA", length=2**31 - 1)]),
            "card.png",
        ),
        Case(
            "png-card-int-5000-digits",
            "card",
            h.png_with([h.card_chunk(h.replaced(card, ("data", "character_version"), DIGITS))]),
            "card.png",
        ),
        # tree files
        Case(
            "tree-int-5000-digits",
            "tree",
            h.replaced(tree, ("version",), DIGITS).encode(),
            "tree.json",
        ),
        Case(
            "tree-deep-nesting",
            "tree",
            h.replaced(tree, ("nodes", 1, "metadata"), _deep()).encode(),
            "tree.json",
        ),
        Case(
            "tree-huge-content",
            "tree",
            h.replaced(tree, ("nodes", 1, "content"), json.dumps("x" * HUGE)).encode(),
            "tree.json",
        ),
        Case(
            "tree-past-size-limit",
            "tree",
            _past_the_size_limit(tree),
            "tree.json",
        ),
        Case(
            "tree-lone-surrogate",
            "tree",
            h.replaced(tree, ("nodes", 1, "content"), surrogate).encode(),
            "tree.json",
        ),
        # SillyTavern chats
        Case(
            "chat-int-5000-digits",
            "chat",
            h.chat_replaced(1, ("swipe_id",), DIGITS).encode(),
            "chat.jsonl",
        ),
        Case(
            "chat-deep-nesting",
            "chat",
            h.chat_replaced(1, ("extra",), _deep()).encode(),
            "chat.jsonl",
        ),
        Case(
            "chat-huge-message",
            "chat",
            h.chat_replaced(2, ("mes",), json.dumps("x" * HUGE)).encode(),
            "chat.jsonl",
        ),
        Case(
            "chat-100k-messages",
            "chat",
            "\n".join(json.dumps(m) for m in many_messages).encode(),
            "chat.jsonl",
        ),
        Case(
            "chat-lone-surrogate",
            "chat",
            h.chat_replaced(2, ("mes",), surrogate).encode(),
            "chat.jsonl",
        ),
    ]
    assert chat_text  # the benign chat is the fixture's bytes
    return cases


def _card_with_book(card: dict[str, Any], count: int) -> str:
    entry = {"keys": ["k"], "content": "c", "enabled": True, "insertion_order": 1}
    data = {
        **card["data"],
        "character_book": {"entries": [{**entry, "id": i} for i in range(count)]},
    }
    return json.dumps({**card, "data": data})


BASELINE = {
    "lorebook": "lorebook-real",
    "card": "card-json-real",
    "chat": "chat-real",
    "tree": "tree-real",
    "lore-test": "lore-test-real",
    "turn": "turn-real",
}


def baseline_of(case: Case) -> str:
    if case.kind == "card" and case.filename.endswith(".png"):
        return "card-png-real"
    return BASELINE[case.kind]


# -- results ------------------------------------------------------------------------------


@dataclass
class Result:
    surface: str
    case: str
    outcome: str  # refused, imported, crashed, timeout
    ms: float
    mb: float
    said: str = ""
    raw_ms: float = 0.0
    raw_mb: float = 0.0

    @property
    def clean(self) -> bool:
        return self.outcome in ("refused", "imported")

    def line(self) -> str:
        said = " ".join(self.said.split())[:150]
        return (
            f"{self.surface:<3} {self.case:<28} {self.outcome:<8} {self.ms:>9.0f} ms "
            f"{self.mb:>8.1f} MB  {said}"
        )


# -- the command line ---------------------------------------------------------------------


def cli_env(folder: Path, model: ModelServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLOTHO_")}
    env.update(
        {
            "CLOTHO_DATABASE_URL": f"sqlite:///{folder / 'clotho.db'}",
            "CLOTHO_VECTORS": "false",
            "CLOTHO_MODEL": "openai/gm",
            "CLOTHO_API_BASE": model.url,
            "CLOTHO_API_KEY": "x",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_COLOR": "1",
            "HOME": str(folder),
        }
    )
    return env


def _hwm_of_group(pgid: int) -> float:
    """The largest VmHWM (MB) among the live processes of a process group."""
    worst = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if os.getpgid(int(status.parent.name)) != pgid:
                continue
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    worst = max(worst, int(line.split()[1]) / 1024)
        except (OSError, ValueError):
            continue
    return worst


def run_cli(
    args: list[str], env: dict[str, str], timeout: float
) -> tuple[int | None, str, float, float]:
    """(exit code or None on a timeout, stderr, seconds, peak MB of the command).

    The command runs under ``/usr/bin/time -f %M`` (its peak RSS, measured by a small
    parent: a child forked from this process would count this process's memory) and
    ``prlimit`` (its address space capped), in a process group of its own."""
    with tempfile.TemporaryDirectory() as folder:
        peak, errors = Path(folder) / "peak", Path(folder) / "stderr"
        with errors.open("wb") as err:
            started = time.perf_counter()
            process = subprocess.Popen(
                ["/usr/bin/time", "-f", "%M", "-o", str(peak), *CAPPED, CLOTHO, *args],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
            try:
                code: int | None = process.wait(timeout=timeout)
                elapsed = time.perf_counter() - started
                mb = int(peak.read_text().split()[-1]) / 1024
            except subprocess.TimeoutExpired:
                elapsed = time.perf_counter() - started
                mb = _hwm_of_group(process.pid)
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                code = None
        text = errors.read_text(errors="replace")
    if code is not None and code != 0:  # time's own "Command exited with non-zero status"
        text = "\n".join(
            line for line in text.splitlines() if not line.startswith("Command exited with")
        )
    return code, text, elapsed, mb


def cli_case(case: Case, model: ModelServer, timeout: float) -> tuple[str, str, float, float]:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        env = cli_env(folder, model)
        file = folder / case.filename
        file.write_bytes(case.data)
        setup = [["session", "new"]]
        if case.kind in ("lore-test", "turn"):
            setup.append(["import", "lorebook", str(file)])
        for args in setup:
            code, err, _, _ = run_cli(args, env, 120)
            if code != 0:
                return "crashed", f"setup {' '.join(args[:2])}: {err.strip()[-300:]}", 0.0, 0.0
        command = {
            "lorebook": ["import", "lorebook", str(file)],
            "card": ["import", "card", str(file)],
            "chat": ["import", "chat", str(file)],
            "tree": ["import", "tree", str(file)],
            "lore-test": ["lore", "test", case.text],
            "turn": ["say", case.text],
        }[case.kind]
        code, err, seconds, mb = run_cli(command, env, timeout)
    lines = err.strip().splitlines()
    if code is None:
        outcome = "timeout"
    elif code == 0:
        outcome = "imported"
    elif code == 1 and len(lines) == 1 and "Traceback" not in err:
        outcome = "refused"
    else:
        outcome = "crashed"
    said = lines[-1] if lines else ""
    return outcome, said, seconds * 1000, mb


# -- the API ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Server:
    """A real `clotho serve` on loopback over a SQLite file of its own."""

    def __init__(self, folder: Path, model: ModelServer) -> None:
        self.folder = folder
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = cli_env(folder, model) | {"CLOTHO_API_TOKEN": TOKEN, "CLOTHO_DATA_DIR": str(folder)}
        self.log = open(folder / "serve.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [*CAPPED, CLOTHO, "serve", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env,
            stdout=self.log,
            stderr=self.log,
        )
        self.client = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    "clotho serve exited: " + (folder / "serve.log").read_text()[-2000:]
                )
            try:
                health = self.client.get("/api/health", timeout=1)
                # Ready, and done warming up (loading the model client takes the
                # interpreter and memory: it is not what a case costs).
                if health.status_code == 200 and health.json().get("warm") != "warming":
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("clotho serve did not answer /api/health in 60 s")
            time.sleep(0.1)

    def alive(self) -> bool:
        return self.process.poll() is None

    def status(self, key: str) -> float:
        """A ``VmRSS``/``VmHWM`` of the server process, in MB."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
        raise KeyError(key)

    def reset_peak(self) -> float:
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")
        return self.status("VmRSS")

    def stop(self) -> None:
        self.client.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def api_case(server: Server, case: Case, timeout: float) -> tuple[str, str, float, float]:
    client = server.client
    try:
        session = client.post("/api/sessions", json={"title": case.name}).json()["session"]["id"]
    except httpx.TransportError:  # the connection a previous case broke: once more
        session = client.post("/api/sessions", json={"title": case.name}).json()["session"]["id"]
    base = f"/api/sessions/{session}"
    if case.kind in ("lore-test", "turn"):
        made = client.post(
            f"{base}/imports/lorebook", params={"name": "book"}, content=case.data, timeout=120
        )
        if made.status_code != 200:
            return "crashed", f"setup: {made.status_code} {made.text[:200]}", 0.0, 0.0
    send: Callable[[], httpx.Response] = {
        "lorebook": lambda: client.post(
            f"{base}/imports/lorebook", params={"name": "book"}, content=case.data, timeout=timeout
        ),
        "card": lambda: client.post(
            f"{base}/imports/card",
            params={"filename": case.filename},
            content=case.data,
            timeout=timeout,
        ),
        "chat": lambda: client.post(
            "/api/imports/chat",
            params={"filename": case.filename},
            content=case.data,
            timeout=timeout,
        ),
        "tree": lambda: client.post(
            "/api/imports/tree",
            params={"filename": case.filename, "new_ids": "true"},
            content=case.data,
            timeout=timeout,
        ),
        "lore-test": lambda: client.post(
            f"{base}/lore/test", json={"text": case.text}, timeout=timeout
        ),
        "turn": lambda: client.post(
            f"{base}/turns", json={"kind": "say", "text": case.text}, timeout=timeout
        ),
    }[case.kind]
    before = server.reset_peak()
    started = time.perf_counter()
    try:
        response = send()
    except httpx.TimeoutException:
        return (
            "timeout",
            f"no answer in {timeout:.0f} s",
            (time.perf_counter() - started) * 1000,
            server.status("VmHWM") - before,
        )
    except httpx.TransportError as error:
        mb = server.status("VmHWM") - before if server.alive() else 0.0
        return (
            "crashed",
            f"the server dropped the request ({error!r})",
            (time.perf_counter() - started) * 1000,
            mb,
        )
    ms = (time.perf_counter() - started) * 1000
    mb = server.status("VmHWM") - before
    kind = response.headers.get("content-type", "")
    last_event = response.text.rstrip().rsplit("\n\n", 1)[-1] if "event-stream" in kind else ""
    if last_event.startswith("event: error"):  # a turn's events: the last says how it ended
        return "crashed", f"{response.status_code} {last_event[:150]}", ms, mb
    if response.is_success:
        return "imported", f"{response.status_code}", ms, mb
    detail = ""
    if kind.startswith("application/problem+json"):
        detail = str(response.json().get("detail", ""))
    if 400 <= response.status_code < 500 and kind.startswith("application/problem+json"):
        return "refused", f"{response.status_code} {detail}", ms, mb
    return "crashed", f"{response.status_code} {kind} {detail or response.text[:150]}", ms, mb


def health_under(
    case: Case, model: ModelServer, timeout: float
) -> tuple[float, tuple[str, str, float, float]]:
    """The worst ``GET /api/health`` latency while ``case`` runs on a fresh server, and
    the case's outcome there (as :func:`api_case`)."""
    with tempfile.TemporaryDirectory() as name:
        server = Server(Path(name), model)
        worst, stop = [0.0], threading.Event()

        def poll() -> None:
            with httpx.Client(base_url=server.url, timeout=timeout) as probe:
                while not stop.is_set():
                    started = time.perf_counter()
                    with contextlib.suppress(httpx.HTTPError):
                        probe.get("/api/health")
                    worst[0] = max(worst[0], (time.perf_counter() - started) * 1000)
                    time.sleep(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            outcome = api_case(server, case, timeout)
        finally:
            stop.set()
            poller.join(timeout + 5)
            server.stop()
        return worst[0], outcome


def tree_of_nodes(count: int) -> Case:
    return Case(
        f"tree-{count // 1000}k-nodes",
        "tree",
        json.dumps(_tree_with_nodes(_tree_document(), count)).encode(),
        "tree.json",
    )


def large_file(case: Case, model: ModelServer, timeout: float) -> None:
    """A large valid file (not hostile, not counted in the last line): how long its
    import takes, what it costs the server, and whether the server stays responsive."""
    worst_health, (outcome, said, ms, mb) = health_under(case, model, max(timeout, 120.0))
    print(
        f"large valid file (not counted above): api {case.name} {len(case.data) / 1e6:.0f} MB "
        f"{outcome} ({said[:60]}) in {ms:.0f} ms, server +{mb:.0f} MB, worst GET /api/health "
        f"{worst_health:.0f} ms meanwhile",
        flush=True,
    )


# -- the run ------------------------------------------------------------------------------


def _measured(
    surface: str,
    case: Case,
    measured: tuple[str, str, float, float],
    base: dict[str, tuple[float, float]],
    results: list[Result],
) -> None:
    """Print a case's figures: a baseline (the same work on the real file, so what is
    warmed up or loaded anyway) is kept in ``base``; any other case is a :class:`Result`
    above its baseline, added to ``results``."""
    outcome, said, ms, mb = measured
    if case.baseline:
        base[case.name] = (ms, mb)
        print(
            f"{surface} {case.name:<28} baseline {ms:>9.0f} ms {mb:>8.1f} MB"
            f"  ({outcome} {said[:80]})",
            flush=True,
        )
        return
    ref_ms, ref_mb = base.get(baseline_of(case), (0.0, 0.0))
    result = Result(
        surface, case.name, outcome, max(ms - ref_ms, 0.0), max(mb - ref_mb, 0.0), said, ms, mb
    )
    results.append(result)
    print(result.line(), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case")
    parser.add_argument("--only", default="", help="only the cases whose name holds this")
    parser.add_argument("--no-api", action="store_true")
    parser.add_argument("--no-cli", action="store_true")
    args = parser.parse_args()

    cases = [c for c in catalogue() if c.baseline or args.only in c.name]
    print(
        f"hostile files: {sum(not c.baseline for c in cases)} cases, "
        f"timeout {args.timeout:.0f} s per case",
        flush=True,
    )
    results: list[Result] = []
    with ModelServer(script) as model:
        if not args.no_cli:
            base: dict[str, tuple[float, float]] = {}
            for case in cases:
                outcome, said, ms, mb = cli_case(case, model, args.timeout)
                _measured("cli", case, (outcome, said, ms, mb), base, results)
        if not args.no_api:
            folder = Path(tempfile.mkdtemp(prefix="hostile-api-"))
            server = Server(folder, model)
            try:
                api_base: dict[str, tuple[float, float]] = {}
                for case in cases:
                    try:
                        outcome, said, ms, mb = api_case(server, case, args.timeout)
                    except httpx.HTTPError as error:  # the server gone (killed by memory?)
                        outcome, said, ms, mb = "crashed", f"no server: {error!r}", 0.0, 0.0
                    _measured("api", case, (outcome, said, ms, mb), api_base, results)
                    if outcome in ("timeout", "crashed"):
                        server.stop()
                        server = Server(Path(tempfile.mkdtemp(prefix="hostile-api-")), model)
            finally:
                server.stop()
            api = [r for r in results if r.surface == "api"]
            if api:
                slowest = max(api, key=lambda r: r.ms)
                case = next(c for c in cases if c.name == slowest.case)
                worst_health, (outcome, _, _, _) = health_under(case, model, args.timeout)
                print(
                    f"health while {case.name} ran ({outcome}): worst GET /api/health "
                    f"{worst_health:.0f} ms",
                    flush=True,
                )
        if not args.no_api and not args.only:
            large_file(tree_of_nodes(MANY), model, args.timeout)
    clean = sum(r.clean for r in results)
    worst_ms = max((r.ms for r in results), default=0.0)
    worst_mb = max((r.mb for r in results), default=0.0)
    unclean = [f"{r.surface}:{r.case}" for r in results if not r.clean]
    slow = [f"{r.surface}:{r.case}" for r in results if r.ms >= TARGET_MS]
    big = [f"{r.surface}:{r.case}" for r in results if r.mb >= TARGET_MB]
    print(f"not clean: {', '.join(unclean) or 'none'}")
    print(f"over {TARGET_MS:.0f} ms: {', '.join(slow) or 'none'}")
    print(f"over {TARGET_MB:.0f} MB: {', '.join(big) or 'none'}")
    print(
        f"hostile cases={len(results)} refused_clean={clean} worst_ms={worst_ms:.0f} "
        f"worst_mb={worst_mb:.0f}"
    )


if __name__ == "__main__":
    main()
