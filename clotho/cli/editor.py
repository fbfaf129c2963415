"""The tree editor's commands: reshape the tree, and take any step back.

Each editing command builds the typed command of :mod:`mnemosyne.edits` (the one
definition of the operations) and has the store apply it; a field the command refuses
(a malformed id, an unknown role) is a refusal naming it, like any other.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Annotated, Any

import typer

from mnemosyne import EditResult, Node, Session
from mnemosyne.edits import (
    Copy,
    Delete,
    EditCommand,
    Graft,
    Inject,
    Move,
    Note,
    Prune,
    Restore,
    Rewrite,
    Toggle,
)

from . import render
from ._app import Cli, app, command
from .style import out, paint
from .tree import DeltaOption, ExpectVersion, NameOption, parse_delta

NodeArgument = Annotated[
    str, typer.Argument(metavar="NODE", help="A node: id or prefix, HEAD (@), HEAD~N.")
]
OntoOption = Annotated[
    str, typer.Option("--onto", metavar="TARGET", help="The node to attach under.")
]


@functools.cache
def _journal_words() -> dict[str, str]:
    """What each journal action is, in words: the page's English catalogue
    (``app.journal_*`` in ``clotho/web/static/i18n/en.json``), one home for both."""
    catalogue = resources.files("clotho.web").joinpath("static/i18n/en.json").read_text("utf-8")
    app_strings: dict[str, str] = json.loads(catalogue)["app"]
    prefix = "journal_"
    return {k[len(prefix) :]: v for k, v in app_strings.items() if k.startswith(prefix)}


def journal_line(action: str) -> str:
    """``undo say`` as the player reads it: ``undone: the turn (your message and its
    reply)``; an action with no words (several in one batch) as it is."""
    verb, _, what = action.partition(" ")
    if verb not in ("undo", "redo"):
        return action
    done = "undone" if verb == "undo" else "redone"
    return f"{done}: {_journal_words().get(what, what)}"


def _report(cli: Cli, result: EditResult, session: Session) -> None:
    document = {**result.as_dict(), "version": session.version}

    def text() -> None:
        line = f"{paint(journal_line(result.action), 'bold')}"
        if result.node_id:
            line += f" {render.short(result.node_id)}"
        if result.created:
            line += f" (created {len(result.created)})"
        out(line + f"; HEAD {render.short(result.head_id)}")
        if result.note:
            out(paint(result.note, "yellow"))

    cli.emit(document, text)


def _edit(cli: Cli, edit: EditCommand, expect: int | None) -> None:
    result, session = cli.store.edit(cli.session_id(), edit, expected_version=expect)
    _report(cli, result, session)


@command(app, "prune")
def prune(cli: Cli, node: NodeArgument, expect_version: ExpectVersion = None) -> None:
    """Detach NODE's subtree as a fragment, ready to be grafted."""
    _edit(cli, Prune.checked(node_id=node), expect_version)


@command(app, "graft")
def graft(
    cli: Cli, node: NodeArgument, onto: OntoOption, expect_version: ExpectVersion = None
) -> None:
    """Attach a fragment, or move a subtree, under TARGET (its state is replayed there)."""
    _edit(cli, Graft.checked(node_id=node, parent_id=onto), expect_version)


@command(app, "inject")
def inject(
    cli: Cli,
    role: Annotated[str, typer.Argument(help="system, user or assistant.")],
    text: Annotated[str, typer.Argument(help="The new message.")],
    after: Annotated[str, typer.Option("--after", metavar="NODE", help="Insert below NODE.")],
    name: NameOption = None,
    delta: DeltaOption = None,
    expect_version: ExpectVersion = None,
) -> None:
    """A new node between NODE and its active child (or as its only child)."""
    edit = Inject.checked(
        parent_id=after, role=role, content=text, name=name, delta=parse_delta(delta)
    )
    _edit(cli, edit, expect_version)


@command(app, "rewrite")
def rewrite(
    cli: Cli,
    node: NodeArgument,
    text: Annotated[str, typer.Argument(help="The new text.")],
    expect_version: ExpectVersion = None,
) -> None:
    """Change NODE's text in place."""
    _edit(cli, Rewrite.checked(node_id=node, content=text), expect_version)


