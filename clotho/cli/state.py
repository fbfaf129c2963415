"""Commands on the world state: state, diff, blame, changes, campaign check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from clotho.formats.campaign import load_campaign

from . import render
from ._app import Cli, app, campaign_app, command
from .style import out, paint

NodeArgument = Annotated[
    str | None,
    typer.Argument(
        metavar="[NODE]", help="A node: id or prefix, HEAD~N (default: HEAD).", show_default=False
    ),
]
PathArgument = Annotated[
    str, typer.Argument(metavar="PATH", help="A variable, a map entry (affinity.marla), summary…")
]


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@command(app, "state")
def state(cli: Cli, node: NodeArgument = None) -> None:
    """The world state after NODE: variables, active lore, summary, author's note."""
    world = cli.store.state(cli.session_id(), node)

    def text() -> None:
        lines = []
        width = max((len(name) for name in world.variables), default=0)
        for name, value in sorted(world.variables.items()):
            lines.append(f"{paint(name.rjust(width), 'bold')}  {_show(value)}")
        if not world.variables:
            lines.append(paint("(no variables yet)", "dim"))
        lines.append(f"{paint('active lore', 'dim')}  {_show(world.active_lore_ids)}")
        if world.summary:
            lines.append(f"{paint('summary', 'dim')}  {world.summary}")
        note = world.author_note
        if note:
            where = {
                "after_story": "after the story string",
                "before_story": "before the story string",
            }.get(note["position"], f"in the chat at depth {note['depth']}")
            every = "never" if note["interval"] == 0 else f"every {note['interval']} message(s)"
            lines.append(
                f"{paint('author note', 'dim')}  {note['text']}  "
                + paint(f"({where}, {every}, as {note['role']})", "dim")
            )
        out(*lines)

    cli.emit(world.as_dict(), text)


@command(app, "diff")
def diff(
    cli: Cli,
    a: Annotated[str, typer.Argument(metavar="A", help="The earlier node.")],
    b: Annotated[str, typer.Argument(metavar="B", help="The later node.")],
) -> None:
    """What differs between the world after A and after B."""
    changed = cli.store.diff(cli.session_id(), a, b)

    def text() -> None:
        if not changed:
            out(paint("(no difference)", "dim"))
        for path, (before, after) in changed.items():
            out(f"{paint(path, 'bold')}: {_show(before)} -> {_show(after)}")

    cli.emit(changed, text)


@command(app, "blame")
def blame(cli: Cli, path: PathArgument, node: NodeArgument = None) -> None:
    """Which node on the path to NODE last wrote PATH."""
    session_id = cli.session_id()
    found = cli.store.blame(session_id, path, node)

    def text() -> None:
        if found.node_id is None:
            out(f"{paint(path, 'bold')} = {_show(found.value)}  {paint('(never written)', 'dim')}")
            return
        writer = cli.store.node(session_id, found.node_id)
        out(
            f"{paint(path, 'bold')} = {_show(found.value)}, last written by:",
            "  " + render.node_line(writer, head_id=None),
        )

    cli.emit(found.as_dict(), text)


@command(app, "changes")
def changes(cli: Cli, path: PathArgument, node: NodeArgument = None) -> None:
    """Every node on the path to NODE that wrote PATH, oldest first."""
    start, found = cli.store.changes(cli.session_id(), path, node)
    document = {"path": path, "start": start, "changes": [c.as_dict() for c in found]}

    def text() -> None:
        lines = [f"{paint(path, 'bold')} starts at {_show(start)}"]
        for change in found:
            ops = ", ".join(f"{op['op']} {_show(op.get('value'))}" for op in change.operations)
            lines.append(
                f"  {paint(render.short(change.node_id), 'dim')} {ops} -> {_show(change.value)}"
            )
        out(*lines)

    cli.emit(document, text)


@command(campaign_app, "check")
def campaign_check(
    cli: Cli, folder: Annotated[Path, typer.Argument(metavar="DIR", help="The campaign folder.")]
) -> None:
    """Read a campaign folder and report its schema, or what is wrong with it."""
    campaign = load_campaign(folder)
    schema = campaign.schema
    document = {
        "folder": str(campaign.folder),
        "title": campaign.title,
        "state_schema": schema.model_dump(exclude_defaults=True),
        "initial_state": schema.initial_state(),
    }

    def text() -> None:
        lines = [f"{paint(campaign.title or campaign.folder.name, 'bold')}: campaign is valid"]
        for name, spec in schema.variables.items():
            bounds = "".join(
                f" {side} {getattr(spec, side)}"
                for side in ("min", "max")
                if getattr(spec, side) is not None
            )
            lines.append(f"  {name}: {spec.type}{bounds}, starts at {_show(spec.initial())}")
        if schema.permissive:
            lines.append("  (no [state]: any variable may be set)")
        out(*lines)

    cli.emit(document, text)
