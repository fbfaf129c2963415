"""Exchange with SillyTavern: import chat, export chat."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clotho.lore import read_upload
from clotho.stchat import export_chat, import_chat

from ._app import Cli, app, command, import_app
from .style import out, paint

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
    """A new session from a SillyTavern chat: swipes become alternatives (siblings),
    hidden messages disabled nodes; later commands act on it."""
    session = import_chat(cli.store, read_upload(file), file.name, title=title)
    cli.remember(session.id)
    nodes = len(cli.store.tree(session.id).nodes)
    cli.emit(
        {**session.as_dict(), "nodes": nodes},
        lambda: out(f"Imported {file.name} as session {paint(session.id, 'bold')} ({nodes} nodes)"),
    )


@command(export_app, "chat")
def export_chat_command(
    cli: Cli,
    file: Annotated[Path, typer.Argument(metavar="FILE", help="Where to write the .jsonl.")],
    head: Annotated[
        str | None,
        typer.Option("--head", help="The branch's last node (default: HEAD).", show_default=False),
    ] = None,
) -> None:
    """The branch to HEAD as a SillyTavern chat; each fork's alternatives become swipes."""
    exported = export_chat(cli.store, cli.session_id(), head)
    try:
        file.write_text(exported.text, encoding="utf-8")
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
