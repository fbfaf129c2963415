"""What a Clotho turn costs beyond its model call, against a LangGraph chat app.

Run from the repository root::

    .venv/bin/pip install -e '.[bench]' && .venv/bin/python bench/turn_overhead.py

(``--quick`` for a smoke run: depths 50 and 400, 5 timed turns, 1 warm-up turn.)

The model is :class:`orchestrator.loopback.ModelServer`, a scripted OpenAI-compatible
server on 127.0.0.1 in this process (a thread), which answers every request at once
with the same ~600-character reply, streamed (one chunk per word). So what is measured
is everything around the model: the engine, litellm and the HTTP client. Every side
streams the same messages (``stream_options.include_usage``, ``timeout=120``, two
retries, the same ``api_key``) and consumes the stream to the end: ours through
``orchestrator.Gateway``, the peer and the bare call through ``litellm.acompletion``
as litellm's docs show it. Everything runs in one event loop (one ``asyncio.run``), so
the HTTP clients and their keep-alive connections are reused, as in a real game.

- **ours** -- ``orchestrator.Engine`` on a ``mnemosyne.Store`` (a SQLite file), with
  ``TurnSetup(extract=False)``: a turn is exactly one model call, as on the peer side.
  The model's ``context_window`` is 10,000,000 tokens, so nothing is trimmed and the
  prompt is the system prompt plus the whole history. A turn is
  ``await engine.run(session, TurnRequest("say", text))``: load the history, plan,
  build the prompt, stream the reply, commit (the user node, the reply node and its
  PromptTrace, one transaction).
- **peer** -- a LangGraph chat app the usual way: ``StateGraph(MessagesState)``
  compiled with ``AsyncSqliteSaver`` of ``langgraph-checkpoint-sqlite`` (the async
  SQLite checkpointer; ``aiosqlite`` is installed). Its one node sends our system
  message(s) followed by ``convert_to_openai_messages(state["messages"])`` and returns
  the streamed reply as an ``AIMessage``. A turn is
  ``await graph.ainvoke({"messages": [HumanMessage(text)]}, config)``.
- **bare** -- the same ``litellm.acompletion`` call alone, as litellm's docs show it
  (``openai/gm``, the route through the openai SDK), with the messages our engine sent
  in its latest turn, stream consumed. (Most of it at depth 2,000 is the SDK turning
  the request into its typed form, ``openai._utils._transform``, message by message;
  our gateway takes litellm's own HTTP route instead, see ``orchestrator.gateway``.)
- **gateway** -- ``orchestrator.Gateway.stream`` alone with the same messages: the
  model call as our engine makes it, stream consumed.
- **plain POST** -- the floor: the exact body our engine sent in its latest turn,
  POSTed with one ``httpx.AsyncClient`` (keep-alive, as litellm's), the streamed answer
  read to its end. **overhead** = a side's turn minus the plain POST.

The ``request ms`` column is the time from the call to the moment the model server
holds the whole request (its script is called, after it read and parsed the body): for
the gateway, its own cost up to the last byte of the request on the wire (plus the
server's parse, as for the plain POST).

**cold** (unless ``--no-cold-start``): ``clotho serve`` started as a process on a
database holding one session of the largest depth (its campaign sets the window as
above, no extraction), then, as soon as ``/api/health`` answers, a ``say`` turn over
the API: the seconds from starting the process to the first ``token`` event, the median
of ``--cold-runs`` starts (each a new process; the server warms up in the background
from its start, ``clotho.api.warm``).
- **ours + extraction** (unless ``--no-extract``) -- ours with ``extract=True``: a
  second, non-streamed call per turn (``response_format``, answered
  ``{"operations": []}``), on its own database. Informative, no target.
- **ours, cold** (unless ``--no-cold``) -- ours, on its own database, with the store's
  memory of recent paths (``mnemosyne._paths``) emptied before every turn (not timed):
  the history is read whole from the database, as on the first turn after a start or
  after an edit of the history. Informative, no target. (Warm, a turn reads from the
  database only what is new since the last path read: nothing in the default mode, the
  two messages of the last turn with ``--linear``.)

Depth is the number of messages (nodes on the path, user and assistant alternating,
~300 and ~600 characters, all different, generated from a seeded word list as in
``bench/tree_vs_langgraph.py``) in the history when a turn starts. Pre-filling is not
timed: ours in batched ``store.transaction`` blocks, the peer with one
``graph.aupdate_state(config, {"messages": [...]}, as_node="respond")``. By default
every turn starts at exactly that depth: after each turn (untimed) ours moves HEAD
back with ``store.checkout``, and the peer invokes from the pre-fill's
``checkpoint_id`` (LangGraph's fork from a past checkpoint). Both still write
everything a turn writes, so the databases grow as in a real chat. ``--linear`` plays
one continuous chat instead (the depth then grows by 2 a turn; the range is printed).

Each round runs one turn of each side, the order rotating from round to round; the
first ``--warmup`` rounds are not timed. Before each call, ``gc.collect()`` (not timed),
so that no call pays for collecting another's garbage (each still pays for its own).
Every round checks that ours and the peer sent the model exactly the same messages
(same count, same texts) and got the reply back whole.

Times are wall time (``time.perf_counter``) of the awaited call, up to the end of the
tasks it left in the event loop too: litellm finishes every streamed call in the
background (its success logging and stream caching, ~13 ms at depth 2,000), which
would otherwise be charged to whatever is timed next. The table gives median, mean
and min ms per turn. The turn ratio is the ratio of the medians; a side's overhead is
the median over the rounds of its turn minus the bare call of the same round (pairs
cancel the swings of the machine's load; the difference of the medians is printed
next to it).

Both SQLite files are in WAL mode with ``synchronous=NORMAL`` (the peer's connection
is set so; ``--peer-synchronous FULL`` keeps SQLite's default). Database sizes (main
file + ``-wal`` after ``wal_checkpoint(TRUNCATE)``) are printed for information.

Targets (from the issue): peer/ours turn ratio >= 4 at the largest depth, our overhead
there (ours minus the plain POST) under 40 ms, and a cold start under 3 s. The last
line is ``ratio turn=<peer ms / ours ms> overhead_ms=<ours minus the plain POST>
cold_s=<s> at depth <largest depth>``.

``--profile N`` then plays N more of our turns at the largest depth under cProfile and
prints the top ten functions by cumulative and by own time, per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import os
import pstats
import random
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
from _texts import line

from mnemosyne import Store
from orchestrator import Engine, Gateway, ModelConfig, TurnRequest, TurnSetup
from orchestrator.gateway import litellm_module
from orchestrator.loopback import ModelServer, Received

# litellm as the engine imports it (offline, its logging not copying the messages): one
# process, so the peer and the bare call get the same settings
litellm = litellm_module()

MODEL = "openai/gm"
API_KEY = "bench"
CONTEXT_WINDOW = 10_000_000
THREAD_ID = "bench"
GROW_BATCH = 500
SEED = 20_260_601
PROFILE_TOP = 10
DRAIN_TIMEOUT = 30.0
OWN_CODE = re.compile(r"/(orchestrator|mnemosyne|prompts|planner|postprocess)/[^/]*\.py$")

#: Targets from the issue.
TARGET_TURN_RATIO = 4.0
TARGET_OVERHEAD_MS = 40.0
TARGET_COLD_S = 3.0
COLD_TIMEOUT_S = 120.0
#: When each streamed chat request reached the model server (``time.perf_counter``).
ARRIVALS: list[float] = []

# --- the texts -------------------------------------------------------------------------


@dataclass(frozen=True)
class Texts:
    """The history (``depth`` messages), the players' messages of the turns, the reply."""

    history: list[tuple[str, str]]
    """(role, text): user ~300 characters, assistant ~600, alternating."""
    players: list[str]
    reply: str


