"""Importing a long SillyTavern chat: bytes written to reach it, import time, reading it as a page.

Run from the repository root::

    .venv/bin/python bench/import_chat.py            # 20,000 messages
    .venv/bin/python bench/import_chat.py --quick    # 2,000 messages, 10 s of reading

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

- **ours** -- ``clotho.formats.stchat.import_chat(store, data, name)`` of the file's bytes into
  a fresh SQLite file (``Store.open("sqlite:///...")``: WAL, ``synchronous=NORMAL``)
  in a temporary directory. ``import_s`` is the wall time of ``import_chat`` alone.
  Its bytes are counted from before ``Store.open`` (so the schema's creation is
  included) to after ``Store.close`` (the last connection closing checkpoints the WAL
  into the database file and deletes it), so everything SQLite wrote is counted.
  The search index is brought up to date by the first search, not by the import:
  that search (the store opened again, ``search("the")`` in the session) is timed
  apart, ``first_search_ms``, with the bytes it wrote.
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
``clotho.formats.stchat.export_chat(store, session.id)`` of ours, parsed (header and every
message, all fields); whether the two are byte-identical is printed too.

**Reading the story as the web page does** -- our HTTP API as a real server process,
plain ``python -m clotho --db sqlite:///<ours> serve --host 127.0.0.1 --port <free
port>`` with ``CLOTHO_API_TOKEN`` set and, as its model, the scripted OpenAI-compatible
server of ``orchestrator.loopback`` in this process (``CLOTHO_MODEL=openai/gm``, its
URL as ``CLOTHO_API_BASE``; every reply ~600 characters, streamed; ``{"operations":
[]}`` to a state extraction), ready once ``GET /api/health`` answers. The first window
is read once, its time printed (a fresh server reads the path root -> HEAD once; from
then on it reads only what each turn adds, and each window's nodes). Then one turn,
untimed (the first turn of a server loads the model client, litellm, for seconds). Then,
for ``--duration`` seconds (default 30), all at once:

- ``--clients`` readers (default 8), each a process of its own (multiprocessing's spawn)
  with one keep-alive ``http.client`` connection, scroll as a person does: the newest
  window, ``GET /api/sessions/{id}/projection?limit=200&metadata=true&disabled=true``
  (the query of the web page), then ``--pages`` windows back (default 5) through each
  answer's ``next``, waiting ``--pause-ms`` (default 100) after each read, then again
  from the newest window, until the time is up. A latency is ``time.perf_counter``
  around sending the request and reading the whole body (status 200 required). Each
  window is checked after the clock stopped: ``limit`` messages (fewer only at the
  root), the last of a window the parent of the first of the window after it.
- a player, a thread of this process, plays ``say`` turns one after another
  (``POST .../turns``, its events read to the last, ``node``: the turn played to its
  end, then the next), so that the session's version moves under the readers. The
  model streams its reply at a model's pace: a word every ``--model-word-ms`` (default
  20 ms, some 50 words a second, as a hosted model streams; ~2 s a reply), and the player
  sends the next turn as soon as a reply ends (no time to read or type: a busier player
  than a person). ``--model-word-ms 0`` answers at once (the whole reply in one write):
  turns back to back as fast as the server plays them, a load no person makes (a
  script driving the API), kept to compare.

Printed: p50, p99 (nearest rank), mean and max over every read, and the newest windows
and the windows back apart; the turns played and their p50; where the CPU went
(the server's process, ``/proc/<pid>/stat``; the readers, ``getrusage``; every other
process on the machine, ``/proc/stat`` minus ours, for a machine shared with others'
jobs); then one reader alone for ``--alone`` seconds (default 10), no turns: the floor
under the concurrency. The server is stopped at the end, also on errors. ``--no-api``
skips this part (``page_p99_ms=n/a``); ``--profile FILE`` records the server with py-spy
(beside the Python running the benchmark, or on ``PATH``; not a dependency) while it is
read and played, as collapsed stacks, one thread apart from the other.

Targets (from the issue): bytes ratio (peer ``wchar`` / ours) >= 100, import under
10 s, page p99 under 25 ms. Save the output with ``| tee bench/results/import_chat.txt``.
The last line is ``ratio bytes_written=<peer / ours> import_s=<ours> page_p99_ms=<ours>
at <N> messages``.
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
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from _texts import line

# clotho.formats.stchat and mnemosyne are imported where used: the client processes import this
# module (multiprocessing's spawn) and need neither.

SEED = 20_260_612
CHAR, USER = "Seraphina", "Traveler"
START = datetime(2025, 3, 1, 18, 0, tzinfo=UTC)
SWIPES = 3
TOKEN = "bench-import-chat-token"
TARGET_RATIO, TARGET_IMPORT_S, TARGET_P99_MS = 100.0, 10.0, 25.0
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
    first_search_ms: float
    """The first search after the import, in a store opened again: it indexes every
    message (the search index is brought up to date lazily)."""
    search_io: dict[str, int]
    db_bytes_searched: int


def run_ours(db: Path, data: bytes, name: str) -> Ours:
    from clotho.formats.stchat import import_chat
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
    db_bytes = size_of(db, wal)
    with Store.open(url) as store:
        before_search = counters()
        started = time.perf_counter()
        store.search("the", session_id=session.id)
        first_search_ms = (time.perf_counter() - started) * 1000
        search_io = delta(before_search, counters())
    return Ours(
        session_id=session.id,
        import_s=import_s,
        open_s=open_s,
        io=delta(start_io, end_io),
        io_import=delta(before, after_import),
        db_bytes=db_bytes,
        wal_before_close=wal_before,
        db_before_close=db_before,
        first_search_ms=first_search_ms,
        search_io=search_io,
        db_bytes_searched=size_of(db, wal),
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


# -- reading it as the page does ----------------------------------------------------------

#: The query of the web page's chat view (clotho/web/static/chat.js).
PAGE_QUERY = "limit=200&metadata=true&disabled=true"
PAGE_LIMIT = 200
MODEL_REPLY_CHARS = 600


@dataclass(frozen=True)
class _Plan:
    """What every reader does (picklable: handed to the reader processes)."""

    port: int
    first: str
    """The newest window's path and query."""
    headers: dict[str, str]
    pages: int
    pause_s: float
    duration_s: float


