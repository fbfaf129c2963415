"""Commands on sessions and the tree (no model involved)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from clotho.errors import UsageError
from clotho.sessions import new_session
from mnemosyne import Node, Session, refs

from . import pager, render
from ._app import Cli, app, command, session_app
from .cells import terminal_size
from .style import out, paint

ExpectVersion = Annotated[
    int | None,
    typer.Option(
        "--expect-version",
        help="Refuse (exit 3) unless the session is still at this version.",
        show_default=False,
    ),
]
DeltaOption = Annotated[
    str | None,
    typer.Option(
        "--delta",
        help='World-state operations as JSON, e.g. \'[{"op":"inc","path":"hp","value":-10}]\'',
        show_default=False,
    ),
]
NameOption = Annotated[
    str | None, typer.Option("--name", help="The speaker's name.", show_default=False)
]


def parse_delta(raw: str | None) -> list[dict[str, Any]] | None:
    """The ``--delta`` option: a JSON list of operation objects."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as error:
        raise UsageError(f"--delta is not valid JSON: {error}") from error
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(op, dict) for op in value):
        raise UsageError(f"--delta must be a JSON list of operation objects, not {raw!r}")
    return value


def _head_report(cli: Cli, session_id: str, node: Node, session: Session) -> None:
    turn = cli.store.turn(session_id, node.id)
    cli.emit(
        {**turn.as_dict(), "version": session.version},
        lambda: out(
            render.node_line(node, head_id=session.head_id, alternatives=render.alternatives(turn))
        ),
    )


# --- sessions -------------------------------------------------------------------


@command(session_app, "new")
def session_new(
    cli: Cli,
    title: Annotated[str | None, typer.Option("--title", help="A title.")] = None,
    campaign: Annotated[
        Path | None, typer.Option("--campaign", help="The campaign folder.", show_default=False)
    ] = None,
) -> None:
    """Create a session; later commands act on it by default.

    With --campaign, the session takes the campaign's world-state schema, its card
    and its lorebooks (kept with the session) and, unless --title is given, its title.
    """
    session = new_session(cli.store, title=title, campaign=campaign)
    cli.remember(session.id)
    cli.emit(
        session.as_dict(),
        lambda: out(
            f"Created session {paint(session.id, 'bold')}"
            + (f" ({session.title})" if session.title else "")
        ),
    )


@command(session_app, "list")
def session_list(cli: Cli) -> None:
    """List the sessions, most recently changed first (* marks the default)."""
    store = cli.store
    sessions = store.sessions()
    counts = store.node_counts()
    current = store.preference("last_session_id")
    cli.emit(
        [
            {**s.as_dict(), "nodes": counts.get(s.id, 0), "current": s.id == current}
            for s in sessions
        ],
        lambda: render.print_sessions(sessions, counts, current),
    )


@command(session_app, "use")
def session_use(
    cli: Cli,
    ref: Annotated[str, typer.Argument(metavar="SESSION", help="Session id or prefix.")],
) -> None:
    """Make a session the default of later commands."""
    chosen = cli.store.session(ref)
    cli.remember(chosen.id)
    cli.emit(chosen.as_dict(), lambda: out(f"Now on session {paint(chosen.id, 'bold')}"))


# --- growing the tree by hand -----------------------------------------------------


@command(app, "add")
def add(
    cli: Cli,
    role: Annotated[str, typer.Argument(help="system, user or assistant.")],
    text: Annotated[str, typer.Argument(help="The message.")],
    name: NameOption = None,
    delta: DeltaOption = None,
    disabled: Annotated[
        bool, typer.Option("--disabled", help="Store it disabled (out of the projection).")
    ] = False,
    expect_version: ExpectVersion = None,
) -> None:
    """Append a node under HEAD; HEAD moves to it."""
    operations = parse_delta(delta)
    session_id = cli.session_id()
    node, session = cli.store.append(
        session_id,
        role,
        text,
        name=name,
        delta=operations,
        enabled=not disabled,
        expected_version=expect_version,
    )
    cli.emit(
        node.as_dict(),
        lambda: out(render.node_line(node, head_id=session.head_id)),
    )


@command(app, "fork")
def fork(
    cli: Cli,
    node: Annotated[
        str, typer.Argument(help="The node to add an alternative to (HEAD: the last reply).")
    ],
    text: Annotated[str, typer.Argument(help="The alternative's text.")],
    name: NameOption = None,
    delta: DeltaOption = None,
    expect_version: ExpectVersion = None,
) -> None:
    """A new sibling of NODE (same parent, same role); HEAD moves to it."""
    operations = parse_delta(delta)
    session_id = cli.session_id()
    created, session = cli.store.add_sibling(
        session_id, node, text, name=name, delta=operations, expected_version=expect_version
    )
    cli.emit(
        created.as_dict(),
        lambda: out(render.node_line(created, head_id=session.head_id)),
    )