def make_texts(depth: int, turns: int) -> Texts:
    rng = random.Random(SEED + depth)
    history = [
        ("user", line(rng, f"[message {i}] I", 300))
        if i % 2 == 0
        else ("assistant", line(rng, f"[message {i}] The narrator:", 600))
        for i in range(depth)
    ]
    players = [line(rng, f"[turn {i}] I", 300) for i in range(turns)]
    return Texts(history, players, line(rng, "[reply] The narrator:", 600))


# --- the model server and the call every side makes -------------------------------------


def script_for(reply: str) -> Callable[[dict], str]:
    def script(request: dict) -> str:
        if request.get("response_format"):
            return '{"operations": []}'
        if request.get("stream"):
            ARRIVALS.append(time.perf_counter())  # the server holds the whole request
        return reply

    return script


def call_arguments(url: str) -> dict[str, Any]:
    """What ``orchestrator.Gateway`` passes litellm for a streamed reply (but messages)."""
    return {
        "model": MODEL,
        "api_base": url,
        "api_key": API_KEY,
        "stream": True,
        "stream_options": {"include_usage": True},
        "timeout": 120.0,
        "max_retries": 2,
    }


async def stream_text(arguments: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """One streamed call through litellm, consumed to the end; the text."""
    response = await litellm.acompletion(**arguments, messages=messages)
    pieces = []
    async for chunk in response:
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
    return "".join(pieces)


def chat_request(server: ModelServer) -> Received:
    """The latest streamed request the server got; forget the requests."""
    streamed = [r for r in server.requests if r.json.get("stream")]
    server.requests.clear()  # they are big: keep the heap as it would be without them
    if not streamed:
        raise SystemExit("the model server got no streamed request")
    return streamed[-1]


# --- databases -----------------------------------------------------------------------------


def file_bytes(path: Path) -> int:
    """The main file plus its ``-wal`` (``-shm`` is not data and is not counted)."""
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def checkpoint_wal(conn: Any, label: str) -> None:
    busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        print(f"warning: {label}: wal_checkpoint(TRUNCATE) was blocked", file=sys.stderr)


# --- the sides -------------------------------------------------------------------------------


class Ours:
    """A Clotho session pre-filled to ``depth`` messages, played by ``orchestrator.Engine``."""

    def __init__(
        self,
        name: str,
        path: Path,
        texts: Texts,
        url: str,
        *,
        extract: bool,
        linear: bool,
        cold: bool = False,
    ) -> None:
        self.name, self.path, self.linear, self.cold = name, path, linear, cold
        self.store = Store.open(f"sqlite:///{path}")
        self.sid = self.store.create_session(title="bench").id
        history = texts.history
        for start in range(0, len(history), GROW_BATCH):
            with self.store.transaction(self.sid) as tx:
                for role, text in history[start : start + GROW_BATCH]:
                    tx.append(role, text)
        self.base = self.store.session(self.sid).head_id
        self.prefilled_bytes = self.settle()
        model = ModelConfig(MODEL, api_base=url, api_key=API_KEY, context_window=CONTEXT_WINDOW)
        self.engine = Engine(self.store, TurnSetup(model=model, extract=extract))
        self.reply = texts.reply

    async def turn(self, text: str) -> None:
        result = await self.engine.run(self.sid, TurnRequest("say", text))
        if result.completion.content != self.reply:
            raise SystemExit(f"{self.name}: the reply came back changed")

    async def reset(self) -> None:
        if not self.linear and self.base is not None:
            self.store.checkout(self.sid, self.base)
        if self.cold:
            self.store.paths.forget()

    def depth(self) -> int:
        return len(self.store.messages(self.sid))

    def settle(self) -> int:
        raw = self.store.engine.raw_connection()
        try:
            checkpoint_wal(raw.driver_connection, self.name)
        finally:
            raw.close()
        return file_bytes(self.path)

    async def close(self) -> None:
        self.store.close()


class Peer:
    """A LangGraph chat app: ``MessagesState`` + ``AsyncSqliteSaver``, one node."""

    name = "peer"

    def __init__(self, path: Path, texts: Texts, url: str, *, linear: bool) -> None:
        self.path, self.texts, self.url, self.linear = path, texts, url, linear
        self.system: list[dict[str, Any]] = []
        """Our engine's system message(s), sent first (set once ours has played a turn)."""
        self.config: Any = {"configurable": {"thread_id": THREAD_ID}}
        self.expected = len(texts.history) + 2
        self._stack = contextlib.AsyncExitStack()

    async def open(self, synchronous: str) -> None:
        from langchain_core.messages import (
            AIMessage,
            HumanMessage,
            convert_to_openai_messages,
        )
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
        from langgraph.graph import END, START, MessagesState, StateGraph

        self.saver = await self._stack.enter_async_context(
            AsyncSqliteSaver.from_conn_string(str(self.path))
        )
        await self.saver.setup()  # creates the tables and switches the file to WAL
        await self.saver.conn.execute(f"PRAGMA synchronous = {synchronous}")
        arguments = call_arguments(self.url)

        async def respond(state: MessagesState) -> dict[str, Any]:
            messages = self.system + convert_to_openai_messages(state["messages"])
            return {"messages": [AIMessage(content=await stream_text(arguments, messages))]}

        builder = StateGraph(MessagesState)
        builder.add_node("respond", respond)
        builder.add_edge(START, "respond")
        builder.add_edge("respond", END)
        self.graph = builder.compile(checkpointer=self.saver)
        self._human = HumanMessage
        prefill = [
            HumanMessage(content=text) if role == "user" else AIMessage(content=text)
            for role, text in self.texts.history
        ]
        if prefill:
            written = await self.graph.aupdate_state(
                self.config, {"messages": prefill}, as_node="respond"
            )
            if not self.linear:
                self.config = written
        self.prefilled_bytes = await self.settle()

    async def turn(self, text: str) -> None:
        final = await self.graph.ainvoke({"messages": [self._human(content=text)]}, self.config)
        messages = final["messages"]
        if len(messages) != self.expected or messages[-1].content != self.texts.reply:
            raise SystemExit(
                f"peer: {len(messages)} messages after the turn, not {self.expected}, "
                "or the reply came back changed"
            )
        if self.linear:
            self.expected += 2

    async def reset(self) -> None:
        """Nothing: the config names the pre-fill's checkpoint unless ``--linear``."""

    async def settle(self) -> int:
        async with self.saver.lock:
            cursor = await self.saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            busy, _log, _done = await cursor.fetchone()
            if busy:
                print("warning: peer: wal_checkpoint(TRUNCATE) was blocked", file=sys.stderr)
        return file_bytes(self.path)

    async def note(self) -> str:
        async with self.saver.lock:
            cursor = await self.saver.conn.execute("SELECT count(*) FROM checkpoints")
            (checkpoints,) = await cursor.fetchone()
            cursor = await self.saver.conn.execute("SELECT count(*) FROM writes")
            (writes,) = await cursor.fetchone()
        return f"checkpoints={checkpoints} writes={writes}"

    async def close(self) -> None:
        await self._stack.aclose()


class Bare:
    """The model call alone, with the messages of our latest turn."""

    name = "bare"

    def __init__(self, url: str, reply: str) -> None:
        self.arguments = call_arguments(url)
        self.reply = reply
        self.messages: list[dict[str, Any]] = []

    async def turn(self, text: str) -> None:
        if await stream_text(self.arguments, self.messages) != self.reply:
            raise SystemExit("bare: the reply came back changed")

    async def reset(self) -> None:
        """Nothing to undo."""


class Through:
    """The model call as our engine makes it: ``orchestrator.Gateway.stream``."""

    name = "gateway"

    def __init__(self, url: str, reply: str) -> None:
        self.config = ModelConfig(MODEL, api_base=url, api_key=API_KEY)
        self.gateway = Gateway()
        self.reply = reply
        self.messages: list[dict[str, Any]] = []

    async def turn(self, text: str) -> None:
        completion = await self.gateway.stream(self.config, self.messages)
        if completion.content != self.reply:
            raise SystemExit("gateway: the reply came back changed")

    async def reset(self) -> None:
        """Nothing to undo."""


class Post:
    """The floor: the body our engine sent, POSTed as it is, the stream read to its end."""

    name = "post"

    def __init__(self, url: str) -> None:
        self.url = f"{url}/chat/completions"
        self.client = httpx.AsyncClient(timeout=120.0)
        self.body = b""

    async def turn(self, text: str) -> None:
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
        async with self.client.stream("POST", self.url, content=self.body, headers=headers) as r:
            if r.status_code != 200:
                raise SystemExit(f"post: HTTP {r.status_code}")
            async for _chunk in r.aiter_raw():
                pass

    async def reset(self) -> None:
        """Nothing to undo."""

    async def close(self) -> None:
        await self.client.aclose()


# --- measuring ---------------------------------------------------------------------------------


async def timed(call: Awaitable[None]) -> float:
    """Seconds until ``call`` is done and so is the work it left behind in the loop.

    litellm finishes a streamed call in the background: tasks (stream caching) and
    coroutines queued for its logging worker (success logging), ~13 ms at depth 2,000
    in all. They run at the loop's next chance; without this wait, that work would
    land on whatever is timed next.
    """
    from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER as worker

    me = asyncio.current_task()
    before = asyncio.all_tasks()
    start = time.perf_counter()
    await call
    while True:
        await asyncio.sleep(0)
        queue = getattr(worker, "_queue", None)  # its worker's loop task never ends
        if queue is not None:
            await asyncio.wait_for(queue.join(), DRAIN_TIMEOUT)
        lasting = {me, getattr(worker, "_worker_task", None)}
        pending = {t for t in asyncio.all_tasks() - before - lasting if not t.done()}
        if not pending:
            return time.perf_counter() - start
        _done, left = await asyncio.wait(pending, timeout=DRAIN_TIMEOUT)
        if left:
            print(f"warning: background tasks still running: {left}", file=sys.stderr)
            before |= left


@dataclass
class Timing:
    name: str
    label: str
    samples: list[float] = field(default_factory=list)
    requests: list[float] = field(default_factory=list)
    """Seconds from the call to the server holding the whole request."""

    @property
    def request(self) -> float:
        return statistics.median(self.requests) * 1000 if self.requests else float("nan")

    @property
    def median(self) -> float:
        return statistics.median(self.samples) * 1000

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) * 1000

    @property
    def least(self) -> float:
        return min(self.samples) * 1000


