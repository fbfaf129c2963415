"""A cascade: the engine's own cost per regenerated turn (issue 25's Measure; no target).

Run from the repository root::

    .venv/bin/python bench/cascade.py                      # 20 turns after depth 1,000
    .venv/bin/python bench/cascade.py --turns 5 --depth 100  # a smoke run

The work: a session in a new SQLite file with ``--depth`` messages (player and reply
pairs, stored as an import stores them, with no model) before an old branch of
``--turns`` exchanges played by the engine; the old branch's first message is edited as
a fork, and the cascade regenerates the rest on it: ``--turns`` replies generated again
by the engine's own turn, ``--turns - 1`` player's messages copied, each step its own
transaction. The model is the loopback server, answering at once (a short reply; the
extraction an empty delta). The time spent in the model calls is measured around each
gateway call (the reply's stream, the extraction, a summary when the history outgrows
the window), so what is printed is the engine's own: reading the story, the lore, the
prompt and its trimming, the commit and trace, the cascade's copies and its plan.

Printed: the plan's time, the run's total, the model's share, and last
``cascade engine_ms_per_turn=<x> turns=<n> depth=<d>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemosyne import Store, schema_from_mapping
from orchestrator import ModelConfig, TurnRequest, TurnSetup, build_engine
from orchestrator.cascade import Cascade, plan_cascade
from orchestrator.loopback import ModelServer

SCHEMA = schema_from_mapping(
    {"variables": {"hp": {"type": "int", "default": 100, "min": 0, "max": 100}}}
)


def answer(request: dict[str, Any]) -> str:
    if "response_format" in request:
        return json.dumps({"operations": []})
    if request["messages"][0]["content"].startswith("Summarise"):
        return "The hero walked a long way through the caves."
    return "The goblin circles you, blade low, and the torchlight shakes on the wall."


class Timed:
    """The seconds spent in the gateway's model calls (wrapped in place)."""

    def __init__(self, gateway: Any) -> None:
        self.seconds = 0.0
        for name in ("stream", "complete"):
            setattr(gateway, name, self._timed(getattr(gateway, name)))

    def _timed(self, call: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--depth", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, ModelServer(answer) as server:
        store = Store.open(f"sqlite:///{Path(folder) / 'cascade.db'}", migrate=True)
        sid = store.create_session(schema=SCHEMA).id
        with store.transaction(sid) as tx:
            for i in range(args.depth // 2):
                tx.append("user", f"I walk on, step {i}.")
                tx.append("assistant", f"The cave goes on, turn {i}.")
        model = ModelConfig("openai/gm", api_base=server.url, retries=0)
        engine = build_engine(store, TurnSetup(model=model))

        async def old_branch() -> str:
            first = ""
            for i in range(args.turns):
                result = await engine.run(sid, TurnRequest("say", text=f"I strike, blow {i}."))
                first = first or result.user_node.id  # type: ignore[union-attr]
            return first

        async def run() -> tuple[float, float, float, int]:
            original = await old_branch()
            store.add_sibling(sid, original, "I wait in the dark instead.")
            timed = Timed(engine.gateway)
            start = time.perf_counter()
            plan = plan_cascade(store, sid)
            planned = time.perf_counter() - start
            outcome = await Cascade(engine, store).run(plan)
            total = time.perf_counter() - start
            assert outcome.complete, outcome.as_dict()
            generated = sum(1 for step in outcome.made if step.generated)
            await engine.aclose()
            return planned, total, timed.seconds, generated

        planned, total, model_s, generated = asyncio.run(run())
        store.close()
    engine_ms = (total - model_s) * 1000
    print(f"plan {planned * 1000:.1f} ms (the old branch of {2 * args.turns - 1} nodes below)")
    print(
        f"run {total * 1000:.0f} ms: model calls {model_s * 1000:.0f} ms, "
        f"the engine {engine_ms:.0f} ms for {generated} replies"
    )
    print(
        f"cascade engine_ms_per_turn={engine_ms / max(generated, 1):.1f} "
        f"turns={generated} depth={args.depth}"
    )


if __name__ == "__main__":
    main()
