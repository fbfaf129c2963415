"""``clotho tag``, ``clotho branch``, ``clotho tags``: names on nodes, git's way
(:mod:`mnemosyne.refs`; ``docs/tags.md``).

A tag names a node for good; a branch names the tip of a story and follows a turn
played from its tip. Either is taken wherever a node is (``clotho checkout
first-meeting``, ``clotho show first-meeting~2``). Every change is one undo step.
``--json``: the change's result (``action``, ``node_id``...) with the session's
``version``; a list prints each name as :meth:`mnemosyne.refs.RefView.as_dict`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from clotho.errors import UsageError
from mnemosyne import EditResult, Session, refs
from mnemosyne.refs import RefView

from . import render
from ._app import Cli, app, command
from .cells import clean, clip, terminal_width
from .style import out, paint
from .tree import ExpectVersion

__all__ = ["branch", "tag", "tags"]

DeleteOption = Annotated[
    str | None,
    typer.Option("-d", "--delete", metavar="NAME", help="Delete this name.", show_default=False),
]
ForceOption = Annotated[
    bool, typer.Option("-f", "--force", help="Move the name if it exists already.")
]
RenameOption = Annotated[
    tuple[str, str] | None,
    typer.Option("-m", "--rename", metavar="OLD NEW", help="Rename.", show_default=False),
]


def _line(ref: RefView, width: int | None, pad: int) -> str:
    """``main  branch  1a2b3c4d  text…`` (``(HEAD)``, ``in the trash``); the name padded
    to ``pad`` characters."""
    where = "" if ref.place == "tree" else f"  in the {ref.place}"
    head = "  (HEAD)" if ref.at_head else ""
    lead = f"{ref.name:<{pad}}  {ref.kind:<6}  {render.short(ref.node_id)}  "
    text = " ".join(clean(ref.content).split()) or "(empty)"
    room = None if width is None else max(20, width - len(lead) - len(where) - len(head))
    shown = text if room is None else clip(text, room)
    return (
        paint(ref.name, "bold", "green")
        + paint(lead[len(ref.name) :], "dim")
        + shown
        + paint(where, "yellow")
        + paint(head, "bold", "yellow")
    )


def _list(cli: Cli, session_id: str, kind: str | None) -> None:
    listed = refs.listed(cli.store, session_id, kind)
    width = terminal_width()
    what = "names" if kind is None else f"{kind}es" if kind == "branch" else f"{kind}s"

    def show() -> None:
        if not listed:
            out(paint(f"(no {what})", "dim"))
        pad = max((len(ref.name) for ref in listed), default=0)
        for ref in listed:
            out(_line(ref, width, pad))

    cli.emit([ref.as_dict() for ref in listed], show)


def _report(cli: Cli, result: EditResult, session: Session, said: str) -> None:
    cli.emit({**result.as_dict(), "version": session.version}, lambda: out(said))


def _change(
    cli: Cli,
    kind: str,
    name: str | None,
    node: str,
    *,
    delete: str | None,
    rename: tuple[str, str] | None,
    force: bool,
    expect_version: int | None,
) -> None:
    session_id = cli.session_id()
    store = cli.store
    if sum(x is not None for x in (name, delete, rename)) != 1:
        raise UsageError(f"give a NAME, or -d NAME, or -m OLD NEW (one of them) to {kind}")
    if delete is not None:
        result, session = refs.unname(
            store, session_id, delete, kind, expected_version=expect_version
        )
        _report(cli, result, session, f"Deleted {kind} {paint(delete, 'bold')}")
    elif rename is not None:
        old, new = rename
        result, session = refs.rename_name(
            store, session_id, old, new, kind, expected_version=expect_version
        )
        _report(cli, result, session, f"Renamed {old} to {paint(new, 'bold')}")
    else:
        assert name is not None
        result, session = refs.name_node(
            store, session_id, name, kind, node, force=force, expected_version=expect_version
        )
        at = render.short(result.node_id)
        _report(cli, result, session, f"{kind.capitalize()} {paint(name, 'bold')} at {at}")


@command(app, "tag")
def tag(
    cli: Cli,
    node: Annotated[
        str | None,
        typer.Argument(
            help="The node to name: id or prefix, HEAD~N, another name.", show_default=False
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Argument(help="The tag's name (first-meeting).", show_default=False)
    ] = None,
    delete: DeleteOption = None,
    rename: RenameOption = None,
    force: ForceOption = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Name a node for good: `clotho tag HEAD~2 first-meeting`, then
    `clotho checkout first-meeting`. -d NAME deletes a tag, -m OLD NEW renames one;
    alone, lists the tags. One undo step each."""
    if node is None and delete is None and rename is None:
        return _list(cli, cli.session_id(), "tag")
    if node is not None and name is None:
        raise UsageError("give the node and the tag's name: clotho tag NODE NAME")
    _change(
        cli,
        "tag",
        name,
        node or "HEAD",
        delete=delete,
        rename=rename,
        force=force,
        expect_version=expect_version,
    )
    return None


@command(app, "branch")
def branch(
    cli: Cli,
    name: Annotated[
        str | None, typer.Argument(help="The branch's name (main).", show_default=False)
    ] = None,
    node: Annotated[
        str, typer.Argument(help="Its tip: a node (default HEAD).", show_default=False)
    ] = "HEAD",
    delete: DeleteOption = None,
    rename: RenameOption = None,
    force: ForceOption = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Name the tip of a story: a branch follows the turns played from its tip, so
    `clotho checkout NAME` comes back to where that story stands now. -d NAME deletes
    a branch, -m OLD NEW renames one, -f moves one; alone, lists the branches. One
    undo step each."""
    if name is None and delete is None and rename is None:
        return _list(cli, cli.session_id(), "branch")
    _change(
        cli,
        "branch",
        name,
        node,
        delete=delete,
        rename=rename,
        force=force,
        expect_version=expect_version,
    )
    return None


@command(app, "tags")
def tags(cli: Cli) -> None:
    """Every name of the session, tags and branches: its kind, its node (and whether
    that is HEAD, in a fragment or in the trash) and the start of its text."""
    _list(cli, cli.session_id(), None)