@dataclass
class DepthReport:
    depth: int
    depth_end: int
    sent: int
    timings: dict[str, Timing]
    sizes: list[tuple[str, int, int, int]]
    """(side, bytes after the pre-fill, bytes at the end, turns played)."""
    note: str
    profile: str = ""

    def overhead(self, name: str) -> float:
        """The median over the rounds of the side's turn minus the plain POST of the
        same round, in ms (pairs cancel what the machine's load does from round to
        round)."""
        pairs = zip(self.timings[name].samples, self.timings["post"].samples, strict=True)
        return statistics.median(side - post for side, post in pairs) * 1000

    def median_difference(self, name: str) -> float:
        return self.timings[name].median - self.timings["post"].median


async def measure(depth: int, args: argparse.Namespace, directory: Path) -> DepthReport:
    texts = make_texts(depth, args.warmup + args.turns)
    with ModelServer(script_for(texts.reply)) as server:
        start = time.perf_counter()
        ours = Ours(
            "ours",
            directory / f"ours-{depth}.db",
            texts,
            server.url,
            extract=False,
            linear=args.linear,
        )
        sides: list[Any] = [ours]
        extra: Ours | None = None
        if args.extract:
            extra = Ours(
                "ours+extract",
                directory / f"ours-extract-{depth}.db",
                texts,
                server.url,
                extract=True,
                linear=args.linear,
            )
            sides.append(extra)
        cold: Ours | None = None
        if args.cold:
            cold = Ours(
                "ours+cold",
                directory / f"ours-cold-{depth}.db",
                texts,
                server.url,
                extract=False,
                linear=args.linear,
                cold=True,
            )
            sides.append(cold)
        peer = Peer(directory / f"peer-{depth}.db", texts, server.url, linear=args.linear)
        await peer.open(args.peer_synchronous)
        bare = Bare(server.url, texts.reply)
        through = Through(server.url, texts.reply)
        post = Post(server.url)
        calls: list[Any] = [bare, through, post]  # the model call alone, three ways
        sides += [peer, *calls]
        print(
            f"  depth {depth}: pre-filled in {time.perf_counter() - start:.1f} s (not timed)",
            flush=True,
        )

        # Our first turn (a warm-up) gives the system message(s) the peer sends too.
        await timed(ours.turn(texts.players[0]))
        received = chat_request(server)
        sent = received.messages
        prefix = len(sent) - (depth + 1)
        history = [m["content"] for m in sent[prefix:]]
        if prefix < 0 or history != [t for _, t in texts.history] + [texts.players[0]]:
            raise SystemExit(f"depth {depth}: our prompt is not system + the whole history")
        peer.system = sent[:prefix]
        bare.messages = through.messages = sent
        post.body = received.body
        await ours.reset()
        if args.linear:  # replay the same turn on the other sides, to stay in step
            for side in sides[1 : -len(calls)]:
                await timed(side.turn(texts.players[0]))
                chat_request(server)
                await side.reset()

        labels = {
            "ours": "ours (clotho)",
            "ours+extract": "ours + extraction",
            "ours+cold": "ours, cold",
            "peer": "peer (langgraph)",
            "bare": "bare litellm call",
            "gateway": "our gateway call",
            "post": "plain POST (floor)",
        }
        timings = {s.name: Timing(s.name, labels[s.name]) for s in sides}
        first = 1 if args.linear else 0
        for index in range(first, args.warmup + args.turns):
            text = texts.players[index]
            shift = index % len(sides)
            sent_by: dict[str, list[dict[str, Any]]] = {}
            for side in sides[shift:] + sides[:shift]:
                gc.collect()  # each call starts with no garbage of the others (not timed)
                ARRIVALS.clear()
                called = time.perf_counter()
                elapsed = await timed(side.turn(text))
                if index >= args.warmup:
                    timings[side.name].samples.append(elapsed)
                    if ARRIVALS:
                        timings[side.name].requests.append(ARRIVALS[0] - called)
                received = chat_request(server)
                sent_by[side.name] = received.messages
                if side is ours:
                    ours_body = received.body
                await side.reset()
            if (
                sent_by["ours"] != sent_by["peer"]
                or (extra is not None and sent_by["ours+extract"] != sent_by["ours"])
                or (cold is not None and sent_by["ours+cold"] != sent_by["ours"])
            ):
                raise SystemExit(f"depth {depth}: the sides did not send the same messages")
            bare.messages = through.messages = sent_by["ours"]
            post.body = ours_body
        depth_end = ours.depth() - 2 if args.linear else depth  # before the last turn
        played = args.warmup + args.turns  # by each side, warm-up included
        stores = sides[: -len(calls) - 1]
        sizes = [(s.name, s.prefilled_bytes, s.settle(), played) for s in stores]
        sizes[0] = (*sizes[0][:3], played + (not args.linear))  # + our first turn
        sizes.append(("peer", peer.prefilled_bytes, await peer.settle(), played))
        note = await peer.note()

        profile = ""
        if args.profile and depth == args.depths[-1]:
            profile = await profile_turns(ours, texts, args.profile)
        for side in [*stores, peer]:
            await side.close()
        await post.close()
        await through.gateway.aclose()
    return DepthReport(depth, depth_end, len(sent), timings, sizes, note, profile)