@dataclass
class _Reading:
    """One reader's outcome."""

    newest_ms: list[float]
    back_ms: list[float]
    windows: int
    checked: int
    scrolls: int
    cpu_s: float


def _get(conn: http.client.HTTPConnection, path: str, headers: dict[str, str]) -> bytes:
    conn.request("GET", path, headers=headers)
    answer = conn.getresponse()
    body = answer.read()
    if answer.status != 200:
        raise RuntimeError(f"GET {path}: {answer.status} {body[:300]!r}")
    return body


def _window_ok(document: dict[str, Any], after: dict[str, Any] | None) -> bool:
    """``limit`` messages (fewer only at the root), its last the parent of the first of
    the window ``after`` it."""
    nodes = document["nodes"]
    full = len(nodes) == PAGE_LIMIT or (document["next"] is None and nodes)
    joined = after is None or (nodes and nodes[-1]["id"] == after["nodes"][0]["parent_id"])
    return bool(full and joined)


def _read(plan: _Plan, start: Any) -> _Reading:
    """One reader: a warm connection, then (once every reader and the player are ready)
    the newest window and ``plan.pages`` back, a pause after each read, until the time
    is up."""
    reading = _Reading([], [], 0, 0, 0, 0.0)
    conn = http.client.HTTPConnection("127.0.0.1", plan.port, timeout=120)
    try:
        _get(conn, plan.first, plan.headers)
        start.wait(timeout=600)
        before = resource.getrusage(resource.RUSAGE_SELF)
        end = time.monotonic() + plan.duration_s
        while time.monotonic() < end:
            path: str | None = plan.first
            after = None
            for page in range(plan.pages + 1):
                if path is None or time.monotonic() >= end:
                    break
                started = time.perf_counter()
                body = _get(conn, path, plan.headers)
                elapsed = (time.perf_counter() - started) * 1000
                (reading.back_ms if page else reading.newest_ms).append(elapsed)
                document = json.loads(body)
                reading.windows += 1
                reading.checked += _window_ok(document, after)
                after, path = document, document["next"]
                time.sleep(plan.pause_s)
            reading.scrolls += 1
        spent = resource.getrusage(resource.RUSAGE_SELF)
        reading.cpu_s = spent.ru_utime - before.ru_utime + spent.ru_stime - before.ru_stime
        return reading
    finally:
        conn.close()


