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

**API latency** -- our HTTP API as a real server process, ``python -m clotho --db
sqlite:///<ours> serve --host 127.0.0.1 --port <free port>`` (``--server-workers N``
adds ``--workers N``) with ``CLOTHO_API_TOKEN`` set, ready once ``GET /api/health``
answers. One request first (its time printed: a fresh server renders the projection; the
API keeps the rendered response per session version, so later ones are served from it,
answered before routing, their bodies written by threads: ``clotho/api/rendered.py``,
``clotho/api/transport.py``). Then ``--clients`` clients (default 8) at once, each with
its own keep-alive ``http.client`` connection and ``Authorization: Bearer <token>``: by
default each is a process of its own (``--clients-in processes``: multiprocessing's
spawn, fresh interpreters that do not share this process's GIL or its heap;
``--clients-in threads``: threads of this process). Each does ``--warmup`` untimed
requests once all are up, one more once all are warm (so that no connection has idled
past the server's 5 s keep-alive timeout meanwhile), then, all starting together,
``--requests`` timed ``GET /api/sessions/{id}/projection`` (default 50); a latency is
``time.perf_counter`` around sending the request and reading the whole body (status 200
required, a body shorter than its Content-Length raises). Every timed body is then
checked (after the clock stopped) to hold the first and the last messages' texts, and
let go before the next request: a client that still held the last 19.5 MB body while
reading the next one had its allocator take fresh memory for it, and the first timed
round, eight clients faulting in 20 MB each at once, stalled for 150-300 ms on this
virtual machine (the worst requests of a run were all there). The same is done again
with the clients run the other way, for comparison (``--no-compare`` skips it), then by
one client alone (the floor under the concurrency). Printed: p50 and p99 (nearest rank)
over all the concurrent requests, mean and max, the response's size, its ``total`` and
number of nodes, and where the CPU went meanwhile: the server's processes
(``/proc/<pid>/stat``), the clients (their threads' ``getrusage``) and every other
process on the machine (``/proc/stat`` minus ours), with the latency that alone would
give if the requests were CPU-bound (requests in flight x CPU a request / CPUs left).
The server and the clients share the machine's CPUs (a response of 19.5 MB costs ~5 ms
of CPU to send and ~5 ms to receive over loopback), and so do other people's jobs on a
shared machine: compare runs with the ``others`` figure. ``--client httpx`` uses
``httpx`` instead of ``http.client`` (it takes 50-100 ms of its own to read 19.5 MB on a
2-CPU machine). The server is stopped at the end, also on errors. ``--no-api`` skips
this part (``p99_ms=n/a``).

Targets (from the issue): bytes ratio (peer ``wchar`` / ours) >= 100, import under
10 s, p99 under 100 ms. Save the output with ``| tee bench/results/import_chat.txt``.
The last line is ``ratio bytes_written=<peer / ours> import_s=<ours> p99_ms=<ours> at
<N> messages``.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import multiprocessing
import os
import random
import resource
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

# clotho.stchat and mnemosyne are imported where used: the client processes import this
# module (multiprocessing's spawn) and need neither.

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
    from clotho.stchat import import_chat
    from mnemosyne import Store

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
    """The first request, before the warm-up (a fresh server renders the projection)."""
    alone_p50_ms: float
    alone_p99_ms: float
    nodes: int | None
    total: int | None
    has_first: bool
    has_last: bool
    checked: int
    """Timed responses (concurrent and alone) found holding the first and last texts."""
    checked_of: int
    phase: Usage
    """Where the CPU went during the concurrent timed requests."""
    other: tuple[float, float, Usage] | None = None
    """p50, p99 and CPU with the clients run the other way (--compare)."""


@dataclass
class Usage:
    """CPU seconds spent during a timed phase, by whom."""

    elapsed_s: float
    server_s: float
    server_processes: int
    clients_s: float
    ours_s: float
    """The server, this process and the client processes."""
    busy_s: float
    """Every CPU of the machine (``/proc/stat``), all processes."""
    cpus: int

    @property
    def others_cores(self) -> float:
        return max(self.busy_s - self.ours_s, 0.0) / self.elapsed_s

    @property
    def busy_cores(self) -> float:
        return self.busy_s / self.elapsed_s


class _Client:
    """One client's keep-alive connection: ``get()`` sends the request and reads the
    whole body (status 200 required; a body shorter than its Content-Length raises)."""

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


@dataclass(frozen=True)
class _Plan:
    """What every client does (picklable: handed to the client processes)."""

    kind: str
    port: int
    url: str
    headers: dict[str, str]
    warmup: int
    requests: int
    first: bytes
    """The first message's text as the response holds it (near its start)."""
    last: bytes
    """The last message's (near its end)."""


def _holds(body: bytes, plan: _Plan) -> bool:
    return body.find(plan.first) >= 0 and body.rfind(plan.last) >= 0


def _client_run(plan: _Plan, barriers: _Barriers) -> tuple[list[float], int, float]:
    """One client: its connection and warm-up once every client is up, one more untimed
    request once every client is warm (none of the connections has then idled past the
    server's keep-alive timeout, 5 s, while the others started or warmed up), then,
    all at once, its timed requests. Returns the latencies (ms), how many bodies held
    both texts (checked after the clock stopped) and the CPU seconds this thread spent
    in the timed requests."""
    latencies: list[float] = []
    checked = 0
    barriers.up.wait(timeout=600)
    with _Client(plan.kind, plan.port, plan.url, plan.headers) as client:
        for _ in range(plan.warmup):
            client.get()
        barriers.warm.wait(timeout=600)
        client.get()
        barriers.ready.wait(timeout=600)
        before = resource.getrusage(resource.RUSAGE_THREAD)
        for _ in range(plan.requests):
            started = time.perf_counter()
            body = client.get()
            latencies.append((time.perf_counter() - started) * 1000)
            checked += _holds(body, plan)
            del body  # before the next request (see the module's docstring)
        after = resource.getrusage(resource.RUSAGE_THREAD)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return latencies, checked, cpu


@dataclass
class _Barriers:
    """Every client up (a client process has imported this module); every client warm;
    every client and the benchmark ready (the clock starts)."""

    up: Any
    warm: Any
    ready: Any

    def abort(self) -> None:
        for barrier in (self.up, self.warm, self.ready):
            barrier.abort()


def _client_process(plan: _Plan, barriers: _Barriers, results: Any) -> None:
    """The body of a client process: its results (or its error) go to ``results``."""
    try:
        results.put(_client_run(plan, barriers))
    except BaseException as error:  # noqa: BLE001 -- raised again by the benchmark's process
        barriers.abort()
        results.put(RuntimeError(f"a client process failed: {error!r}"))


def _cpu_seconds(pids: Sequence[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (every thread)
    return total / os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> list[int]:
    """``root`` and its descendants (the server and, with --workers, its workers)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, ()))
    return found


def _machine() -> tuple[float, int]:
    """Busy CPU seconds of the whole machine since boot (every CPU), and its CPUs."""
    with open("/proc/stat") as stream:
        rows = stream.read().splitlines()
    values = [int(value) for value in rows[0].split()[1:]]
    cpus = sum(1 for row in rows if row.startswith("cpu") and row[3:4].isdigit())
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / tick, cpus


def _timed(plan: _Plan, clients: int, mode: str, server: int) -> tuple[list[float], int, Usage]:
    """``clients`` clients at once, each with its own connection: threads of this
    process, or processes of their own (``spawn``: fresh interpreters, not copies of
    this one). Returns every latency, the bodies checked and the CPU used meanwhile."""
    errors: list[BaseException] = []
    runs: list[tuple[list[float], int, float]] = []
    workers: list[Any] = []
    if mode == "processes":
        context = multiprocessing.get_context("spawn")
        barriers = _Barriers(
            context.Barrier(clients), context.Barrier(clients), context.Barrier(clients + 1)
        )
        results: Any = context.Queue()
        workers = [
            context.Process(target=_client_process, args=(plan, barriers, results), daemon=True)
            for _ in range(clients)
        ]
    else:
        barriers = _Barriers(
            threading.Barrier(clients), threading.Barrier(clients), threading.Barrier(clients + 1)
        )

        def thread() -> None:
            try:
                runs.append(_client_run(plan, barriers))
            except BaseException as error:  # noqa: BLE001 -- raised again below
                errors.append(error)
                barriers.abort()

        workers = [threading.Thread(target=thread) for _ in range(clients)]
    for worker in workers:
        worker.start()
    servers = _tree(server)
    with contextlib.suppress(threading.BrokenBarrierError):  # a client failed: see below
        barriers.ready.wait(timeout=1200)
    started = time.perf_counter()
    busy_before, cpus = _machine()
    server_before = _cpu_seconds(servers)
    own_before = sum(os.times()[:2])
    if mode == "processes":
        for _ in workers:  # each puts one outcome: its results or its error
            outcome = results.get(timeout=1200)
            if isinstance(outcome, BaseException):
                errors.append(outcome)
            else:
                runs.append(outcome)
    else:
        for worker in workers:
            worker.join()
    elapsed = time.perf_counter() - started
    busy_after, _ = _machine()
    server_s = _cpu_seconds(servers) - server_before
    own_s = sum(os.times()[:2]) - own_before
    for worker in workers:
        worker.join(timeout=60)
        if mode == "processes" and worker.is_alive():
            worker.kill()
    if errors:  # the first client's own error, not the others' broken barrier
        errors.sort(key=lambda error: "BrokenBarrierError" in repr(error))
        raise RuntimeError(f"a client failed: {errors[0]!r}") from errors[0]
    clients_s = sum(cpu for _, _, cpu in runs)
    usage = Usage(
        elapsed_s=elapsed,
        server_s=server_s,
        server_processes=len(servers),
        clients_s=clients_s,
        ours_s=server_s + own_s + (clients_s if mode == "processes" else 0.0),
        busy_s=busy_after - busy_before,
        cpus=cpus,
    )
    every = [value for latencies, _, _ in runs for value in latencies]
    return every, sum(checked for _, checked, _ in runs), usage


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
    args: argparse.Namespace,
    requests: int,
    texts: tuple[str, str],
) -> Latency:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    env = dict(os.environ, CLOTHO_API_TOKEN=TOKEN)
    command = [sys.executable, "-m", "clotho", "--db", f"sqlite:///{db}", "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    if args.server_workers > 1:
        command += ["--workers", str(args.server_workers)]
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
        first, last = (json.dumps(text, ensure_ascii=False)[1:-1].encode() for text in texts)
        plan = _Plan(args.client, port, url, headers, args.warmup, requests, first, last)
        with _Client(args.client, port, url, headers) as client:
            started = time.perf_counter()
            content = client.get()
            first_ms = (time.perf_counter() - started) * 1000
        document = json.loads(content)
        shown = document.get("nodes") if isinstance(document, dict) else None
        total = document.get("total") if isinstance(document, dict) else None
        every, checked, usage = _timed(plan, args.clients, args.clients_in, server.pid)
        other, every_other = None, 0
        if args.compare:
            way = "threads" if args.clients_in == "processes" else "processes"
            others, checked_other, other_usage = _timed(plan, args.clients, way, server.pid)
            checked += checked_other
            every_other = len(others)
            other = (_percentile(others, 0.50), _percentile(others, 0.99), other_usage)
        alone, checked_alone, _ = _timed(plan, 1, args.clients_in, server.pid)
        return Latency(
            p50_ms=_percentile(every, 0.50),
            p99_ms=_percentile(every, 0.99),
            mean_ms=statistics.fmean(every),
            max_ms=max(every),
            requests=len(every),
            response_bytes=len(content),
            first_ms=first_ms,
            alone_p50_ms=_percentile(alone, 0.50),
            alone_p99_ms=_percentile(alone, 0.99),
            nodes=len(shown) if isinstance(shown, list) else None,
            total=total if isinstance(total, int) else None,
            has_first=first in content,
            has_last=last in content,
            checked=checked + checked_alone,
            checked_of=len(every) + every_other + len(alone),
            phase=usage,
            other=other,
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


_WAYS = {
    "processes": "client processes of their own (multiprocessing's spawn: fresh "
    "interpreters, not copies of this one)",
    "threads": "client threads of this benchmark's process (sharing its GIL)",
}


def _cpu_line(usage: Usage, requests: int, clients: int) -> str:
    """Where the CPU went while ``clients`` clients made ``requests`` timed requests."""
    server = usage.server_s / requests * 1000
    client = usage.clients_s / requests * 1000
    left = max(usage.cpus - usage.others_cores, 0.05)
    return (
        f"  CPU meanwhile ({usage.elapsed_s:.1f} s, {requests / usage.elapsed_s:.0f} "
        f"requests/s): server {server:.1f} ms a request ({usage.server_processes} "
        f"process{'es' if usage.server_processes > 1 else ''}), clients {client:.1f} ms a "
        f"request; the machine's {usage.cpus} CPUs {usage.busy_cores:.2f} busy, "
        f"{usage.others_cores:.2f} of them with other processes than this benchmark's: "
        f"{clients} requests in flight x {server + client:.1f} ms of CPU / {left:.2f} CPUs "
        f"left = {clients * (server + client) / left:.0f} ms a request if CPU-bound"
    )


def print_latency(latency: Latency, args: argparse.Namespace, count: int, requests: int) -> None:
    yes = lambda good: "yes" if good else "no"  # noqa: E731
    workers = args.server_workers
    server = (
        f"`clotho serve --workers {workers}` ({workers} worker processes on the one SQLite "
        "file, each with its own cache of rendered responses)"
        if workers > 1
        else "`clotho serve` (one process)"
    )
    print(
        f"\nGET /api/sessions/{{id}}/projection at depth {count:,}: response "
        f"{latency.response_bytes:,} bytes, {latency.nodes} nodes (total {latency.total}); "
        f"first and last messages in it: {yes(latency.has_first)} / {yes(latency.has_last)}; "
        f"the very first request (a fresh server renders the projection) took "
        f"{latency.first_ms:.1f} ms"
    )
    print(
        f"server: {server}, on the same machine as the clients; {args.clients} clients at "
        f"once, each with one keep-alive {args.client} connection: {args.warmup} warm-up "
        f"requests each (untimed), one more once all are warm, then {requests} timed "
        f"requests each, all starting together; a latency is sending the request and "
        f"reading the whole body"
    )
    print(
        f"{args.clients} {_WAYS[args.clients_in]}, {latency.requests} timed: p50 "
        f"{latency.p50_ms:.1f} ms, p99 {latency.p99_ms:.1f} ms, mean {latency.mean_ms:.1f} "
        f"ms, max {latency.max_ms:.1f} ms"
    )
    print(_cpu_line(latency.phase, latency.requests, args.clients))
    if latency.other is not None:
        p50, p99, usage = latency.other
        way = "threads" if args.clients_in == "processes" else "processes"
        print(
            f"for comparison, {args.clients} {_WAYS[way]}, {latency.requests} timed: p50 "
            f"{p50:.1f} ms, p99 {p99:.1f} ms"
        )
        print(_cpu_line(usage, latency.requests, args.clients))
    print(
        f"one client alone ({'a process' if args.clients_in == 'processes' else 'a thread'})"
        f", {requests} timed requests: p50 {latency.alone_p50_ms:.1f} ms, p99 "
        f"{latency.alone_p99_ms:.1f} ms"
    )
    print(
        f"every timed response read whole (its Content-Length) and holding the first and "
        f"last messages (checked after the clock stopped): {latency.checked}/"
        f"{latency.checked_of}"
    )


def run(args: argparse.Namespace, count: int, requests: int, work: Path) -> int:
    from clotho.stchat import export_chat, parse_chat
    from mnemosyne import Store

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
        latency = measure_api(db, ours.session_id, work, args, requests, texts)

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
        print_latency(latency, args, count, requests)

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
    parser.add_argument(
        "--clients-in",
        choices=("processes", "threads"),
        default="processes",
        help="run the clients as processes of their own (default) or threads of this one",
    )
    parser.add_argument(
        "--server-workers",
        type=int,
        default=1,
        help="`clotho serve --workers N` (default 1: one process)",
    )
    parser.add_argument(
        "--no-compare",
        dest="compare",
        action="store_false",
        help="skip the second concurrent run with the clients run the other way",
    )
    args = parser.parse_args(argv)
    count, requests = (2000, 20) if args.quick else (args.messages, args.requests)
    if count < 2 or args.clients < 1 or requests < 1 or args.server_workers < 1:
        parser.error(
            "--messages must be at least 2, --clients, --requests and --server-workers at least 1"
        )
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