async def profile_turns(ours: Ours, texts: Texts, turns: int) -> str:
    """``turns`` more of our turns under cProfile (HEAD moved back between them, not
    profiled): the top functions by cumulative and by own time, and Clotho's own by
    cumulative time."""
    profiler = cProfile.Profile()
    elapsed = 0.0
    for index in range(turns):
        profiler.enable()
        elapsed += await timed(ours.turn(texts.players[index % len(texts.players)]))
        profiler.disable()
        await ours.reset()
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(profiler).stats
    by_cumulative = sorted(stats.items(), key=lambda item: item[1][3], reverse=True)
    by_own = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)
    lines = [
        f"{turns} turns, {elapsed * 1000 / turns:.1f} ms each under cProfile (which slows "
        "Python calls down, litellm's most); figures per turn (a coroutine's calls count "
        "each time it resumes)"
    ]
    for title, rows, keep in (
        ("all functions, by cumulative time", by_cumulative, lambda path: True),
        ("all functions, by own time", by_own, lambda path: True),
        (
            "Clotho's own code, by cumulative time",
            by_cumulative,
            lambda path: OWN_CODE.search(path) is not None,
        ),
    ):
        lines.append(f"-- {title} --")
        lines.append(f"{'cum ms':>9} {'own ms':>8} {'calls':>8}  function")
        for (path, lineno, name), (_cc, calls, own, cumulative, _callers) in [
            row for row in rows if keep(row[0][0])
        ][:PROFILE_TOP]:
            lines.append(
                f"{cumulative * 1000 / turns:>9.2f} {own * 1000 / turns:>8.2f} "
                f"{calls / turns:>8.0f}  {short_path(path)}:{lineno}({name})"
            )
    return "\n".join(lines)