@command(app, "note")
def note(
    cli: Cli,
    text: Annotated[
        str | None,
        typer.Argument(help="The author's note ({{char}}, {{user}}); leave out with --clear."),
    ] = None,
    node: Annotated[
        str, typer.Option("--node", metavar="NODE", help="Set it from this node on.")
    ] = "HEAD",
    position: Annotated[
        str,
        typer.Option(help="in_chat (at --depth), after_story or before_story."),
    ] = "in_chat",
    depth: Annotated[int, typer.Option(help="In the chat: messages above the end.")] = 4,
    every: Annotated[
        int, typer.Option("--every", help="Every N player messages (1: always; 0: never).")
    ] = 1,
    role: Annotated[str, typer.Option(help="system, user or assistant.")] = "system",
    clear: Annotated[bool, typer.Option("--clear", help="No note from NODE on.")] = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Set the author's note from NODE (HEAD) on: world state, so it rolls back with the
    story (docs/state.md); `--clear` removes it. `clotho state --json` shows it."""
    if clear == (text is not None):
        raise typer.BadParameter("give the note's TEXT, or --clear (not both)")
    fields = {"text": text, "depth": depth, "position": position, "interval": every, "role": role}
    _edit(cli, Note.checked(node_id=node, note=None if clear else fields), expect_version)


@command(app, "toggle")
def toggle(cli: Cli, node: NodeArgument, expect_version: ExpectVersion = None) -> None:
    """Enable or disable NODE (its delta leaves or rejoins every state below it)."""
    _edit(cli, Toggle.checked(node_id=node), expect_version)


@command(app, "delete")
def delete(cli: Cli, node: NodeArgument, expect_version: ExpectVersion = None) -> None:
    """Move NODE and its subtree to the trash (see `trash`, `restore`, `purge`)."""
    _edit(cli, Delete.checked(node_id=node), expect_version)


@command(app, "restore")
def restore(cli: Cli, node: NodeArgument, expect_version: ExpectVersion = None) -> None:
    """Put a trashed subtree back where it hung."""
    _edit(cli, Restore.checked(node_id=node), expect_version)


@command(app, "move")
def move(
    cli: Cli, node: NodeArgument, onto: OntoOption, expect_version: ExpectVersion = None
) -> None:
    """Re-parent NODE alone under TARGET; its children go to its former parent."""
    _edit(cli, Move.checked(node_id=node, parent_id=onto), expect_version)


@command(app, "copy")
def copy(
    cli: Cli,
    node: NodeArgument,
    onto: OntoOption,
    subtree: Annotated[
        bool, typer.Option("--subtree", help="Copy the whole subtree, not just the active branch.")
    ] = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Duplicate NODE and its active branch (or subtree) under TARGET."""
    _edit(cli, Copy.checked(node_id=node, parent_id=onto, subtree=subtree), expect_version)


def _parked(parts: list[list[Node]]) -> list[dict[str, Any]]:
    return [{"top": part[0].as_dict(), "nodes": [n.id for n in part]} for part in parts]


def _print_parked(parts: list[list[Node]], empty: str) -> None:
    if not parts:
        out(paint(empty, "dim"))
    for part in parts:
        out(render.node_line(part[0], head_id=None) + paint(f"  ({len(part)} nodes)", "dim"))


@command(app, "fragments")
def fragments(cli: Cli) -> None:
    """The pruned subtrees waiting to be grafted."""
    parts = cli.store.fragments(cli.session_id())
    cli.emit(_parked(parts), lambda: _print_parked(parts, "(no fragments)"))


@command(app, "trash")
def trash(cli: Cli) -> None:
    """The deleted subtrees (restorable until `purge`)."""
    parts = cli.store.trash(cli.session_id())
    cli.emit(_parked(parts), lambda: _print_parked(parts, "(the trash is empty)"))


@command(app, "purge")
def purge(
    cli: Cli,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask.")] = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Empty the trash for good: the one thing that cannot be undone."""
    session_id = cli.session_id()
    if not yes:
        count = sum(len(part) for part in cli.store.trash(session_id))
        if not typer.confirm(f"Delete {count} node(s) in the trash for good?", err=True):
            raise typer.Exit(1)
    deleted, session = cli.store.purge(session_id, expected_version=expect_version)
    cli.emit(
        {"deleted": deleted, "version": session.version},
        lambda: out(f"purged {deleted} node(s); the undo journal was cleared"),
    )


@command(app, "undo")
def undo(cli: Cli, expect_version: ExpectVersion = None) -> None:
    """Take back the last edit."""
    result, session = cli.store.undo(cli.session_id(), expected_version=expect_version)
    _report(cli, result, session)


@command(app, "redo")
def redo(cli: Cli, expect_version: ExpectVersion = None) -> None:
    """Do again the last edit taken back."""
    result, session = cli.store.redo(cli.session_id(), expected_version=expect_version)
    _report(cli, result, session)


@command(app, "history")
def history(cli: Cli) -> None:
    """The undo journal, oldest first (* marks where you are)."""
    entries = cli.store.history(cli.session_id())

    def text() -> None:
        if not entries:
            out(paint("(nothing to undo)", "dim"))
        for entry in entries:
            mark = paint("*", "bold", "yellow") if entry.current else " "
            state = paint(" (undone)", "dim") if entry.undone else ""
            out(f"{mark} {entry.position:>4} {entry.action:<8} {entry.at:%H:%M:%S}{state}")

    cli.emit([e.as_dict() for e in entries], text)
