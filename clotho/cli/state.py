"""Commands on the world state: state, diff, blame, changes, campaign check; the state's
and a diff's text (:func:`state_lines`, :func:`diff_lines`), which play's ``/state`` and
``/diff`` print too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from clotho.formats.campaign import load_campaign
from mnemosyne import WorldState

from . import render
from ._app import Cli, app, campaign_app, command
from .cells import terminal_width, wrap_line
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


def state_lines(world: WorldState, width: int | None) -> list[str]:
    """The world state as a table, styled and wrapped to ``width`` (``None``: lines
    whole): each variable and its value, then the active lore, who is present (once
    someone came or went), the summary and the author's note (``clotho state`` and
    play's ``/state``); the internal fields (the lore's timers) are left to ``--json``."""
    lines: list[str] = []
    names = max((len(name) for name in world.variables), default=0)
    for name, value in sorted(world.variables.items()):
        lines += wrap_line(_show(value), width, lead=f"{paint(name.ljust(names), 'bold')}  ")
    if not world.variables:
        lines.append(paint("(no variables yet)", "dim"))
    lead = f"{paint('active lore', 'dim')}  "
    active = ", ".join(world.active_lore_ids) or "(none)"
    lines += wrap_line(active, width, lead=lead, indent=2)
    if world.present is not None:  # null: everyone (no one has come or gone)
        here = ", ".join(world.present) or "(no one)"
        lines += wrap_line(here, width, lead=f"{paint('present', 'dim')}  ", indent=2)
    if world.summary:
        lines += wrap_line(world.summary, width, lead=f"{paint('summary', 'dim')}  ", indent=2)
    note = world.author_note
    if note:
        where = {
            "after_story": "after the story string",
            "before_story": "before the story string",
        }.get(note["position"], f"in the chat at depth {note['depth']}")
        every = "never" if note["interval"] == 0 else f"every {note['interval']} message(s)"
        lines += wrap_line(
            f"{note['text']}  ({where}, {every}, as {note['role']})",
            width,
            lead=f"{paint('author note', 'dim')}  ",
            indent=2,
        )
    return lines


def diff_lines(changed: dict[str, list[Any]], width: int | None) -> list[str]:
    """What differs between two world states (:meth:`mnemosyne.Store.diff`), a line
    each, wrapped to ``width``: ``hp: 100 -> 90`` (``clotho diff`` and play's
    ``/diff``)."""
    if not changed:
        return [paint("(no difference)", "dim")]
    lines: list[str] = []
    for path, (before, after) in changed.items():
        lead = f"{paint(path, 'bold')}: "
        lines += wrap_line(f"{_show(before)} -> {_show(after)}", width, lead=lead, indent=2)
    return lines


@command(app, "state")
def state(cli: Cli, node: NodeArgument = None) -> None:
    """The world state after NODE: variables, active lore, summary, author's note."""
    world = cli.store.state(cli.session_id(), node)
    cli.emit(world.as_dict(), lambda: out(*state_lines(world, terminal_width())))


@command(app, "diff")
def diff(
    cli: Cli,
    a: Annotated[str, typer.Argument(metavar="A", help="The earlier node.")],
    b: Annotated[str, typer.Argument(metavar="B", help="The later node.")],
) -> None:
    """What differs between the world after A and after B."""
    changed = cli.store.diff(cli.session_id(), a, b)
    cli.emit(changed, lambda: out(*diff_lines(changed, terminal_width())))


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
