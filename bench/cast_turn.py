"""What a turn costs the engine in a story with a cast of eight, against the same story
played by one character (issue 24).

Run from the repository root::

    .venv/bin/python bench/cast_turn.py            # depth 2,000, 20 timed turns a side
    .venv/bin/python bench/cast_turn.py --quick    # depth 400, 5 timed turns

The story: ``--depth`` nodes (player's messages ~300 characters, replies ~600, all
different, from bench/_texts.py), among them the scene changes of eight characters,
each absent from a quarter of the story (character k leaves at node 100 + 190k and
joins 500 nodes later, so about two are away at any point; 16 scene-change nodes whose
deltas change ``present``, as ``clotho cast leave/join`` commits them). The replies
are named for their speakers, in turn among those present.

Three sessions hold that same story, in one SQLite file each:

- **one** -- played by one character (``TurnSetup(character=...)``, no cast): the
  prompt is the whole history, as before issue 24.
- **cast** -- played by the cast of eight (``TurnSetup(cast=...)``): each turn is a
  ``say`` answered by the next member in turn, so each of the eight is timed; its
  prompt holds only what that member witnessed (read with ``Store.scenes``, one pass
  over the scene changes), an ``away`` line at each gap, the others present in the
  ``cast`` part, each reply with its speaker's name, and the trace says what was left
  out.
- **narrator** -- the cast of eight, every turn answered by ``NARRATOR`` (the
  ``narrator`` order): no scoping (the narrator sees everything), so its prompt is the
  whole history, each reply with its speaker's name, and every member present in the
  ``cast`` part: the cost of a cast without the savings of scoping.

The model is ``orchestrator.loopback.ModelServer`` on 127.0.0.1 (same reply every
time, streamed), no extraction, a 10,000,000-token window (nothing trimmed), the lore
planner the rule-based one (no book). After each turn (untimed) HEAD goes back to the
end of the pre-filled story, so every turn starts at the same depth. Each round plays
one turn of each session (the order rotating), then POSTs (``httpx``, keep-alive)
the exact body each one sent: a session's **overhead** is the median over the rounds
of its turn minus its POST (what the engine does beyond the model call: load, plan,
build, the call through litellm, commit with the trace). ``gc.collect()`` before each
timed call; the wait for litellm's background work is bench/turn_overhead.py's.

Target (issue 24): cast overhead < 2x the one-character overhead. The last line is
``ratio overhead=<cast / one> one_ms=<ms> cast_ms=<ms> at depth <depth>``.
``--profile N`` plays N more cast turns under cProfile (top functions by cumulative
time).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import pstats
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _texts import line
from turn_overhead import Post, chat_request, script_for, timed

from mnemosyne import Store
from orchestrator import NARRATOR, Character, Engine, ModelConfig, TurnRequest, TurnSetup
from orchestrator.loopback import ModelServer

MODEL = "openai/gm"
API_KEY = "bench"
CONTEXT_WINDOW = 10_000_000
SEED = 20_261_125
GROW_BATCH = 500
NAMES = ("Ann", "Bram", "Cora", "Dag", "Edda", "Finn", "Greta", "Hob")
TARGET_RATIO = 2.0


@dataclass(frozen=True)
class Story:
    nodes: list[tuple[str, str | None, str, list[dict[str, Any]] | None]]
    """(role, name, text, delta) root first."""
    players: list[str]
    reply: str


def absence(index: int, depth: int) -> tuple[int, int]:
    """Where character ``index`` leaves and joins: a quarter of the story each."""
    span = depth // 4
    step = (depth - span - depth // 20 - depth // 10) // (len(NAMES) - 1)
    leave = depth // 20 + step * index
    return leave, leave + span


def make_story(depth: int, turns: int) -> Story:
    rng = random.Random(SEED + depth)
    moves: dict[int, tuple[str, str]] = {}
    for index, name in enumerate(NAMES):
        leave, join = absence(index, depth)
        moves[leave] = (name, "leaves")
        moves[join] = (name, "joins")
    present: list[str] | None = None
    nodes: list[tuple[str, str | None, str, list[dict[str, Any]] | None]] = []
    spoke, i = 0, 0
    while len(nodes) < depth:
        at = len(nodes)
        if at in moves:
            name, move = moves[at]
            if move == "leaves":
                if present is None:
                    stay = [other for other in NAMES if other != name]
                    op: dict[str, Any] = {"op": "set", "path": "present", "value": stay}
                else:
                    op = {"op": "remove", "path": "present", "value": name}
                present = stay if present is None else [p for p in present if p != name]
            else:
                op = {"op": "append", "path": "present", "value": name}
                present = [*(present or []), name]
            nodes.append(("system", None, f"{name} {move} the scene.", [op]))
            continue
        if i % 2 == 0:
            nodes.append(("user", "Player", line(rng, f"[message {at}] I", 300), None))
        else:
            here = [n for n in NAMES if present is None or n in present]
            speaker = here[spoke % len(here)]
            spoke += 1
            nodes.append(("assistant", speaker, line(rng, f"[message {at}] {speaker}:", 600), None))
        i += 1
    players = [line(rng, f"[turn {i}] I", 300) for i in range(turns)]
    return Story(nodes, players, line(rng, "[reply] The scene:", 600))


class Side:
    """One session holding the story, played by one character or by the cast."""

    def __init__(
        self, name: str, path: Path, story: Story, url: str, cast: bool, narrator: bool = False
    ) -> None:
        self.name = name
        self.store = Store.open(f"sqlite:///{path}")
        self.sid = self.store.create_session(title=name).id
        for start in range(0, len(story.nodes), GROW_BATCH):
            with self.store.transaction(self.sid) as tx:
                for role, speaker, text, delta in story.nodes[start : start + GROW_BATCH]:
                    tx.append(role, text, name=speaker, delta=delta)
        self.base = self.store.session(self.sid).head_id
        model = ModelConfig(MODEL, api_base=url, api_key=API_KEY, context_window=CONTEXT_WINDOW)
        members = tuple(
            Character(name=n, description=f"{n}, one of the eight travellers.") for n in NAMES
        )
        setup = TurnSetup(
            model=model,
            extract=False,
            character=members[0],
            cast=members if cast else (),
            player="Player",
        )
        self.engine = Engine(self.store, setup, rng=random.Random(SEED))
        self.cast = cast
        self.narrator = narrator
        self.reply = story.reply
        self.turns = 0
        self.samples: list[float] = []
        self.posts: list[float] = []
        self.left_out: list[int] = []
        self.sent = 0
        """Messages in the last prompt."""

    async def turn(self, text: str) -> None:
        speaker = NAMES[self.turns % len(NAMES)] if self.cast else None
        if self.narrator:
            speaker = NARRATOR
        self.turns += 1
        result = await self.engine.run(self.sid, TurnRequest("say", text, speaker=speaker))
        if result.completion.content != self.reply:
            raise SystemExit(f"{self.name}: the reply came back changed")
        self.last = result

    def note(self) -> None:
        """What the last turn's trace says was left out (untimed)."""
        assert self.last.node is not None
        trace = self.store.trace(self.sid, self.last.node.id)
        assert trace is not None and trace.verified, "the trace does not verify"
        scene = trace.document.get("scene")
        self.left_out.append(sum(run["count"] for run in scene["left_out"]) if scene else 0)

    def reset(self) -> None:
        assert self.base is not None
        self.store.checkout(self.sid, self.base)

    @property
    def overhead(self) -> float:
        pairs = zip(self.samples, self.posts, strict=True)
        return statistics.median(side - post for side, post in pairs) * 1000


