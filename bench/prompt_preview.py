"""The context meter's cost: one preview of the next turn's prompt, against reading the
story's path, which every turn (and every preview) does first.

Run from the repository root::

    .venv/bin/python bench/prompt_preview.py            # stories of 200 and 5,000 messages
    .venv/bin/python bench/prompt_preview.py --quick    # 200 only, a smoke run

Each story is one chain of messages of ~60 words on SQLite, with an author's note at
HEAD; the model is none (no call is made: the default 8,192-token window, litellm's
default tokenizer), so the oldest messages of the long story are trimmed and the
preview reports that a summary would be written. Printed per story, medians of 15 after
one warm-up: ``preview_ms`` (``Engine.preview_prompt`` with a draft), ``path_ms``
(``store.messages``, the path root → HEAD), and their ratio. The page asks for a preview
when the story changes and, 400 ms after the player stops typing: a preview well under
that pause keeps the meter current.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mnemosyne import Store
from mnemosyne.edits import Note
from orchestrator import ModelConfig, TurnSetup, build_engine

REPEATS = 15
WORDS = " ".join(f"word{i}" for i in range(60))


def story(store: Store, length: int) -> str:
    sid = store.create_session(title=f"{length} messages").id
    with store.transaction(sid) as tx:
        for index in range(length):
            tx.append("user" if index % 2 else "assistant", f"{index} {WORDS}")
    store.edit(sid, Note.checked(note={"text": "Keep it grim.", "interval": 2}))
    return sid


def median_ms(work: object, repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        work()  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    lengths = [200] if parser.parse_args().quick else [200, 5000]
    with tempfile.TemporaryDirectory() as folder:
        store = Store.open(f"sqlite:///{Path(folder) / 'bench.db'}")
        engine = build_engine(store, TurnSetup(model=ModelConfig("none")))
        loop = asyncio.new_event_loop()
        try:
            for length in lengths:
                sid = story(store, length)
                preview = loop.run_until_complete(engine.preview_prompt(sid, "I go on."))
                ms = median_ms(
                    lambda sid=sid: loop.run_until_complete(engine.preview_prompt(sid, "I go on."))
                )
                path = median_ms(lambda sid=sid: store.messages(sid))
                print(
                    f"messages={length} used={preview.used}/{preview.window} "
                    f"trimmed={preview.trimmed} summary={preview.summary} "
                    f"preview_ms={ms:.1f} path_ms={path:.1f} ratio={ms / path:.1f}"
                )
            loop.run_until_complete(engine.aclose())
        finally:
            loop.close()
            store.close()


if __name__ == "__main__":
    main()
