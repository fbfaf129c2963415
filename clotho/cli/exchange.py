"""Exchange: SillyTavern chats (import chat, export chat), lossless tree files
(import tree, export tree) and the story as a book (export story)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from clotho.formats.stchat import export_chat, import_chat
from clotho.formats.story import StoryExportError, story_format
from clotho.formats.treefile import export_tree, import_tree, tree_text
from clotho.lore import read_upload
from clotho.sessions import session_names
from clotho.stories import session_book

from ._app import Cli, app, command, import_app
from .style import out, paint

#: The suffixes that choose a book's format when --format is not given.
STORY_SUFFIXES = (".md", ".markdown", ".html", ".htm")

export_app = typer.Typer(help="Write the session out for other tools.", no_args_is_help=True)
app.add_typer(export_app, name="export")


@command(import_app, "chat")
def import_chat_command(
    cli: Cli,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A SillyTavern chat (.jsonl).")],
    title: Annotated[
        str | None, typer.Option("--title", help="The new session's title.", show_default=False)
    ] = None,
) -> None:
    """A new session from a SillyTavern chat (a group chat too, with or without its
    header line): swipes become alternatives (siblings), hidden messages disabled
    nodes; later commands act on it."""
    session = import_chat(cli.store, read_upload(file), file.name, title=title)
    cli.remember(session.id)
    nodes = len(cli.store.tree(session.id).nodes)

    def text() -> None:
        out(f"Imported {file.name} as session {paint(session.id, 'bold')} ({nodes} nodes)")
        if not nodes:
            out("the chat has no messages yet (SillyTavern saves a new group chat empty)")

    cli.emit({**session.as_dict(), "nodes": nodes}, text)


@command(export_app, "chat")
def export_chat_command(
    cli: Cli,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Where to write the .jsonl.")],
    head: Annotated[
        str | None,
        typer.Option("--head", help="The branch's last node (default: HEAD).", show_default=False),
    ] = None,
) -> None:
    """The branch to HEAD as a SillyTavern chat; each fork's alternatives become swipes,
    and the speakers are named by the session's names (its campaign's player, its card's
    character) when a message has no name of its own."""
    session_id = cli.session_id()
    exported = export_chat(cli.store, session_id, head, names=session_names(cli.store, session_id))
    try:
        file.write_text(exported.text, encoding="utf-8", newline="")  # its own line endings
    except OSError as error:
        cli.fail(OSError(f"{file}: cannot be written ({error.strerror or error})"))
    document = {"file": str(file), "messages": exported.messages, "dropped": exported.dropped}

    def text() -> None:
        out(f"Wrote {exported.messages} messages to {file}")
        if exported.dropped:
            out(
                paint(
                    f"{exported.dropped} node(s) below other alternatives do not fit a "
                    "SillyTavern chat (they stay in the tree)",
                    "yellow",
                )
            )

    cli.emit(document, text)


@command(import_app, "tree")
def import_tree_command(
    cli: Cli,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A tree file (clotho export tree).")],
    new_ids: Annotated[
        bool,
        typer.Option(
            "--new-ids",
            help="Give the session and every node fresh ids (to import a tree a second time).",
        ),
    ] = False,
) -> None:
    """A session from a tree file, whole: every node, fragment and trash, traces and
    documents; later commands act on it. Its undo history starts empty."""
    session = import_tree(cli.store, read_upload(file), file.name, new_ids=new_ids)
    cli.remember(session.id)
    nodes = cli.store.node_counts().get(session.id, 0)
    cli.emit(
        {**session.as_dict(), "nodes": nodes},
        lambda: out(f"Imported {file.name} as session {paint(session.id, 'bold')} ({nodes} nodes)"),
    )


@command(export_app, "tree")
def export_tree_command(
    cli: Cli,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Where to write the tree (JSON).")],
) -> None:
    """The whole session as a tree file (JSON): every node, fragment and trash, the
    traces and the documents; `clotho import tree` reads it back as it was."""
    document = export_tree(cli.store, cli.session_id())
    try:
        file.write_text(tree_text(document), encoding="utf-8")
    except OSError as error:
        cli.fail(OSError(f"{file}: cannot be written ({error.strerror or error})"))
    nodes, traces = len(document["nodes"]), len(document["traces"])
    cli.emit(
        {
            "file": str(file),
            "session_id": document["session"]["id"],
            "nodes": nodes,
            "traces": traces,
        },
        lambda: out(f"Wrote the session's {nodes} nodes ({traces} traces) to {file}"),
    )


@command(export_app, "story")
def export_story_command(
    cli: Cli,
    file: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="Where to write the book (.md or .html); - for stdout."
        ),
    ],
    head: Annotated[
        str | None,
        typer.Option("--head", help="The branch's last node (default: HEAD).", show_default=False),
    ] = None,
    book_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="md or html (default: by FILE's suffix; md for stdout).",
            show_default=False,
        ),
    ] = None,
    state_every: Annotated[
        int,
        typer.Option("--state-every", help="A note of what changed every N messages (0: none)."),
    ] = 0,
    state_at: Annotated[
        list[str] | None,
        typer.Option(
            "--state-at",
            help="A note of what changed at this node (repeatable).",
            show_default=False,
        ),
    ] = None,
    pictures: Annotated[
        bool, typer.Option("--pictures", help="The cast's pictures beside their names (HTML).")
    ] = False,
) -> None:
    """The branch root -> HEAD (or --head) as a book: each message under its speaker's
    name, roleplay formatting kept, scene changes as narration lines, hidden messages
    left out; Markdown or one self-contained HTML page (no script, no external URL)."""
    session_id = cli.session_id()
    to_stdout = file == "-"
    suffix = Path(file).suffix
    if book_format is None and not to_stdout and suffix.lower() not in STORY_SUFFIXES:
        cli.fail(StoryExportError(f"{file}: not .md or .html; say --format md or html"))
    chosen = story_format(book_format or ("md" if to_stdout else suffix))
    book = session_book(
        cli.store,
        session_id,
        head,
        chosen,
        state_every=state_every,
        state_at=state_at or (),
        pictures=pictures,
    )
    text = book.render(chosen)
    if to_stdout:
        sys.stdout.write(text)
        return
    try:
        Path(file).write_text(text, encoding="utf-8")
    except OSError as error:
        cli.fail(OSError(f"{file}: cannot be written ({error.strerror or error})"))
    document = {"file": file, "format": chosen, "messages": book.messages}
    cli.emit(document, lambda: out(f"Wrote the story ({book.messages} messages) to {file}"))
