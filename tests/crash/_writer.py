"""The writer the crash tests kill: a zygote that forks one writer child per kill.

Run as ``python -m tests.crash._writer``. It imports everything a turn needs once (the
engine, litellm: several seconds), prints ``ready``, then for every line
``turns|edits DB_URL SESSION_ID LOG_PATH SEED`` read on stdin forks a child that writes
to the session until it is killed, and prints the child's pid. The test SIGKILLs the
child at a random moment; children are reaped automatically (SIGCHLD ignored), so the
test knows a child is gone when ``os.kill(pid, 0)`` fails.

A child opens its own store (nothing of the zygote's is shared but imported modules)
and, after each commit, appends ``VERSION USERS HASH`` to LOG_PATH (one ``write`` of an
``O_APPEND`` file): the last line names the last commit the child knows of, so the test
can tell a commit whose line was never written (the database one version ahead) from a
half-written one (the database at the logged version with another tree).

- ``turns``: real turns through ``orchestrator.Engine`` (as ``clotho say`` wires it),
  against the model server on loopback at ``CLOTHO_API_BASE``: mostly ``say``, some
  ``reroll`` and ``edit``, each committing its nodes, delta and trace in one transaction.
- ``edits``: batches of 2-5 editor operations in one transaction (one undo step), some
  of them refused mid-batch (the whole batch rolls back), and undo/redo.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys

from clotho.settings import Settings
from clotho.wiring import session_engine
from mnemosyne import MnemosyneError, Store
from mnemosyne.edits import EDITS, Graft, Inject, Restore, Rewrite, Toggle
from orchestrator import OrchestratorError, TurnRequest

from ._invariants import tree_digest, user_turns

EDIT_OPS = ("rewrite", "toggle", "inject", "copy", "delete", "restore", "prune", "graft", "move")


def _log(path: str, store: Store, session_id: str) -> None:
    dump = store.dump(session_id)
    line = f"{dump.session.version} {user_turns(dump)} {tree_digest(dump)}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


async def _turns(store: Store, session_id: str, log: str, rng: random.Random) -> None:
    settings = Settings(database_url=store.engine.url.render_as_string(hide_password=False))
    engine = session_engine(settings, store, session_id)
    n = 0
    while True:
        n += 1
        roll = rng.random()
        users = [node for node in store.projection(session_id) if node.role == "user"]
        if roll < 0.15 and store.session(session_id).head_id is not None:
            request = TurnRequest("reroll")
        elif roll < 0.25 and users:
            request = TurnRequest("edit", text=f"turn-{n}-{rng.random():.6f}", node=users[-1].id)
        else:
            request = TurnRequest("say", text=f"turn-{n}-{rng.random():.6f}")
        try:
            await engine.run(session_id, request)
        except OrchestratorError:
            continue  # refused (nothing to reroll...): nothing was stored
        _log(log, store, session_id)


def _edit_batch(store: Store, session_id: str, rng: random.Random) -> None:
    tree = store.tree(session_id)
    ids = [node.id for node in tree.nodes]
    hidden = [group[0].id for group in (*store.fragments(session_id), *store.trash(session_id))]
    with store.transaction(session_id) as tx, tx.batch():
        for _ in range(rng.randint(2, 5)):
            op = rng.choice(EDIT_OPS)
            node = rng.choice(ids)
            if op == "rewrite":
                text = f"rewritten {rng.random():.6f} " * rng.randint(1, 50)
                tx.apply(Rewrite(node_id=node, content=text))
            elif op == "toggle":
                tx.apply(Toggle(node_id=node))
            elif op == "inject":
                text = f"injected {rng.random():.6f}"
                tx.apply(Inject(parent_id=node, role="assistant", content=text))
            elif op in ("copy", "move"):
                tx.apply(EDITS[op](node_id=node, parent_id=rng.choice(ids)))
            elif op in ("delete", "prune"):
                inner = [n.id for n in tree.nodes if n.parent_id is not None]
                if inner:  # a root stays: the tree never empties
                    tx.apply(EDITS[op](node_id=rng.choice(inner)))
            elif op in ("restore", "graft") and hidden:
                if op == "restore":
                    tx.apply(Restore(node_id=rng.choice(hidden)))
                else:
                    tx.apply(Graft(node_id=rng.choice(hidden), parent_id=rng.choice(ids)))


def _edits(store: Store, session_id: str, log: str, rng: random.Random) -> None:
    while True:
        roll = rng.random()
        try:
            if roll < 0.15:
                store.undo(session_id)
            elif roll < 0.25:
                store.redo(session_id)
            else:
                _edit_batch(store, session_id, rng)
        except MnemosyneError:
            continue  # refused (a cycle, nothing to undo...): nothing changed
        _log(log, store, session_id)


def _child(mode: str, url: str, session_id: str, log: str, seed: int) -> None:
    rng = random.Random(seed)
    store = Store.open(url)
    if mode == "turns":
        asyncio.run(_turns(store, session_id, log, rng))
    else:
        _edits(store, session_id, log, rng)


def _warm() -> None:
    """Import what a turn imports lazily (litellm alone takes seconds), so that a child
    starts writing at once."""
    import importlib

    for name in (
        "litellm",
        "orchestrator.gateway",
        "orchestrator.turn",
        "planner.worldinfo",
        "postprocess",
        "prompts",
        "clotho.lore",
        "langgraph.graph",
    ):
        importlib.import_module(name)


def main() -> None:
    _warm()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        mode, url, session_id, log, seed = line.split()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _child(mode, url, session_id, log, int(seed))
            except BaseException:  # noqa: BLE001 - a forked child must always _exit
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