@dataclass
class Report:
    depth: int
    sides: list[Side] = field(default_factory=list)
    profile: str = ""


async def measure(args: argparse.Namespace, directory: Path) -> Report:
    story = make_story(args.depth, args.warmup + args.turns + args.profile)
    report = Report(args.depth)
    with ModelServer(script_for(story.reply)) as server:
        one = Side("one", directory / "one.db", story, server.url, cast=False)
        cast = Side("cast", directory / "cast.db", story, server.url, cast=True)
        narrator = Side(
            "narrator", directory / "narrator.db", story, server.url, cast=True, narrator=True
        )
        report.sides = [one, cast, narrator]
        post = Post(server.url)
        try:
            for round_ in range(args.warmup + args.turns):
                text = story.players[round_]
                shift = round_ % len(report.sides)
                order = report.sides[shift:] + report.sides[:shift]
                for side in order:
                    gc.collect()
                    took = await timed(side.turn(text))
                    request = chat_request(server)
                    post.body = request.body
                    side.sent = len(request.messages)
                    gc.collect()
                    posted = await timed(post.turn(text))
                    side.note()
                    side.reset()
                    if round_ >= args.warmup:
                        side.samples.append(took)
                        side.posts.append(posted)
            if args.profile:
                report.profile = await profile(cast, story, args)
        finally:
            await post.close()
            for side in report.sides:
                await side.engine.aclose()
                side.store.close()
    return report


async def profile(side: Side, story: Story, args: argparse.Namespace) -> str:
    profiler = cProfile.Profile()
    for i in range(args.profile):
        text = story.players[args.warmup + args.turns + i]
        profiler.enable()
        await side.turn(text)
        profiler.disable()
        side.reset()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=24, help="timed turns per session")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="cast turns under cProfile")
    parser.add_argument("--quick", action="store_true", help="depth 400, 5 turns, 1 warm-up")
    args = parser.parse_args(argv)
    if args.quick:
        args.depth, args.turns, args.warmup = 400, 5, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"depth={args.depth} turns={args.turns} warmup={args.warmup} cast={len(NAMES)} "
        f"python={sys.version.split()[0]}",
        flush=True,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="clotho-cast-bench-") as tmp:
        report = asyncio.run(measure(args, Path(tmp)))
    one, cast, narrator = report.sides
    print(
        f"{'session':<8} {'turn ms (median)':>17} {'POST ms':>8} {'overhead ms':>12} "
        f"{'sent':>5} {'left out':>9}"
    )
    for side in report.sides:
        left = statistics.median(side.left_out) if side.left_out else 0
        print(
            f"{side.name:<8} {statistics.median(side.samples) * 1000:>17.1f} "
            f"{statistics.median(side.posts) * 1000:>8.1f} {side.overhead:>12.1f} "
            f"{side.sent:>5} {left:>9.0f}"
        )
    ratio = cast.overhead / one.overhead
    print(f"narrator / one: {narrator.overhead / one.overhead:.2f} (no scoping, for information)")
    verdict = "ok" if ratio < TARGET_RATIO else "MISSED"
    print(f"target: cast overhead < {TARGET_RATIO}x one-character: {verdict}")
    if report.profile:
        print(report.profile)
    print(f"({time.perf_counter() - started:.0f} s in all)")
    print(
        f"ratio overhead={ratio:.2f} one_ms={one.overhead:.1f} cast_ms={cast.overhead:.1f} "
        f"at depth {report.depth}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
