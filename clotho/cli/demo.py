"""``clotho demo``: a short campaign, end to end, with nothing to configure.

It grows with the project. Today it shows the conversation tree: a scene, a reroll
that keeps the first reply, flipping between the alternatives, an edit of an old
message as a fork, moving HEAD back, the projection and the whole tree. The
replies are scripted: the model joins with the turn loop.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from mnemosyne import Store, schema_from_mapping

from . import render
from ._app import Cli, app, command
from .style import out, paint

SCRIPT_NOTE = "(replies are scripted here: the model joins the demo with the turn loop)"

DEMO_SCHEMA = schema_from_mapping(
    {
        "variables": {
            "hp": {"type": "int", "default": 100, "min": 0, "max": 100},
            "gold": {"type": "int", "default": 10, "min": 0, "out_of_bounds": "refuse"},
        }
    }
)


@command(app, "demo")
def demo(
    cli: Cli,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the demo database and print where it is.")
    ] = False,
) -> None:
    """Play a short scripted campaign on a fresh database and show the tree."""
    directory = Path(tempfile.mkdtemp(prefix="clotho-demo-"))
    url = cli.options["db"] or f"sqlite:///{directory / 'demo.db'}"
    steps: list[dict[str, Any]] = []
    quiet = cli.json

    def say(text: str) -> None:
        if not quiet:
            out(text)

    with Store.open(url) as store:
        session = store.create_session(title="The Goblin Cave (demo)", schema=DEMO_SCHEMA)
        sid = session.id

        def world() -> str:
            variables = store.state(sid).variables
            return paint(f"[hp {variables['hp']}, gold {variables['gold']}]", "yellow")

        say(f"{paint('Clotho demo', 'bold')} on {url}\n{SCRIPT_NOTE}\n")
        say(f"1. A new session {paint(session.id, 'dim')}, and the scene:")
        for role, text in [
            ("system", "You are the narrator of a grim fantasy campaign."),
            ("assistant", "Rain hammers the mouth of the goblin cave. Torchlight flickers inside."),
            ("user", "I draw my sword and step into the cave."),
        ]:
            node, session = store.append(sid, role, text, expected_version=session.version)
            say("   " + render.node_line(node, head_id=node.id))
        first, session = store.append(
            sid,
            "assistant",
            "A goblin leaps from the shadows and slashes your arm.",
            name="Narrator",
            delta=[{"op": "inc", "path": "hp", "value": -10}],
            expected_version=session.version,
        )
        say("   " + render.node_line(first, head_id=first.id) + " " + world())
        steps.append({"step": "scene", "head_id": first.id, "state": store.state(sid).as_dict()})

        say("\n2. Reroll: a second reply beside the first; nothing is lost.")
        second, session = store.add_sibling(
            sid,
            first.id,
            "The cave is silent. A goblin sleeps beside a chest of gold.",
            expected_version=session.version,
        )
        turn = store.turn(sid)
        say(f"   now on < {turn.index + 1}/{len(turn.siblings)} >: {second.content} {world()}")
        say("   (no goblin struck in this timeline: the hp is whole again)")
        steps.append(
            {
                "step": "reroll",
                "head_id": second.id,
                "siblings": turn.siblings,
                "state": store.state(sid).as_dict(),
            }
        )

        say("\n3. Swipe back to the first reply, and forward again.")
        back, session = store.switch_sibling(sid, "prev", expected_version=session.version)
        say(f"   prev -> {back.content} {world()}")
        fwd, session = store.switch_sibling(sid, "next", expected_version=session.version)
        say(f"   next -> {fwd.content} {world()}")
        more, session = store.append(
            sid,
            "user",
            "I sneak past the goblin and open the chest.",
            delta=[{"op": "inc", "path": "gold", "value": 25}],
            expected_version=session.version,
        )
        say("   " + render.node_line(more, head_id=more.id) + " " + world())
        steps.append({"step": "swipe", "head_id": fwd.id})

        say("\n4. Edit an old message as a fork: the old timeline stays whole.")
        user_turn = store.projection(sid)[2]
        edited, session = store.add_sibling(
            sid,
            user_turn.id,
            "I throw a torch into the cave first.",
            expected_version=session.version,
        )
        reply, session = store.append(
            sid,
            "assistant",
            "Shrieks echo as three goblins flee into the rain.",
            expected_version=session.version,
        )
        say("   " + render.node_line(reply, head_id=reply.id) + " " + world())
        steps.append({"step": "edit", "head_id": reply.id, "edited": edited.id})

        say("\n5. The projection at HEAD (what the model would see):")
        session, turns = store.projection_turns(sid)
        if not quiet:
            render.print_log(session, turns)
        say("\n6. Back to the first timeline (checkout), where we left it:")
        old, session = store.checkout(sid, more.id, expected_version=session.version)
        say("   " + render.node_line(old, head_id=old.id) + " " + world())
        say("   (the gold from the chest is back in the purse of this timeline)")
        steps.append({"step": "checkout", "head_id": old.id, "state": store.state(sid).as_dict()})

        say("\n7. The tree editor: prune the torch branch into a fragment, then undo.")
        pruned, session = store.edit(sid, "prune", edited.id, expected_version=session.version)
        left = len(store.tree(sid).nodes)
        say(f"   prune -> {len(store.fragments(sid))} fragment, {left} nodes left in the tree")
        _, session = store.undo(sid, expected_version=session.version)
        back = len(store.tree(sid).nodes)
        say(f"   undo  -> {len(store.fragments(sid))} fragments, {back} nodes: the branch is back")
        steps.append(
            {
                "step": "undo",
                "pruned": pruned.node_id,
                "fragments_after_undo": len(store.fragments(sid)),
            }
        )

        say("\n8. The whole tree:")
        whole = store.tree(sid)
        if not quiet:
            render.print_tree(whole)
        result = {
            "database": url,
            "session": session.as_dict(),
            "steps": steps,
            "tree": whole.as_dict(),
        }

    if keep:
        say(f"\nKept: clotho --db {url} --session {sid} tree")
    else:
        for path in directory.glob("*"):
            path.unlink()
        directory.rmdir()
    cli.emit(result, lambda: None)