def _reader_process(plan: _Plan, start: Any, results: Any) -> None:
    """The body of a reader process: its reading (or its error) goes to ``results``."""
    try:
        results.put(_read(plan, start))
    except BaseException as error:  # noqa: BLE001 -- raised again by the benchmark's process
        start.abort()
        results.put(RuntimeError(f"a reader failed: {error!r}"))


@dataclass
class _Playing:
    turns_ms: list[float]
    error: BaseException | None = None


def _play(base: str, path: str, headers: dict[str, str], start: Any, until: Any) -> _Playing:
    """The player: ``say`` turns one after another from when ``start`` is passed until
    ``until`` is set."""
    playing = _Playing([])
    try:
        with httpx.Client(base_url=base, headers=headers, timeout=120) as client:
            start.wait(timeout=600)
            number = 0
            while not until.is_set():
                number += 1
                started = time.perf_counter()
                answer = client.post(
                    path,
                    json={"kind": "say", "text": f"I walk on, turn {number} of the benchmark."},
                )
                if answer.status_code != 201 or "event: node" not in answer.text:
                    raise RuntimeError(f"POST {path}: {answer.status_code} {answer.text[:300]}")
                playing.turns_ms.append((time.perf_counter() - started) * 1000)
    except BaseException as error:  # noqa: BLE001 -- reported by the benchmark's process
        playing.error = error
        with contextlib.suppress(threading.BrokenBarrierError):
            start.abort()
    return playing


@dataclass
class Usage:
    """CPU seconds spent during a timed phase, by whom."""

    elapsed_s: float
    server_s: float
    readers_s: float
    ours_s: float
    """The server, this process (the player, the model) and the readers."""
    busy_s: float
    """Every CPU of the machine (``/proc/stat``), all processes."""
    cpus: int

    @property
    def others_cores(self) -> float:
        return max(self.busy_s - self.ours_s, 0.0) / self.elapsed_s

    @property
    def busy_cores(self) -> float:
        return self.busy_s / self.elapsed_s


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _machine() -> tuple[float, int]:
    """Busy CPU seconds of the whole machine since boot (every CPU), and its CPUs."""
    with open("/proc/stat") as stream:
        rows = stream.read().splitlines()
    values = [int(value) for value in rows[0].split()[1:]]
    cpus = sum(1 for row in rows if row.startswith("cpu") and row[3:4].isdigit())
    tick = os.sysconf("SC_CLK_TCK")
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / tick, cpus


@dataclass
class Phase:
    """The readers' latencies (ms), checks, turns and CPU of one timed phase."""

    newest_ms: list[float]
    back_ms: list[float]
    windows: int
    checked: int
    scrolls: int
    turns_ms: list[float]
    usage: Usage

    @property
    def every_ms(self) -> list[float]:
        return self.newest_ms + self.back_ms


