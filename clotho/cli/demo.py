"""``clotho demo``: a short campaign played end to end, with nothing to configure.

The model is a small scripted game master that Clotho serves on loopback through the
OpenAI protocol (:mod:`clotho.cli.gamemaster`), so the demo runs the code path a real
model runs: the turn graph, litellm, streaming, state extraction, PromptTraces. With
``--model`` (and ``--api-base``) it plays the same moves with a real model instead.

It shows a fight, a purchase, a reroll that gives the HP back, flipping between the
alternatives, an edit of an old message as a fork, checkout, a tree edit and its
undo, traces with the lore that came in and why (a small lorebook, ``demo_lore.json``:
an entry that fires by its key, one found by meaning, one waiting for ``hp < 50``), and
the whole tree. Its database is thrown away unless ``--keep``: then its last line is a
command that opens it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mnemosyne import Store, schema_from_mapping
from mnemosyne.edits import Prune

from . import render
from ._app import Cli, app, command
from .style import out, paint

if TYPE_CHECKING:
    from clotho.settings import Settings
    from mnemosyne.traces import Trace

DEMO_VARIABLES = {
    "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
    "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
    "inventory": {"type": "list"},
}
DEMO_SCHEMA = schema_from_mapping({"variables": DEMO_VARIABLES})
TITLE = "The Goblin Cave"
#: The demo's lorebook (World Info JSON, as SillyTavern writes it).
LOREBOOK = Path(__file__).with_name("demo_lore.json")


@command(app, "demo")
def demo(
    cli: Cli,
    keep: Annotated[
        bool,
        typer.Option("--keep", help="Keep the demo's database and print a command that opens it."),
    ] = False,
) -> None:
    """Play a short campaign end to end on a fresh database (a scripted model by default)."""
    directory = Path(tempfile.mkdtemp(prefix="clotho-demo-"))
    url = cli.options["db"] or f"sqlite:///{directory / 'demo.db'}"
    kept = keep or bool(cli.options["db"])  # a database of the user's own stays
    # the lore index (and anything else the demo writes) lives with its database
    settings = cli.settings.model_copy(update={"data_dir": directory})
    try:
        with Store.open(url) as store, contextlib.ExitStack() as stack:
            result = _play_demo(cli, settings, store, stack, url, kept)
    finally:
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    result["kept"] = kept
    if not cli.json:
        out("", *_closing(result, url, kept))
    cli.emit(result, lambda: None)


def _closing(result: dict[str, Any], url: str, kept: bool) -> list[str]:
    """The demo's last lines: where its story is, and a command that works."""
    if not kept:
        return [
            "The demo's database is gone. To keep one and explore the story with the",
            "commands above (log, tree, trace, swipe, checkout HEAD~2, undo...):",
            "  clotho demo --keep",
        ]
    sid = result["session"]["id"][:8]
    return [
        f"The demo's story is kept in {url}; open it with --db and --session, as in:",
        f"  clotho --db {url} --session {sid} trace HEAD",
    ]


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


