"""How long a server's warm-up holds its event loop (what every other request waits).

Run from the repository root::

    .venv/bin/python bench/warm_stall.py            # 3 rounds, each in a fresh process

Each round, in a fresh interpreter (nothing imported yet, as a server starts): a store
with no session and a model set (``openai/gm`` on a closed loopback port: the warm-up
makes no connection), :class:`clotho.api.warm.Warmup` started in a running loop while a
ticker task sleeps 5 ms at a time and records how late it wakes. Printed per round: the
warm-up's wall time, the worst and 99th-percentile stall of the loop during it, and the
time of the part that runs on the loop (``Gateway.warm``, the streamed mock call, after
the worker threads loaded the rest). The last line is the worst round's figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUND = r"""
import asyncio, json, sys, tempfile, time
from pathlib import Path

from clotho.api import warm
from clotho.api.context import ApiContext
from clotho.settings import Settings
from mnemosyne import Store

on_loop = []
original = warm._warm


async def timed_warm(ctx):
    from orchestrator import Gateway

    real = Gateway.warm

    async def measured(self, config):
        started = time.perf_counter()
        try:
            await real(self, config)
        finally:
            on_loop.append(time.perf_counter() - started)

    Gateway.warm = measured
    try:
        await original(ctx)
    finally:
        Gateway.warm = real


if asyncio.iscoroutinefunction(original):  # (a warm-up in a thread of its own: no loop part)
    warm._warm = timed_warm


async def main():
    folder = Path(tempfile.mkdtemp(prefix="clotho-warm-"))
    settings = Settings(
        data_dir=folder, vectors=False, model="openai/gm", api_base="http://127.0.0.1:9/v1"
    )
    with Store.open(f"sqlite:///{folder / 'warm.db'}") as store:
        ctx = ApiContext(settings, store, None)
        warmup = warm.Warmup()
        stalls = []
        started = time.perf_counter()
        warmup.start(ctx)
        while warmup.state == "warming":
            asked = time.perf_counter()
            await asyncio.sleep(0.005)
            stalls.append(time.perf_counter() - asked - 0.005)
        total = time.perf_counter() - started
        await ctx.aclose()
    stalls.sort()
    print(json.dumps({
        "warm_s": total,
        "ok": warmup.seconds is not None,
        "max_stall_ms": stalls[-1] * 1000,
        "p99_stall_ms": stalls[int(len(stalls) * 0.99)] * 1000,
        "on_loop_ms": on_loop[0] * 1000 if on_loop else None,
    }))


asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes (default 3)")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "round.py"
        script.write_text(ROUND)
        for number in range(1, args.rounds + 1):
            done = subprocess.run(
                [sys.executable, str(script)], capture_output=True, text=True, check=True
            )
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            rounds.append(figures)
            print(
                f"round {number}: warm {figures['warm_s']:.2f} s, loop stalled at worst "
                f"{figures['max_stall_ms']:.1f} ms (p99 {figures['p99_stall_ms']:.1f} ms), "
                f"on-loop call {figures['on_loop_ms'] or 0:.1f} ms, warmed={figures['ok']}"
            )
    worst = max(rounds, key=lambda figures: figures["max_stall_ms"])
    print(
        f"warm_stall max_stall_ms={worst['max_stall_ms']:.1f} "
        f"p99_stall_ms={worst['p99_stall_ms']:.1f} on_loop_ms={worst['on_loop_ms'] or 0:.1f} "
        f"warm_s={worst['warm_s']:.2f} rounds={len(rounds)} at {time.strftime('%Y-%m-%d')}"
    )


if __name__ == "__main__":
    main()
