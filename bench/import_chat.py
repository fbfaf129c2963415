"""Importing a long SillyTavern chat: bytes written to reach it, import time, projection latency.

Run from the repository root::

    .venv/bin/python bench/import_chat.py            # 20,000 messages
    .venv/bin/python bench/import_chat.py --quick    # 2,000 messages, 20 requests a client

The chat is generated from a seed, as SillyTavern writes it: the header line of 1.15
(``chat_metadata`` with an ``integrity`` id, the Author's Note keys, ``timedWorldInfo``,
variables; ``user_name`` / ``character_name`` ``"unused"``), then the character's
greeting and user / character messages alternating. User messages (200-700
characters) have the fields of ``sendMessageAsUser`` (name, is_user, is_system,
send_date, mes, ``extra`` with ``isSmallSys`` and ``token_count``, ``force_avatar``);
the character's replies (400-1,500 characters, ``*actions*`` and quoted speech) have
those of ``saveReply`` in that order (``extra`` with api, model, token_count and, one in
ten, ``reasoning``; name, is_user, send_date, mes, title, gen_started, gen_finished,
swipe_info, swipe_id, swipes): like SillyTavern, every generated reply carries
``swipes`` / ``swipe_info``, with one swipe, except every fifth message (messages
4, 8, 14, 18, 24... : 2 in every 10, all of them replies), which has 3 swipes, each
with its own send_date, generation times and ``extra``, ``swipe_id`` one of the three
(seeded) and the message's fields those of the chosen swipe. Dates are ISO with
milliseconds, as ``JSON.stringify`` writes a ``Date``. Lines are compact JSON joined by
``\\n`` without a final newline (``chatData.map(JSON.stringify).join('\\n')``).

- **ours** -- ``clotho.stchat.import_chat(store, data, name)`` of the file's bytes into
  a fresh SQLite file (``Store.open("sqlite:///...")``: WAL, ``synchronous=NORMAL``)
  in a temporary directory. ``import_s`` is the wall time of ``import_chat`` alone.
  Its bytes are counted from before ``Store.open`` (so the schema's creation is
  included) to after ``Store.close`` (the last connection closing checkpoints the WAL
  into the database file and deletes it), so everything SQLite wrote is counted.
- **peer** -- SillyTavern's way of saving, simulated in this process for the same
  messages in the same order: a save after every new message and after every extra
  swipe (each swipe is a generation, and ``Generate`` ends with ``saveChatConditional``;
  ``sendMessageAsUser`` saves after pushing the user's message), each save sending
  the whole chat, which the server writes whole (``src/endpoints/chats.js`` ``/save``:
  ``writeFileAtomicSync(filePath, chatData.map(JSON.stringify).join('\\n'))``;
  ``public/script.js`` ``saveChat``; read at SillyTavern 1.12.6). Each save here opens a
  temporary file with ``"wb"``, writes the header and every line, and renames it over
  the chat file (as write-file-atomic does; its fsync is left out: it writes no bytes).
  A message with swipes is saved as it was at each generation (its first swipe shown,
  then the second...); when the chosen swipe is not the last one generated, the swipe
  back shows from the next save on (SillyTavern also saves after a swipe back, with
  ``saveChatDebounced``, and writes a throttled backup copy of the chat every 10 s:
  neither is counted, so the peer's figure is a lower bound).

Bytes are the process's own counters in ``/proc/self/io``, read before and after each
side, nothing else running in between: ``wchar`` (bytes handed to ``write()`` /
``pwrite()``, whatever the file system; the figure of the ratio), and ``write_bytes``
(bytes of page cache made dirty, i.e. headed for the storage layer; 0 on tmpfs) with
``cancelled_write_bytes`` (dirty bytes dropped before reaching storage because their
file was truncated or deleted). The final file sizes are printed for context. Writing
tens of GB takes minutes, so the peer writes its first saves for real until
``--peer-real-gb`` GB (default 4) have been written, then only computes the size of
the middle saves (a save's size is known exactly: the header, the lines so far and the
message as shown, joined by newlines), then writes its last save for real; the
counters of the real saves must equal their computed sizes (asserted), which checks
the computation. ``--peer-all`` writes every save. The peer's time is measured on its
real saves and extrapolated to all of them (informative).

Both sides must end with the same chat: the peer's final file, parsed, must equal
``clotho.stchat.export_chat(store, session.id)`` of ours, parsed (header and every
message, all fields); whether the two are byte-identical is printed too.

**API latency** -- our HTTP API as a real server process,
``python -m clotho --db sqlite:///<ours> serve --host 127.0.0.1 --port <free port>``
with ``CLOTHO_API_TOKEN`` set, ready once ``GET /api/health`` answers. One request
first (its time printed: a fresh server renders the projection; the API keeps the
rendered response per session version, so later ones are served from it). Then
``--clients`` threads (default 8), each with its own keep-alive connection and
``Authorization: Bearer <token>``, do ``--warmup`` untimed requests, wait for each
other, then ``--requests`` timed ``GET /api/sessions/{id}/projection`` each (default
50); a latency is ``time.perf_counter`` around sending the request and reading the
whole body (status 200 required). Then one client alone does ``--requests`` more (the
floor under the concurrency). Printed: p50 and p99 (nearest rank) over all the
concurrent requests, mean and max, the response's size, its ``total`` and number of
nodes, and whether it holds the first and last messages' texts. The clients use the
standard library's ``http.client`` by default: at depth 20,000 the body is ~19.5 MB,
which ``httpx`` takes 50-100 ms of its own to read on a 2-CPU machine (``curl`` and
``http.client`` 15-35 ms), more than the server; ``--client httpx`` uses it instead.
The server and the clients share the machine's CPUs (their number is printed). The
server is stopped at the end, also on errors. ``--no-api`` skips this part
(``p99_ms=n/a``).

Targets (from the issue): bytes ratio (peer ``wchar`` / ours) >= 100, import under
10 s, p99 under 100 ms. Save the output with ``| tee bench/results/import_chat.txt``.
The last line is ``ratio bytes_written=<peer / ours> import_s=<ours> p99_ms=<ours> at
<N> messages``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _texts import line

from clotho.stchat import export_chat, import_chat, parse_chat
from mnemosyne import Store

SEED = 20_260_612
CHAR, USER = "Seraphina", "Traveler"
START = datetime(2025, 3, 1, 18, 0, tzinfo=UTC)
SWIPES = 3
TOKEN = "bench-import-chat-token"
TARGET_RATIO, TARGET_IMPORT_S, TARGET_P99_MS = 100.0, 10.0, 100.0
COUNTERS = ("wchar", "write_bytes", "cancelled_write_bytes")
REPO = Path(__file__).resolve().parent.parent

# -- the chat -----------------------------------------------------------------------------


def _date(moment: datetime) -> str:
    """As ``JSON.stringify(new Date())``: ``2025-03-01T18:00:00.000Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _reply_text(rng: random.Random, index: int, size: int) -> str:
    action = rng.randint(size // 5, size // 3)
    speech = rng.randint(size // 4, size // 2)
    first = line(rng, f"*{CHAR} (reply {index})", action) + "*"
    said = '"' + line(rng, "", speech).strip().capitalize() + '."'
    rest = max(size - len(first) - len(said) - 2, 20)
    return f"{first} {said} *{line(rng, '', rest).strip()}*"


def _user_text(rng: random.Random, index: int, size: int) -> str:
    if rng.random() < 0.4:
        action = line(rng, f"*I (message {index})", size // 3) + "*"
        return f'{action} "{line(rng, "", size - len(action) - 3).strip().capitalize()}"'
    return line(rng, f"(message {index}) I", size)


def has_swipes(index: int) -> bool:
    """Every fifth message: 2 in every 10, both replies (even indices)."""
    return index % 10 in (4, 8)


def make_chat(count: int, seed: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and ``count`` messages (see the module's docstring)."""
    rng = random.Random(seed)
    header = {
        "chat_metadata": {
            "integrity": "%08x-%04x-4%03x-a%03x-%012x"  # noqa: UP031
            % (
                rng.getrandbits(32),
                rng.getrandbits(16),
                rng.getrandbits(12),
                rng.getrandbits(12),
                rng.getrandbits(48),
            ),
            "note_prompt": "",
            "note_interval": 1,
            "note_position": 1,
            "note_depth": 4,
            "note_role": 0,
            "timedWorldInfo": {"sticky": {}, "cooldown": {}},
            "variables": {"hp": "30", "gold": "12", "quest": "the drowned king"},
            "tainted": True,
        },
        "user_name": "unused",
        "character_name": "unused",
    }
    now = START
    messages: list[dict[str, Any]] = []
    for index in range(count):
        if index == 0:  # the greeting, as a new chat starts
            text = _reply_text(rng, index, rng.randint(600, 1500))
            messages.append(
                {
                    "name": CHAR,
                    "is_user": False,
                    "is_system": False,
                    "send_date": _date(now),
                    "mes": text,
                    "extra": {},
                }
            )
        elif index % 2 == 1:
            now += timedelta(seconds=rng.randint(15, 240), milliseconds=rng.randint(0, 999))
            text = _user_text(rng, index, rng.randint(200, 700))
            messages.append(
                {
                    "name": USER,
                    "is_user": True,
                    "is_system": False,
                    "send_date": _date(now),
                    "mes": text,
                    "extra": {"isSmallSys": False, "token_count": _tokens(text)},
                    "force_avatar": "User Avatars/1735689600000-Traveler.png",
                }
            )
        else:
            swipes, infos = [], []
            for _ in range(SWIPES if has_swipes(index) else 1):
                started = now + timedelta(seconds=1, milliseconds=rng.randint(0, 999))
                finished = started + timedelta(
                    seconds=rng.randint(4, 40), milliseconds=rng.randint(0, 999)
                )
                now = finished
                text = _reply_text(rng, index, rng.randint(400, 1500))
                extra: dict[str, Any] = {"api": "openai", "model": "gpt-4o-mini"}
                if rng.random() < 0.1:
                    extra["reasoning"] = line(rng, "The user", rng.randint(150, 500))
                    extra["reasoning_duration"] = rng.randint(800, 9000)
                extra["token_count"] = _tokens(text)
                swipes.append(text)
                infos.append(
                    {
                        "send_date": _date(finished),
                        "gen_started": _date(started),
                        "gen_finished": _date(finished),
                        "extra": extra,
                    }
                )
            chosen = rng.randrange(len(swipes))
            messages.append(shown(CHAR, swipes, infos, chosen, len(swipes)))
    return header, messages


def shown(
    name: str, swipes: list[str], infos: list[dict[str, Any]], chosen: int, generated: int
) -> dict[str, Any]:
    """A reply as SillyTavern holds it once ``generated`` swipes exist, ``chosen`` shown."""
    info = infos[chosen]
    return {
        "extra": json.loads(json.dumps(info["extra"])),
        "name": name,
        "is_user": False,
        "send_date": info["send_date"],
        "mes": swipes[chosen],
        "title": "",
        "gen_started": info["gen_started"],
        "gen_finished": info["gen_finished"],
        "swipe_info": infos[:generated],
        "swipe_id": chosen,
        "swipes": swipes[:generated],
    }


def dumps(document: dict[str, Any]) -> bytes:
    """``JSON.stringify``: compact, non-ASCII as is."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def states(message: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The message as each save after its arrival shows it (one per generation)."""
    swipes = message.get("swipes")
    if not swipes or len(swipes) == 1:
        yield message
        return
    for generated in range(1, len(swipes) + 1):
        yield shown(message["name"], swipes, message["swipe_info"], generated - 1, generated)


# -- counters -----------------------------------------------------------------------------


def counters() -> dict[str, int]:
    values = {}
    with open("/proc/self/io") as stream:
        for row in stream:
            key, _, value = row.partition(":")
            values[key.strip()] = int(value)
    return {key: values.get(key, 0) for key in COUNTERS}


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {key: after[key] - before[key] for key in COUNTERS}


def size_of(*paths: Path) -> int:
    return sum(path.stat().st_size for path in paths if path.exists())


# -- ours ---------------------------------------------------------------------------------


@dataclass
class Ours:
    session_id: str
    import_s: float
    open_s: float
    io: dict[str, int]
    io_import: dict[str, int]
    db_bytes: int
    wal_before_close: int
    db_before_close: int


def run_ours(db: Path, data: bytes, name: str) -> Ours:
    url = f"sqlite:///{db}"
    wal = db.with_name(db.name + "-wal")
    start_io = counters()
    started = time.perf_counter()
    store = Store.open(url)
    open_s = time.perf_counter() - started
    try:
        before = counters()
        started = time.perf_counter()
        session = import_chat(store, data, name)
        import_s = time.perf_counter() - started
        after_import = counters()
        db_before, wal_before = size_of(db), size_of(wal)
    finally:
        store.close()
    end_io = counters()
    return Ours(
        session_id=session.id,
        import_s=import_s,
        open_s=open_s,
        io=delta(start_io, end_io),
        io_import=delta(before, after_import),
        db_bytes=size_of(db, wal),
        wal_before_close=wal_before,
        db_before_close=db_before,
    )


# -- the peer -----------------------------------------------------------------------------


@dataclass
class Peer:
    saves: int
    real_saves: int
    bytes_total: int
    io_real: dict[str, int]
    computed_real: int
    real_s: float
    file_bytes: int

    @property
    def estimated_s(self) -> float:
        return self.real_s * self.bytes_total / max(self.computed_real, 1)


def run_peer(
    path: Path, header: dict[str, Any], messages: Sequence[dict[str, Any]], real_limit: float
) -> Peer:
    """Every save rewrites the whole file; the first saves up to ``real_limit`` bytes and
    the last one are written, the others' sizes computed."""
    temporary = path.with_name(path.name + ".tmp")
    plan: list[tuple[int, bytes]] = []  # (messages before, the last message as shown)
    for index, message in enumerate(messages):
        for state in states(message):
            plan.append((index, dumps(state)))
    finals = [dumps(message) for message in messages]
    if plan[-1][1] != finals[-1]:  # the chat ends on a swipe back: one more save shows it
        plan.append((len(messages) - 1, finals[-1]))
    head = dumps(header)
    written = bytearray(head)  # the final lines of the messages before the current one
    done = 0  # messages in ``written``
    total = computed_real = real_saves = 0
    real_s = 0.0
    io_real = dict.fromkeys(COUNTERS, 0)
    prefix = len(head)  # computed size of ``written``
    for number, (index, last) in enumerate(plan):
        while done < index:
            written += b"\n" + finals[done]
            prefix += 1 + len(finals[done])
            done += 1
        size = prefix + 1 + len(last)
        total += size
        is_last = number == len(plan) - 1
        if computed_real < real_limit or is_last:
            before = counters()
            started = time.perf_counter()
            with open(temporary, "wb") as stream:
                stream.write(written)
                stream.write(b"\n" + last)
            os.replace(temporary, path)
            real_s += time.perf_counter() - started
            for key, value in delta(before, counters()).items():
                io_real[key] += value
            computed_real += size
            real_saves += 1
    return Peer(
        saves=len(plan),
        real_saves=real_saves,
        bytes_total=total,
        io_real=io_real,
        computed_real=computed_real,
        real_s=real_s,
        file_bytes=path.stat().st_size,
    )


# -- the API ------------------------------------------------------------------------------


@dataclass
class Latency:
    p50_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float
    requests: int
    response_bytes: int
    first_ms: float
    alone_p50_ms: float
    alone_p99_ms: float
    """The first request, before the warm-up (a fresh server)."""
    nodes: int | None
    total: int | None
    has_first: bool
    has_last: bool


class _Client:
    """One client's keep-alive connection: ``get()`` sends the request and reads the
    whole body (status 200 required)."""

    def __init__(self, kind: str, port: int, url: str, headers: dict[str, str]) -> None:
        self.kind, self.url, self.headers = kind, url, headers
        self.path = httpx.URL(url).raw_path.decode()
        if kind == "httpx":
            self.httpx = httpx.Client(headers=headers, timeout=120)
        else:
            self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def get(self) -> bytes:
        if self.kind == "httpx":
            response = self.httpx.get(self.url)
            if response.status_code != 200:
                raise RuntimeError(f"GET {self.path}: {response.status_code} {response.text[:300]}")
            return response.content
        self.conn.request("GET", self.path, headers=self.headers)
        answer = self.conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise RuntimeError(f"GET {self.path}: {answer.status} {body[:300]!r}")
        return body

    def __enter__(self) -> _Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.kind == "httpx":
            self.httpx.close()
        else:
            self.conn.close()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


def measure_api(
    db: Path,
    session_id: str,
    logs: Path,
    clients: int,
    requests: int,
    warmup: int,
    texts: tuple[str, str],
    kind: str,
) -> Latency:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, CLOTHO_API_TOKEN=TOKEN)
    command = [sys.executable, "-m", "clotho", "--db", f"sqlite:///{db}", "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    out, err = open(logs / "serve.out", "wb"), open(logs / "serve.err", "wb")  # noqa: SIM115
    server = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise RuntimeError(
                    f"`{' '.join(command)}` exited with {server.returncode}: "
                    + (logs / "serve.err").read_text(errors="replace")[-2000:]
                )
            try:
                if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the API did not answer on {base}/api/health within 60 s")
            time.sleep(0.1)
        url = f"{base}/api/sessions/{session_id}/projection"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with _Client(kind, port, url, headers) as http:
            started = time.perf_counter()
            content = http.get()
            first_ms = (time.perf_counter() - started) * 1000
        body = content.decode()
        document = json.loads(content)
        shown = document.get("nodes") if isinstance(document, dict) else None
        total = document.get("total") if isinstance(document, dict) else None
        quoted = [json.dumps(text, ensure_ascii=False)[1:-1] for text in texts]
        ready = threading.Barrier(clients)
        latencies: list[list[float]] = [[] for _ in range(clients)]
        failures: list[Exception] = []

        def client(slot: int) -> None:
            try:
                with _Client(kind, port, url, headers) as http:
                    for _ in range(warmup):
                        http.get()
                    ready.wait()
                    for _ in range(requests):
                        started = time.perf_counter()
                        http.get()
                        latencies[slot].append((time.perf_counter() - started) * 1000)
            except Exception as error:  # noqa: BLE001 -- raised again by the main thread
                failures.append(error)
                ready.abort()

        threads = [threading.Thread(target=client, args=(slot,)) for slot in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:
            raise RuntimeError(f"a client failed: {failures[0]!r}") from failures[0]
        every = [value for values in latencies for value in values]
        alone = []  # the same requests from one client at a time: the floor
        with _Client(kind, port, url, headers) as http:
            for _ in range(requests):
                started = time.perf_counter()
                http.get()
                alone.append((time.perf_counter() - started) * 1000)
        return Latency(
            alone_p50_ms=_percentile(alone, 0.50),
            alone_p99_ms=_percentile(alone, 0.99),
            p50_ms=_percentile(every, 0.50),
            p99_ms=_percentile(every, 0.99),
            mean_ms=statistics.fmean(every),
            max_ms=max(every),
            requests=len(every),
            response_bytes=len(content),
            first_ms=first_ms,
            nodes=len(shown) if isinstance(shown, list) else None,
            total=total if isinstance(total, int) else None,
            has_first=quoted[0] in body,
            has_last=quoted[1] in body,
        )
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        out.close()
        err.close()


# -- the run ------------------------------------------------------------------------------


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"


def run(args: argparse.Namespace, count: int, requests: int, work: Path) -> int:
    started = time.perf_counter()
    header, messages = make_chat(count, SEED)
    data = b"\n".join([dumps(header), *(dumps(message) for message in messages)])
    swiped = sum(1 for message in messages if len(message.get("swipes", ())) > 1)
    nodes = sum(len(message.get("swipes", ())) or 1 for message in messages)
    lengths = [len(text) for m in messages for text in (m.get("swipes") or [m["mes"]])]
    print(
        f"\n== {count:,} messages: {swiped:,} with {SWIPES} swipes ({nodes:,} texts), "
        f"texts {min(lengths)}-{max(lengths)} characters (mean {statistics.fmean(lengths):.0f}), "
        f"chat file {_mb(len(data))}; generated in {time.perf_counter() - started:.1f} s =="
    )
    name = "Seraphina - 2025-03-01@18h00m00s.jsonl"
    db = work / "ours.db"

    ours = run_ours(db, data, name)
    peer_dir = Path(args.peer_dir) if args.peer_dir else work
    peer_dir.mkdir(parents=True, exist_ok=True)
    peer_path = Path(tempfile.mkdtemp(prefix="peer-", dir=peer_dir)) / name
    try:
        limit = math.inf if args.peer_all else args.peer_real_gb * 1e9
        peer = run_peer(peer_path, header, messages, limit)
        final = peer_path.read_bytes()
    finally:
        if not args.keep:
            shutil.rmtree(peer_path.parent, ignore_errors=True)
    assert final == data, "the peer's final file is not the chat"
    assert peer.io_real["wchar"] == peer.computed_real, (
        f"the peer's counter {peer.io_real['wchar']} != computed {peer.computed_real}"
    )

    with Store.open(f"sqlite:///{db}") as store:
        exported = export_chat(store, ours.session_id)
    assert parse_chat(final, "peer") == parse_chat(exported.text, "ours"), "different chats"
    identical = exported.text.rstrip("\n").encode() == final
    print(
        f"same chat on both sides: yes ({exported.messages:,} messages, header and every "
        f"field equal; byte-identical files: {'yes' if identical else 'no'})"
    )

    latency = None
    if not args.no_api:
        texts = (messages[0]["mes"], messages[-1]["mes"])
        latency = measure_api(
            db, ours.session_id, work, args.clients, requests, args.warmup, texts, args.client
        )

    computed = peer.saves - peer.real_saves
    print(
        f"\n{'side':<6} {'seconds':>9} {'saves':>7} {'wchar bytes':>17} {'write_bytes':>15} "
        f"{'cancelled':>13} {'file after':>11}"
    )
    print(
        f"{'ours':<6} {ours.import_s:>9.2f} {1:>7} {ours.io['wchar']:>17,} "
        f"{ours.io['write_bytes']:>15,} {ours.io['cancelled_write_bytes']:>13,} "
        f"{_mb(ours.db_bytes):>11}"
    )
    estimated = "~" if computed else ""
    print(
        f"{'peer':<6} {estimated + format(peer.estimated_s, '.1f'):>9} {peer.saves:>7,} "
        f"{peer.bytes_total:>17,} {peer.io_real['write_bytes']:>15,}{'*' if computed else ' '}"
        f"{peer.io_real['cancelled_write_bytes']:>13,} {_mb(peer.file_bytes):>11}"
    )
    print(
        f"ours: import_chat {ours.import_s:.2f} s (Store.open and schema {ours.open_s:.2f} s "
        f"before it); bytes from before Store.open to after Store.close; of them import_chat "
        f"itself wrote {ours.io_import['wchar']:,} (the rest: schema, WAL checkpoint at close). "
        f"Before close: database {_mb(ours.db_before_close)} + WAL {_mb(ours.wal_before_close)}; "
        f"after: {_mb(ours.db_bytes)} (WAL checkpointed and removed)."
    )
    if computed:
        print(
            f"peer: {peer.real_saves:,} saves written for real ({peer.computed_real:,} bytes, "
            f"counter equal to the computed sizes), the other {computed:,} computed exactly "
            f"from the file size at each save; *write_bytes / cancelled: the real saves "
            f"only; seconds extrapolated from the real saves ({peer.real_s:.1f} s for "
            f"{_mb(peer.computed_real)}; to {peer_dir})."
        )
    else:
        print(
            f"peer: all {peer.saves:,} saves written for real in {peer.real_s:.1f} s "
            f"(to {peer_dir}); wchar equal to the computed sizes."
        )
    ratio = peer.bytes_total / ours.io["wchar"]
    if ours.io["write_bytes"] and peer.io_real["write_bytes"]:
        per_byte = peer.io_real["write_bytes"] / peer.io_real["wchar"]
        print(
            f"write_bytes ratio (peer's real saves scaled to all of them at their "
            f"write_bytes / wchar = {per_byte:.3f}): "
            f"{peer.bytes_total * per_byte / ours.io['write_bytes']:.1f}"
        )
    print(f"bytes ratio (wchar, peer / ours): {ratio:.1f}")

    p99 = "n/a"
    if latency is not None:
        p99 = f"{latency.p99_ms:.1f}"
        print(
            f"\nGET /api/sessions/{{id}}/projection at depth {count:,}, {args.client}: "
            f"{args.clients} clients x "
            f"{requests} requests ({args.warmup} warm-up each, untimed), {latency.requests} "
            f"timed: p50 {latency.p50_ms:.1f} ms, p99 {latency.p99_ms:.1f} ms, mean "
            f"{latency.mean_ms:.1f} ms, max {latency.max_ms:.1f} ms; response "
            f"{latency.response_bytes:,} bytes, {latency.nodes} nodes (total {latency.total}); "
            f"first and last messages in it: {'yes' if latency.has_first else 'no'} / "
            f"{'yes' if latency.has_last else 'no'}; the very first request (before the "
            f"warm-up) took {latency.first_ms:.1f} ms; one client alone, {requests} requests: "
            f"p50 {latency.alone_p50_ms:.1f} ms, p99 {latency.alone_p99_ms:.1f} ms "
            f"({os.cpu_count()} CPUs for the server and the clients)"
        )

    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    targets = (
        f"\ntargets at {count} messages: bytes_written {ratio:.1f} >= {TARGET_RATIO:g} "
        f"{ok(ratio >= TARGET_RATIO)}; import_s {ours.import_s:.2f} < {TARGET_IMPORT_S:g} "
        f"{ok(ours.import_s < TARGET_IMPORT_S)}"
    )
    if latency is not None:
        targets += f"; p99_ms {p99} < {TARGET_P99_MS:g} {ok(latency.p99_ms < TARGET_P99_MS)}"
    print(targets)
    print(
        f"ratio bytes_written={ratio:.1f} import_s={ours.import_s:.2f} p99_ms={p99} "
        f"at {count} messages"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=50, help="timed requests per client")
    parser.add_argument("--warmup", type=int, default=3, help="untimed requests per client")
    parser.add_argument("--quick", action="store_true", help="2,000 messages, 20 requests")
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    parser.add_argument(
        "--peer-real-gb", type=float, default=4.0, help="the peer's saves written for real (GB)"
    )
    parser.add_argument("--peer-all", action="store_true", help="write every save of the peer")
    parser.add_argument("--peer-dir", help="where the peer writes (default: the temporary dir)")
    parser.add_argument("--no-api", action="store_true", help="skip the API latency part")
    parser.add_argument(
        "--client",
        choices=("http.client", "httpx"),
        default="http.client",
        help="the timed clients' HTTP library (default: the standard library's)",
    )
    args = parser.parse_args(argv)
    count, requests = (2000, 20) if args.quick else (args.messages, args.requests)
    if count < 2 or args.clients < 1 or requests < 1:
        parser.error("--messages must be at least 2, --clients and --requests at least 1")
    work = Path(tempfile.mkdtemp(prefix="clotho-bench-import-chat-"))
    try:
        return run(args, count, requests, work)
    finally:
        if args.keep:
            print(f"(files kept in {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