def _phase(plan: _Plan, readers: int, server: int, turns: tuple[str, str] | None) -> Phase:
    """``readers`` reader processes and, with ``turns`` (base URL, path), the player,
    all starting together."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(readers + 1 + (turns is not None))
    results: Any = context.Queue()
    workers = [
        context.Process(target=_reader_process, args=(plan, start, results), daemon=True)
        for _ in range(readers)
    ]
    for worker in workers:
        worker.start()
    until = threading.Event()
    playing: list[_Playing] = []
    player = None
    if turns is not None:
        player = threading.Thread(
            target=lambda: playing.append(_play(*turns, plan.headers, start, until))
        )
        player.start()
    with contextlib.suppress(threading.BrokenBarrierError):  # a reader failed: see below
        start.wait(timeout=600)
    started = time.perf_counter()
    busy_before, cpus = _machine()
    server_before = _cpu_seconds(server)
    own_before = sum(os.times()[:2])
    outcomes = [results.get(timeout=plan.duration_s + 600) for _ in workers]
    until.set()
    elapsed = time.perf_counter() - started
    busy_after, _ = _machine()
    server_s = _cpu_seconds(server) - server_before
    own_s = sum(os.times()[:2]) - own_before  # the player's last turn may still run
    if player is not None:
        player.join(timeout=600)
    for worker in workers:
        worker.join(timeout=60)
        if worker.is_alive():
            worker.kill()
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    errors += [p.error for p in playing if p.error is not None]
    if errors:
        raise RuntimeError(f"a client failed: {errors[0]!r}") from errors[0]
    readings = [outcome for outcome in outcomes if isinstance(outcome, _Reading)]
    readers_s = sum(r.cpu_s for r in readings)
    return Phase(
        newest_ms=[ms for r in readings for ms in r.newest_ms],
        back_ms=[ms for r in readings for ms in r.back_ms],
        windows=sum(r.windows for r in readings),
        checked=sum(r.checked for r in readings),
        scrolls=sum(r.scrolls for r in readings),
        turns_ms=playing[0].turns_ms if playing else [],
        usage=Usage(
            elapsed_s=elapsed,
            server_s=server_s,
            readers_s=readers_s,
            ours_s=server_s + own_s + readers_s,
            busy_s=busy_after - busy_before,
            cpus=cpus,
        ),
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(fraction * len(ordered)) - 1, 0)]


@dataclass
class Reading:
    first_ms: float
    first_bytes: int
    total: int
    first_turn_ms: float
    loaded: Phase
    alone: Phase | None


def _model_script(reply: str, word_s: float) -> Any:
    """The model: the reply streamed a word every ``word_s`` seconds; an empty delta to a
    state extraction."""
    from orchestrator.loopback import Reply

    def script(request: dict[str, Any]) -> Reply | str:
        if request.get("response_format"):
            return '{"operations": []}'
        return Reply(reply, chunk_delay=word_s)

    return script


def _pace(word_ms: float) -> str:
    if word_ms <= 0:
        return "a model answering at once (turns back to back)"
    return f"a model streaming a word every {word_ms:g} ms"


def measure_pages(db: Path, session_id: str, logs: Path, args: argparse.Namespace) -> Reading:
    from orchestrator.loopback import ModelServer

    rng = random.Random(SEED + 1)
    reply = line(rng, "The narrator:", MODEL_REPLY_CHARS)
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "clotho", "--db", f"sqlite:///{db}", "serve"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    out, err = open(logs / "serve.out", "wb"), open(logs / "serve.err", "wb")  # noqa: SIM115
    with ModelServer(_model_script(reply, args.model_word_ms / 1000)) as model:
        env = {key: value for key, value in os.environ.items() if not key.startswith("CLOTHO_")}
        env.update(
            CLOTHO_API_TOKEN=TOKEN,
            CLOTHO_DATA_DIR=str(logs / "data"),
            CLOTHO_VECTORS="false",
            CLOTHO_MODEL="openai/gm",
            CLOTHO_API_BASE=model.url,
            CLOTHO_API_KEY="bench",
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err)
        try:
            deadline = time.monotonic() + 60
            while True:
                if server.poll() is not None:
                    raise RuntimeError(
                        f"`{' '.join(command)}` exited with {server.returncode}: "
                        + (logs / "serve.err").read_text(errors="replace")[-2000:]
                    )
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/api/health", timeout=1).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the API did not answer on {base}/api/health in 60 s")
                time.sleep(0.1)
            where = f"/api/sessions/{session_id}"
            headers = {"Authorization": f"Bearer {TOKEN}"}
            plan = _Plan(
                port, f"{where}/projection?{PAGE_QUERY}", headers, args.pages,
                args.pause_ms / 1000, args.duration,
            )  # fmt: skip
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            started = time.perf_counter()
            body = _get(conn, plan.first, headers)
            first_ms = (time.perf_counter() - started) * 1000
            conn.close()
            total = json.loads(body)["total"]
            started = time.perf_counter()  # the first turn loads the model client: untimed
            warm = httpx.post(
                f"{base}{where}/turns",
                json={"kind": "say", "text": "I set out."},
                headers=headers,
                timeout=120,
            )
            if warm.status_code != 201 or "event: node" not in warm.text:
                raise RuntimeError(f"the first turn: {warm.status_code} {warm.text[:300]}")
            first_turn_ms = (time.perf_counter() - started) * 1000
            spy = None
            if args.profile:  # every thread of the server, the idle ones left out
                beside = Path(sys.executable).parent / "py-spy"
                spy_command = [shutil.which("py-spy") or str(beside), "record", "--pid"]
                spy_command += [str(server.pid), "--format", "raw", "--rate", "200"]
                spy_command += ["--threads", "--output", args.profile]
                spy_command += ["--duration", str(int(args.duration) + 5)]
                spy = subprocess.Popen(spy_command, stdout=subprocess.DEVNULL)
            loaded = _phase(plan, args.clients, server.pid, (base, f"{where}/turns"))
            if spy is not None:
                spy.wait(timeout=120)
            model.requests.clear()
            alone = None
            if args.alone > 0:
                alone = _phase(replace(plan, duration_s=args.alone), 1, server.pid, None)
            return Reading(first_ms, len(body), total, first_turn_ms, loaded, alone)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            out.close()
            err.close()


def _ms(values: Sequence[float]) -> str:
    return (
        f"p50 {_percentile(values, 0.50):.1f} ms, p99 {_percentile(values, 0.99):.1f} ms, "
        f"mean {statistics.fmean(values):.1f} ms, max {max(values):.1f} ms"
    )


def print_reading(reading: Reading, args: argparse.Namespace, count: int) -> None:
    loaded = reading.loaded
    usage = loaded.usage
    print(
        f"\nGET /api/sessions/{{id}}/projection?{PAGE_QUERY} on the session of {count:,} "
        f"messages (total {reading.total:,}): the first window ({reading.first_bytes:,} "
        f"bytes) from a fresh `clotho serve` (plain uvicorn, one process) took "
        f"{reading.first_ms:.1f} ms (it reads the path once); then one turn, untimed "
        f"(the first loads the model client): {reading.first_turn_ms:.0f} ms"
    )
    print(
        f"{args.clients} readers (processes of their own, one keep-alive http.client "
        f"connection each) for {args.duration:g} s: the newest window, then {args.pages} "
        f"back through `next`, {args.pause_ms:g} ms after each read, again and again "
        f"({loaded.scrolls} scrolls); meanwhile a player played {len(loaded.turns_ms)} say "
        f"turns one after another against {_pace(args.model_word_ms)} (p50 "
        f"{_percentile(loaded.turns_ms or [0.0], 0.5):.0f} ms a turn, scripted model on "
        f"loopback)"
    )
    print(f"every read, {len(loaded.every_ms)}: {_ms(loaded.every_ms)}")
    print(f"  newest windows, {len(loaded.newest_ms)}: {_ms(loaded.newest_ms)}")
    if loaded.back_ms:
        print(f"  windows back, {len(loaded.back_ms)}: {_ms(loaded.back_ms)}")
    reads = len(loaded.every_ms)
    left = max(usage.cpus - usage.others_cores, 0.05)
    print(
        f"  CPU meanwhile ({usage.elapsed_s:.1f} s, {reads / usage.elapsed_s:.0f} reads/s): "
        f"the server {usage.server_s:.1f} s ({usage.server_s / reads * 1000:.1f} ms a read, "
        f"the turns' work included), the readers {usage.readers_s / reads * 1000:.1f} ms a "
        f"read (reading and parsing the JSON); the machine's {usage.cpus} CPUs "
        f"{usage.busy_cores:.2f} busy, {usage.others_cores:.2f} of them with other processes "
        f"than this benchmark's ({left:.2f} left to it)"
    )
    print(
        f"  windows checked (200 messages, or fewer at the root; each window's last message "
        f"the parent of the first of the window after it): {loaded.checked}/{loaded.windows}"
    )
    if reading.alone is not None:
        alone = reading.alone
        print(
            f"one reader alone, no turns, {args.alone:g} s, {len(alone.every_ms)} reads: "
            f"{_ms(alone.every_ms)}; checked {alone.checked}/{alone.windows}"
        )


# -- the run ------------------------------------------------------------------------------


def _mb(value: float) -> str:
    return f"{value / 1e6:,.1f} MB"


def run(args: argparse.Namespace, count: int, work: Path) -> int:
    from clotho.formats.stchat import export_chat, parse_chat
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

    reading = None
    if not args.no_api:
        reading = measure_pages(db, ours.session_id, work, args)

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
    print(
        f"the first search after it (Store.open again, search 'the' in the session: it "
        f"indexes every message, the index being lazy) first_search_ms={ours.first_search_ms:.0f}"
        f", wrote {ours.search_io['wchar']:,} bytes; the files then {_mb(ours.db_bytes_searched)}"
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
    if reading is not None:
        p99_ms = _percentile(reading.loaded.every_ms, 0.99)
        p99 = f"{p99_ms:.1f}"
        print_reading(reading, args, count)

    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    targets = (
        f"\ntargets at {count} messages: bytes_written {ratio:.1f} >= {TARGET_RATIO:g} "
        f"{ok(ratio >= TARGET_RATIO)}; import_s {ours.import_s:.2f} < {TARGET_IMPORT_S:g} "
        f"{ok(ours.import_s < TARGET_IMPORT_S)}"
    )
    if reading is not None:
        targets += f"; page_p99_ms {p99} < {TARGET_P99_MS:g} {ok(p99_ms < TARGET_P99_MS)}"
    print(targets)
    if reading is not None:
        print(f"(the player's model: {_pace(args.model_word_ms)})")
    print(
        f"ratio bytes_written={ratio:.1f} import_s={ours.import_s:.2f} page_p99_ms={p99} "
        f"at {count} messages"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8, help="readers (default 8)")
    parser.add_argument(
        "--pages", type=int, default=5, help="windows back after the newest (default 5)"
    )
    parser.add_argument(
        "--pause-ms", type=float, default=100.0, help="after each read (default 100)"
    )
    parser.add_argument(
        "--duration", type=float, default=30.0, help="seconds of reading and playing"
    )
    parser.add_argument(
        "--alone", type=float, default=10.0, help="seconds of one reader alone (0: none)"
    )
    parser.add_argument(
        "--model-word-ms",
        type=float,
        default=20.0,
        help="the model streams a word every N ms while the player plays (default 20; "
        "0: at once, turns back to back)",
    )
    parser.add_argument("--quick", action="store_true", help="2,000 messages, 10 s")
    parser.add_argument("--keep", action="store_true", help="keep the temporary files")
    parser.add_argument(
        "--peer-real-gb", type=float, default=4.0, help="the peer's saves written for real (GB)"
    )
    parser.add_argument("--peer-all", action="store_true", help="write every save of the peer")
    parser.add_argument("--peer-dir", help="where the peer writes (default: the temporary dir)")
    parser.add_argument("--no-api", action="store_true", help="skip reading it as the page")
    parser.add_argument(
        "--profile",
        metavar="FILE",
        help="record the server with py-spy (on PATH) while it is read and played: "
        "collapsed stacks to FILE",
    )
    args = parser.parse_args(argv)
    count = args.messages
    if args.quick:
        count, args.duration, args.alone = 2000, 10.0, 5.0
    if count < 2 or args.clients < 1 or args.pages < 0 or args.duration <= 0:
        parser.error("--messages must be at least 2, --clients 1, --pages 0, --duration > 0")
    work = Path(tempfile.mkdtemp(prefix="clotho-bench-import-chat-"))
    try:
        return run(args, count, work)
    finally:
        if args.keep:
            print(f"(files kept in {work})")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
