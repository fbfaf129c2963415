"""How long ``clotho log`` and ``clotho tree`` take on a long story, as a player runs them.

Run from the repository root::

    .venv/bin/python bench/log_tree.py                   # 2,000 messages on the path
    .venv/bin/python bench/log_tree.py --messages 5000 --repeat 3

The session: a path of ``--messages`` messages (user and assistant in turn, the
replies named, lengths from one line to 4,000 characters in paragraphs, every tenth
reply with CJK and emoji, a few disabled or cut short) and, every tenth message, a
side branch of three messages (so the tree holds a fifth more). Each command runs as
a player runs it: a new ``clotho`` process, output to a file (not a terminal, so no
pager), ``COLUMNS=120``; the time is the median of ``--repeat`` runs, import included
(most of it: see ``clotho --version``). Then the same reads and renderings in this
process (the store's read, :mod:`clotho.cli.render`, the lines written to /dev/null),
which the machine's load disturbs less.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _texts import line  # noqa: E402

from clotho.cli import render  # noqa: E402
from mnemosyne import NodeRecord, Store  # noqa: E402

CLOTHO = [sys.executable, "-m", "clotho"]
CJK = "她笑了笑，说：「欢迎来到龙之谷。」🐉✨ 旅人们围着篝火坐下。"


def _text(rng: random.Random, i: int) -> str:
    size = rng.choice((60, 200, 600, 1200, 4000))
    paragraphs = [line(rng, f"[{i}]", size // 3 + 1) for _ in range(3)]
    if i % 20 == 1:
        paragraphs.append(CJK * 3)
    return "\n\n".join(paragraphs)


def build(store: Store, messages: int, seed: int = 11) -> str:
    """A session as the module's docstring says; its id."""
    rng = random.Random(seed)
    records: list[NodeRecord] = []
    path: list[int] = []
    for i in range(messages):
        role = "user" if i % 2 == 0 else "assistant"
        parent = path[-1] if path else None
        records.append(
            NodeRecord(
                role=role,
                content=_text(rng, i),
                parent=parent,
                name="Seraphina" if role == "assistant" else None,
                enabled=i % 97 != 5,
                metadata={"incomplete": True} if i % 89 == 3 else None,
            )
        )
        path.append(len(records) - 1)
    for at in range(1, messages, 10):  # a side branch of three under every tenth message
        parent: int | None = records[path[at]].parent  # type: ignore[assignment]
        for j in range(3):
            role = "assistant" if j % 2 == 0 else "user"
            records.append(NodeRecord(role=role, content=_text(rng, at), parent=parent))
            parent = len(records) - 1
    for index, record in enumerate(path[:-1]):  # the path goes on through path[i + 1]
        records[record] = dataclasses.replace(records[record], active_child=path[index + 1])
    session = store.create_session(title=f"{messages} messages")
    with store.transaction(session.id) as tx:
        tx.insert_nodes(records, head=path[-1])
    return session.id


def timed(args: list[str], env: dict[str, str], repeat: int) -> tuple[float, int]:
    """Median ms of ``clotho ARGS > file``, and the lines it printed."""
    times = []
    lines = 0
    with tempfile.TemporaryFile() as sink:
        for _ in range(repeat):
            sink.seek(0)
            sink.truncate()
            start = time.perf_counter()
            subprocess.run(
                [*CLOTHO, *args], env=env, stdout=sink, stderr=subprocess.DEVNULL, check=True
            )
            times.append((time.perf_counter() - start) * 1000)
            sink.seek(0)
            lines = sink.read().count(b"\n")
    return statistics.median(times), lines


def in_process(store: Store, sid: str, repeat: int) -> None:
    """Read, render and write each view here, median of ``repeat``."""
    views = {
        "log": lambda: _window(store, sid, None),
        "log --last 50": lambda: _window(store, sid, 50),
        "tree": lambda: render.tree_lines(store.tree(sid), width=120),
        "tree --all": lambda: render.tree_lines(store.tree(sid), width=120, all=True),
    }
    with open(os.devnull, "w", encoding="utf-8") as sink:
        for name, view in views.items():
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                sink.write("".join(line + "\n" for line in view()))
                times.append((time.perf_counter() - start) * 1000)
            print(f"in process: {name:<14} {statistics.median(times):7.1f} ms")


def _window(store: Store, sid: str, last: int | None) -> list[str]:
    session, turns, first = render.log_window(store, sid, last)
    return render.log_lines(session, turns, width=120, first_number=first)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'clotho.db'}"
        with Store.open(url) as store:
            sid = build(store, args.messages)
            in_process(store, sid, args.repeat)
        env = {
            **os.environ,
            "CLOTHO_DATABASE_URL": url,
            "CLOTHO_SESSION": sid,
            "COLUMNS": "120",
            "NO_COLOR": "1",
        }
        timed(["--version"], env, 1)  # warm the file cache
        base, _ = timed(["--version"], env, args.repeat)
        print(f"clotho --version         {base:7.0f} ms  (the import alone)")
        for command in (
            ["log"],
            ["log", "--last", "50"],
            ["tree"],
            ["tree", "--all"],
            ["log", "--json"],
        ):
            try:
                ms, lines = timed(command, env, args.repeat)
            except subprocess.CalledProcessError:
                print(f"clotho {' '.join(command):<17} (not supported)")
                continue
            print(f"clotho {' '.join(command):<17} {ms:7.0f} ms  {lines:7,} lines")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