def short_path(path: str) -> str:
    """A profiled function's file, from its package (or the repository) down."""
    path = path.removeprefix(f"{Path.cwd()}/")
    return re.sub(r"^.*/(site-packages|lib/python3\.\d+)/", "", path)


# --- the cold case: clotho serve started, to the first token --------------------------------


def free_port() -> int:
    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cold_database(directory: Path, texts: Texts) -> tuple[str, str]:
    """A database with one session of the history, from a campaign that sets the window
    as ours above (no trimming) and no extraction: its URL and the session's id."""
    campaign = directory / "campaign"
    campaign.mkdir()
    (campaign / "campaign.toml").write_text(
        f'title = "bench"\n\n[model]\ncontext_window = {CONTEXT_WINDOW}\nextract = false\n'
    )
    url = f"sqlite:///{directory / 'cold.db'}"
    store = Store.open(url)
    try:
        sid = store.create_session(title="bench", campaign=str(campaign)).id
        for start in range(0, len(texts.history), GROW_BATCH):
            with store.transaction(sid) as tx:
                for role, text in texts.history[start : start + GROW_BATCH]:
                    tx.append(role, text)
    finally:
        store.close()
    return url, sid


def cold_start(directory: Path, texts: Texts, model_url: str) -> float:
    """Seconds from starting ``clotho serve`` to the first token of a ``say`` turn sent
    as soon as its health answers."""
    token = "bench-" + "0123456789abcdef" * 3
    url, sid = cold_database(directory, texts)
    port = free_port()
    env = {
        **os.environ,
        "CLOTHO_DATABASE_URL": url,
        "CLOTHO_DATA_DIR": str(directory),
        "CLOTHO_API_TOKEN": token,
        "CLOTHO_MODEL": MODEL,
        "CLOTHO_API_BASE": model_url,
        "CLOTHO_API_KEY": API_KEY,
    }
    base = f"http://127.0.0.1:{port}"
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "clotho", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}) as api:
            while True:
                if time.perf_counter() - started > COLD_TIMEOUT_S or server.poll() is not None:
                    raise SystemExit(f"cold: clotho serve did not answer: {server.stderr}")
                try:
                    api.get("/api/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.01)
            body = {"kind": "say", "text": texts.players[0]}
            path = f"/api/sessions/{sid}/turns"
            with api.stream("POST", path, json=body, timeout=COLD_TIMEOUT_S) as response:
                for line in response.iter_lines():
                    if line == "event: token":
                        return time.perf_counter() - started
                    if line == "event: error":
                        raise SystemExit(f"cold: the turn failed: {response.read()!r}")
        raise SystemExit("cold: the turn sent no token")
    finally:
        server.terminate()
        try:
            server.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.communicate()


def measure_cold(args: argparse.Namespace, directory: Path) -> list[float]:
    depth = args.depths[-1]
    texts = make_texts(depth, 1)
    runs = []
    with ModelServer(script_for(texts.reply)) as server:
        for run_index in range(args.cold_runs):
            where = directory / f"cold-{run_index}"
            where.mkdir()
            runs.append(cold_start(where, texts, server.url))
            print(f"  cold start {run_index + 1}: {runs[-1]:.2f} s", flush=True)
    return runs


# --- output ----------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def print_depth(report: DepthReport, linear: bool) -> None:
    timed = len(report.timings["ours"].samples)
    if linear:
        where = f"{report.depth}..{report.depth_end}: one chat, from {report.depth} messages"
    else:
        where = f"{report.depth}: {report.depth} messages of history before each turn"
    sent = f"{report.sent} sent per call" + (" at first" if linear else "")
    print(f"\n== depth {where}, {sent}, {timed} timed turns ==")
    print(
        f"{'side':<20} {'median ms':>10} {'mean ms':>9} {'min ms':>8} {'request ms':>11} "
        f"{'overhead ms':>12} {'median-post':>12}"
    )
    for name in ("ours", "peer", "bare", "gateway", "post", "ours+extract", "ours+cold"):
        timing = report.timings.get(name)
        if timing is None:
            continue
        overhead = (
            ""
            if name == "post"
            else f"{report.overhead(name):12.1f} {report.median_difference(name):12.1f}"
        )
        print(
            f"{timing.label:<20} {timing.median:>10.1f} {timing.mean:>9.1f} "
            f"{timing.least:>8.1f} {timing.request:>11.1f} {overhead}"
        )
    ours, peer = report.timings["ours"], report.timings["peer"]
    print(
        f"{'peer/ours':<20} {peer.median / ours.median:>10.2f} {peer.mean / ours.mean:>9.2f} "
        f"{peer.least / ours.least:>8.2f}"
    )
    print(
        "overhead: median of (turn - plain POST of the same round); median-post: of the "
        "medians; request ms: median from the call to the server holding the request"
    )
    for name, before, after, played in report.sizes:
        grown = (after - before) / played
        print(
            f"  {name} db: {before:,} bytes after the pre-fill, {after:,} at the end "
            f"({grown:,.0f} bytes per turn played)"
        )
    print(f"  peer: {report.note}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--depths", type=int, nargs="+", help="history depths in messages (default 100 2000)"
    )
    parser.add_argument("--turns", type=int, help="timed turns per side and depth (default 30)")
    parser.add_argument("--warmup", type=int, help="untimed rounds first (default 3)")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: depths 50 400, 5 turns, 1 warm-up"
    )
    parser.add_argument(
        "--linear",
        action="store_true",
        help="one continuous chat per side (the depth grows by 2 a turn) instead of "
        "every turn starting at the depth",
    )
    parser.add_argument(
        "--no-extract",
        dest="extract",
        action="store_false",
        help="skip the informative 'ours + extraction' side",
    )
    parser.add_argument(
        "--no-cold",
        dest="cold",
        action="store_false",
        help="skip the informative 'ours, cold' side (no path kept in memory)",
    )
    parser.add_argument(
        "--no-cold-start",
        dest="cold_start",
        action="store_false",
        help="skip the cold case (clotho serve started, to the first token)",
    )
    parser.add_argument(
        "--cold-runs", type=int, default=3, help="clotho serve starts timed (default 3)"
    )
    parser.add_argument(
        "--peer-synchronous",
        choices=("NORMAL", "FULL"),
        default="NORMAL",
        help="PRAGMA synchronous of the peer's connection (ours is NORMAL)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="then profile N of our turns at the largest depth (cProfile, by cumtime)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(tempfile.gettempdir()),
        help="where the temporary databases go (default: the system temp directory)",
    )
    args = parser.parse_args(argv)
    args.depths = sorted(set(args.depths or ([50, 400] if args.quick else [100, 2000])))
    args.turns = args.turns or (5 if args.quick else 30)
    if args.warmup is None:
        args.warmup = 1 if args.quick else 3
    if args.depths[0] < 2 or args.depths[0] % 2 or args.turns < 1 or args.warmup < 1:
        parser.error("depths must be even and at least 2; turns and warm-up at least 1")
    return args