# --- moving HEAD -------------------------------------------------------------------


@command(app, "checkout")
def checkout(
    cli: Cli,
    node: Annotated[
        str, typer.Argument(help="A node: id or prefix, a tag or branch, HEAD (@), HEAD~N.")
    ],
    expect_version: ExpectVersion = None,
) -> None:
    """Move HEAD to NODE."""
    session_id = cli.session_id()
    moved, session = cli.store.checkout(session_id, node, expected_version=expect_version)
    _head_report(cli, session_id, moved, session)


@command(app, "swipe")
def swipe(
    cli: Cli,
    direction: Annotated[
        Literal["next", "prev"], typer.Argument(metavar="next|prev", help="Which way.")
    ],
    node: Annotated[
        str | None, typer.Argument(help="Whose alternatives (default: HEAD).", show_default=False)
    ] = None,
    expect_version: ExpectVersion = None,
) -> None:
    """Go to the next/previous alternative of NODE, then down to the leaf last seen there."""
    session_id = cli.session_id()
    moved, session = cli.store.switch_sibling(
        session_id, direction, node, expected_version=expect_version
    )
    _head_report(cli, session_id, moved, session)


# --- reading -------------------------------------------------------------------------


NoPager = Annotated[
    bool,
    typer.Option("--no-pager", help="Print straight to the terminal, never through the pager."),
]
LastOption = Annotated[
    int | None,
    typer.Option(
        "--last", min=1, metavar="N", help="Only the last N messages.", show_default=False
    ),
]


@command(app, "log")
def log(cli: Cli, last: LastOption = None, no_pager: NoPager = False) -> None:
    """The linear projection: what the model sees, root to HEAD.

    Each message once, numbered by its place on the path (#1 the root), marked with
    its tags and branches (`(main, tag: first-meeting)`, as git decorates), its text
    wrapped to the terminal's width; disabled messages are shown, marked. A log longer
    than the screen goes through a pager ($CLOTHO_PAGER, $PAGER or less), as in git.
    """
    session_id = cli.session_id()
    # JSON: the projection as the model sees it, no disabled messages
    session, turns, first = render.log_window(cli.store, session_id, last, disabled=not cli.json)
    width = terminal_size().columns
    names = {} if cli.json else render.names_by_node(refs.marked(cli.store, session_id))
    cli.emit(
        [t.node.as_dict() for t in turns],
        lambda: pager.page(
            render.log_lines(session, turns, width=width, first_number=first, names=names),
            enabled=not no_pager,
        ),
    )


@command(app, "tree")
def tree(
    cli: Cli,
    depth: Annotated[
        int,
        typer.Option(
            "--depth",
            min=0,
            metavar="N",
            help="Unfold side branches N levels (0: each folded to one line).",
        ),
    ] = 0,
    all_branches: Annotated[
        bool, typer.Option("--all", help="Draw every branch (no folding).")
    ] = False,
    last: Annotated[
        int | None,
        typer.Option(
            "--last",
            min=1,
            metavar="N",
            help="Start the graph N messages above HEAD.",
            show_default=False,
        ),
    ] = None,
    no_pager: NoPager = False,
) -> None:
    """The tree as a graph, HEAD and the tags and branches marked, numbered as in
    `clotho log`.

    The path to HEAD is drawn whole in the left column; each other alternative is
    folded to one line saying what it holds, unless --depth or --all unfold it.
    """
    session_id = cli.session_id()
    whole = cli.store.tree(session_id)
    names = {} if cli.json else render.names_by_node(refs.marked(cli.store, session_id))
    width = terminal_size().columns
    cli.emit(
        whole.as_dict(),  # the names: clotho tags --json
        lambda: pager.page(
            render.tree_lines(
                whole, width=width, depth=depth, all=all_branches, last=last, names=names
            ),
            enabled=not no_pager,
        ),
    )


@command(app, "show")
def show(
    cli: Cli,
    node: Annotated[
        str | None,
        typer.Argument(help="A node: id or prefix, HEAD~N (default: HEAD).", show_default=False),
    ] = None,
) -> None:
    """One node, with its place among its alternatives."""
    session_id = cli.session_id()
    turn = cli.store.turn(session_id, node)
    head = cli.store.session(session_id).head_id
    cli.emit(turn.as_dict(), lambda: render.print_node(turn, head))