def _play_demo(
    cli: Cli,
    settings: Settings,
    store: Store,
    stack: contextlib.ExitStack,
    url: str,
    kept: bool,
) -> dict[str, Any]:
    from clotho.lore import import_lorebook, session_books, session_planner
    from orchestrator import TurnKind, TurnRequest, build_engine

    quiet = cli.json
    setup, who = _setup(cli, stack)
    session = store.create_session(title=f"{TITLE} (demo)", schema=DEMO_SCHEMA)
    sid = session.id
    import_lorebook(store, sid, LOREBOOK.read_bytes(), TITLE)
    [book] = session_books(store, sid)
    engine = build_engine(
        store, setup, planner=lambda call: session_planner(store, sid, settings, None, call)
    )
    runner = stack.enter_context(asyncio.Runner())
    stack.callback(lambda: runner.run(engine.aclose()))
    steps: list[dict[str, Any]] = []
    entries = {f"{book.name}:{entry.uid}": entry for entry in book.entries}

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

    def explain(label: str, node_id: str) -> dict[str, Any]:
        """A reply's trace, told: what was sent, which lore came in and why, and not."""
        trace = store.trace(sid, node_id)
        assert trace is not None
        lore = _lore_of(trace, entries)
        say(
            f"   {label} ({render.short(node_id)}): {len(trace.messages)} messages sent to "
            f"{trace.document['model']}, "
            f"{'verified against their hash' if trace.verified else 'NOT verified'}"
        )
        for entry in lore["fired"]:
            say(f"     lore in:  {paint(entry['comment'], 'bold')}: {entry['reason']}")
        for entry in lore["skipped"]:
            say(paint(f"     lore out: {entry['comment']}: {entry['reason']}", "dim"))
        return {"node_id": node_id, "verified": trace.verified, **lore, "trace": trace}

    say(f"{paint('Clotho demo', 'bold')} on {url}\nThe model: {who}")
    say(
        f"The lore: the lorebook {book.name!r} (World Info, as SillyTavern writes it): "
        + "; ".join(_entry_summary(entry) for entry in book.entries)
        + "\n"
    )
    say(f"1. A fight. Session {paint(sid[:8], 'dim')}; the player says:")
    say(paint("   > I draw my sword and step into the cave.", "green"))
    fight = turn("say", text="I draw my sword and step into the cave.")
    say(f"   {world()}")
    steps.append({"step": "scene", "head_id": fight.node.id, "state": store.state(sid).as_dict()})

    say("\n2. A purchase, badly hurt:")
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

    say("\n4. Swipe back to the first reply: HEAD lands where that timeline left off;")
    say("   swipe forward again: back on the reroll.")
    back, _ = store.switch_sibling(sid, "prev", rerolled.node.id)
    say(f"   swipe prev: HEAD -> {render.node_line(back, head_id=None)} {world()}")
    steps.append({"step": "swipe", "head_id": back.id, "state": store.state(sid).as_dict()})
    forward, _ = store.switch_sibling(sid, "next", fight.node.id)
    say(f"   swipe next: HEAD -> {render.node_line(forward, head_id=None)} {world()}")

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

    say("\n8. Why did the game master say that? Each reply's PromptTrace keeps what was sent,")
    say("   the lore that came in and why, and the lore that did not and why:")
    fought = explain("the fight", fight.node.id)
    purchase = explain("the purchase", bought.node.id)
    trace: Trace = purchase.pop("trace")
    fought.pop("trace")
    post = trace.document["postprocess"] or {}
    say(f"   planner: {trace.document['planner']['reasoning']}")
    changes = [op for op in trace.document["delta"] if op["path"] in DEMO_VARIABLES]
    told = ", ".join(f"{op['op']} {op['path']} {op['value']!r}" for op in changes)
    outcome = "ok" if post.get("ok") else "failed"
    say(f"   the purchase's state extraction: {outcome}: {told or 'no change'}")
    if kept:
        say(f"   (a whole trace: clotho --db {url} --session {sid[:8]} trace {bought.node.id[:8]})")
    steps.append(
        {
            "step": "trace",
            "node_id": bought.node.id,
            "verified": trace.verified,
            "messages": len(trace.messages),
            "lore": {"fight": fought, "purchase": purchase},
        }
    )

    say("\n9. The whole tree (the edited first message is a second root: a graph of its own):")
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


def _entry_summary(entry: Any) -> str:
    """How an entry of the demo's book may come in, in a few words."""
    if entry.condition:
        how = f"waits for {entry.condition}"
    elif entry.vectorized:
        how = "is found by meaning (marked vectorized)"
    else:
        how = "fires by its key " + ", ".join(repr(key) for key in entry.keys)
    return f"{entry.comment} {how}"


def _lore_of(trace: Trace, entries: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The lore of a trace: each entry that came in (``via``: which way; the reason says
    so, and an entry's condition held if it has one) and each that did not, with the
    reason, named by its comment."""
    fired = []
    for hit in trace.document.get("lore") or []:
        entry = entries.get(hit["id"])
        reason = hit["reason"]
        if entry is not None and entry.condition:
            reason += f"; its condition {entry.condition} holds"
        comment = hit.get("comment") or hit["id"]
        fired.append({"id": hit["id"], "comment": comment, "via": hit["via"], "reason": reason})
    skipped = [
        {
            "id": miss["id"],
            "comment": entries[miss["id"]].comment if miss["id"] in entries else miss["id"],
            "reason": miss["reason"],
        }
        for miss in trace.document.get("lore_skipped") or []
    ]
    return {"fired": fired, "skipped": skipped}