async def run(args: argparse.Namespace, directory: Path) -> list[DepthReport]:
    try:
        return [await measure(depth, args, directory) for depth in args.depths]
    finally:
        await litellm.close_litellm_async_clients()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    packages = ("litellm", "openai", "langgraph", "langgraph-checkpoint-sqlite", "aiosqlite")
    try:
        versions = " ".join(f"{p}={metadata.version(p)}" for p in packages)
    except metadata.PackageNotFoundError:
        print("LangGraph is missing: .venv/bin/pip install -e '.[bench]'", file=sys.stderr)
        return 2
    print(
        f"depths={args.depths} turns={args.turns} warmup={args.warmup} "
        f"mode={'linear' if args.linear else 'fork (every turn at the depth)'} "
        f"python={sys.version.split()[0]} sqlite={sqlite3.sqlite_version} {versions} "
        f"peer synchronous={args.peer_synchronous} (ours NORMAL)",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="clotho-bench-", dir=args.dir) as tmp:
        directory = Path(tmp)
        print(f"files in {directory} (deleted at the end)", flush=True)
        reports = asyncio.run(run(args, directory))
        colds = measure_cold(args, directory) if args.cold_start else []

    for report in reports:
        print_depth(report, args.linear)
    for report in reports:
        if report.profile:
            print(f"\n== profile of our turn at depth {report.depth} (top {PROFILE_TOP}) ==")
            print(report.profile.rstrip())

    high = reports[-1]
    ratio = high.timings["peer"].median / high.timings["ours"].median
    overhead = high.overhead("ours")
    cold_s = statistics.median(colds) if colds else float("nan")
    if colds:
        spread = ", ".join(f"{c:.2f}" for c in colds)
        print(f"\ncold: clotho serve started to the first token: {spread} s")
    print(
        f"\ntargets: turn ratio {ratio:.2f} >= {TARGET_TURN_RATIO:g} "
        f"{verdict(ratio >= TARGET_TURN_RATIO)}; "
        f"overhead {overhead:.1f} ms < {TARGET_OVERHEAD_MS:g} at depth {high.depth} "
        f"{verdict(overhead < TARGET_OVERHEAD_MS)}; "
        f"cold start {cold_s:.2f} s < {TARGET_COLD_S:g} {verdict(cold_s < TARGET_COLD_S)}"
    )
    print(
        f"ratio turn={ratio:.1f} overhead_ms={overhead:.1f} cold_s={cold_s:.2f} "
        f"at depth {high.depth}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
