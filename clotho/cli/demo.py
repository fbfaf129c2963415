"""``clotho demo``: a short campaign played end to end, with nothing to configure.

The model is a small scripted game master that Clotho serves on loopback through the
OpenAI protocol (:mod:`clotho.cli.gamemaster`), so the demo runs the code path a real
model runs: the turn graph, litellm, streaming, state extraction, PromptTraces. With
``--model`` (and ``--api-base``) it plays the same moves with a real model instead.

It shows a fight, a purchase, a reroll that gives the HP back, flipping between the
alternatives, an edit of an old message as a fork, checkout, a tree edit and its
undo, a trace, and the whole tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from mnemosyne import Store, schema_from_mapping
from mnemosyne.edits import Prune

from . import render
from ._app import Cli, app, command
from .style import out, paint

DEMO_SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
            "inventory": {"type": "list"},
        }
    }
)
TITLE = "The Goblin Cave"


@command(app, "demo")
def demo(
    cli: Cli,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the demo database and print where it is.")
    ] = False,
) -> None:
    """Play a short campaign end to end on a fresh database (a scripted model by default)."""
    directory = Path(tempfile.mkdtemp(prefix="clotho-demo-"))
    url = cli.options["db"] or f"sqlite:///{directory / 'demo.db'}"
    try:
        with Store.open(url) as store, contextlib.ExitStack() as stack:
            result = _play_demo(cli, store, stack, url)
    finally:
        if not keep:
            for path in directory.glob("*"):
                path.unlink()
            directory.rmdir()
    if keep:
        sid = result["session"]["id"]
        if not cli.json:
            out(f"\nKept: clotho --db {url} --session {sid} tree")
    cli.emit(result, lambda: None)


def _setup(cli: Cli, stack: contextlib.ExitStack) -> tuple[Any, str]:
    from clotho.cli.gamemaster import DEMO_MODEL, serve_game_master
    from clotho.wiring import turn_setup
    from orchestrator import Character, ModelConfig, TurnSetup

    if cli.settings.model:
        setup = turn_setup(cli.settings, None)
        return setup, f"the model {setup.model.model}"
    server = stack.enter_context(serve_game_master())
    model = ModelConfig(DEMO_MODEL, api_base=server.url)
    setup = TurnSetup(model=model, character=Character(name="Narrator"), title=TITLE)
    return setup, f"a scripted game master served on {server.url} (OpenAI protocol)"


def _play_demo(cli: Cli, store: Store, stack: contextlib.ExitStack, url: str) -> dict[str, Any]:
    from orchestrator import TurnKind, TurnRequest, build_engine

    quiet = cli.json
    setup, who = _setup(cli, stack)
    engine = build_engine(store, setup)
    runner = stack.enter_context(asyncio.Runner())
    stack.callback(lambda: runner.run(engine.aclose()))
    session = store.create_session(title=f"{TITLE} (demo)", schema=DEMO_SCHEMA)
    sid = session.id
    steps: list[dict[str, Any]] = []

    def say(text: str) -> None:
        if not quiet:
            out(text)

    def world(at: str | None = None) -> str:
        v = store.state(sid, at).variables
        items = ", ".join(v["inventory"]) or "nothing"
        return paint(f"[hp {v['hp']}, gold {v['gold']}, carrying {items}]", "yellow")

    def on_event(kind: str, text: str) -> None:
        if quiet:
            return
        if kind == "token":
            sys.stdout.write(text)
            sys.stdout.flush()

    def turn(kind: TurnKind, **kwargs: Any) -> Any:
        if not quiet:
            sys.stdout.write(paint("   GM: ", "cyan"))
        result = runner.run(engine.run(sid, TurnRequest(kind, **kwargs), on_event))
        say("")
        for warning in result.warnings:
            say(paint(f"   warning: {warning}", "yellow"))
        return result

    say(f"{paint('Clotho demo', 'bold')} on {url}\nThe model: {who}\n")
    say(f"1. A fight. Session {paint(sid[:8], 'dim')}; the player says:")
    say(paint("   > I draw my sword and step into the cave.", "green"))
    fight = turn("say", text="I draw my sword and step into the cave.")
    say(f"   {world()}")
    steps.append({"step": "scene", "head_id": fight.node.id, "state": store.state(sid).as_dict()})

    say("\n2. A purchase:")
    say(paint("   > I buy a healing potion from the merchant.", "green"))
    bought = turn("say", text="I buy a healing potion from the merchant.")
    say(f"   {world()}")
    steps.append(
        {"step": "purchase", "head_id": bought.node.id, "state": store.state(sid).as_dict()}
    )

    say("\n3. Reroll the fight: a second reply beside the first; nothing is lost.")
    rerolled = turn("reroll", node=fight.node.id)
    view = store.turn(sid)
    say(f"   now on {render.alternatives(view)} {world()}")
    say("   (no blade struck in this timeline: the hp is whole, the gold unspent)")
    steps.append(
        {
            "step": "reroll",
            "head_id": rerolled.node.id,
            "siblings": view.siblings,
            "state": store.state(sid).as_dict(),
        }
    )

    say("\n4. Swipe back to the first reply: HEAD lands where that timeline left off.")
    back, _ = store.switch_sibling(sid, "prev", rerolled.node.id)
    say(f"   prev -> {render.node_line(back, head_id=back.id)} {world()}")
    steps.append({"step": "swipe", "head_id": back.id, "state": store.state(sid).as_dict()})
    forward, _ = store.switch_sibling(sid, "next", fight.node.id)
    say(f"   next -> {render.node_line(forward, head_id=forward.id)} {world()}")

    say("\n5. Edit the first message as a fork, and play it; the old timeline stays whole:")
    first_user = store.projection(sid)[0]
    say(paint("   > I sneak into the cave quietly.", "green"))
    edited = turn("edit", node=first_user.id, text="I sneak into the cave quietly.")
    say(f"   {world()}")
    assert edited.user_node is not None
    steps.append({"step": "edit", "head_id": edited.node.id, "edited": edited.user_node.id})

    say("\n6. Back to the purchase (checkout): its state comes back with it.")
    old, _ = store.checkout(sid, bought.node.id)
    say(f"   {render.node_line(old, head_id=old.id)} {world()}")
    steps.append({"step": "checkout", "head_id": old.id, "state": store.state(sid).as_dict()})

    say("\n7. The tree editor: prune the sneaking branch into a fragment, then undo.")
    pruned, _ = store.edit(sid, Prune(node_id=edited.user_node.id))
    say(f"   prune -> {len(store.fragments(sid))} fragment, {len(store.tree(sid).nodes)} nodes")
    store.undo(sid)
    say(f"   undo  -> {len(store.fragments(sid))} fragments, {len(store.tree(sid).nodes)} nodes")
    steps.append(
        {
            "step": "undo",
            "pruned": pruned.node_id,
            "fragments_after_undo": len(store.fragments(sid)),
        }
    )

    say("\n8. Why did the game master say that? The PromptTrace of the reroll:")
    trace = store.trace(sid, rerolled.node.id)
    assert trace is not None
    post = trace.document["postprocess"] or {}
    say(
        f"   {len(trace.messages)} messages sent to {trace.document['model']}, "
        f"{'verified against their hash' if trace.verified else 'NOT verified'}; "
        f"stored as {len(trace.parts)} parts"
    )
    say(f"   planner: {trace.document['planner']['reasoning']}")
    outcome = "ok" if post.get("ok") else "failed"
    say(f"   state extraction: {outcome}, delta {trace.document['delta']}")
    say(f"   (the whole trace: clotho trace {rerolled.node.id[:8]})")
    steps.append(
        {
            "step": "trace",
            "node_id": rerolled.node.id,
            "verified": trace.verified,
            "messages": len(trace.messages),
        }
    )

    say("\n9. The whole tree:")
    whole = store.tree(sid)
    if not quiet:
        render.print_tree(whole)
    return {
        "database": url,
        "model": setup.model.model,
        "session": store.session(sid).as_dict(),
        "steps": steps,
        "tree": whole.as_dict(),
    }
