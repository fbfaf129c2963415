"""Lore commands: import lorebook, import card, lore list, lore test."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from clotho.errors import NoSessionError
from clotho.lore import (
    import_card,
    import_lorebook,
    lore_index,
    lorebooks_document,
    read_upload,
)
from clotho.sessions import card_session
from clotho.wiring import preview_lore

from . import render
from ._app import Cli, command, import_app, lore_app
from .logs import progress
from .style import out, paint

FileArgument = Annotated[Path, typer.Argument(metavar="FILE", help="The file to import.")]


@command(import_app, "lorebook")
def import_lorebook_command(
    cli: Cli,
    file: FileArgument,
    name: Annotated[
        str | None,
        typer.Option(
            "--name", help="The book's name (default: the file's name).", show_default=False
        ),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace the session's book of that name (default: a different book is "
            "kept beside it, named apart).",
        ),
    ] = False,
) -> None:
    """Add a SillyTavern World Info file to the session. The same lore twice (the same
    file, or a card's own book) is kept once; a different book of a taken name is kept as
    "Name (2)" unless --replace."""
    sid = cli.session_id()
    kept, _ = import_lorebook(cli.store, sid, read_upload(file), name or file.stem, replace=replace)
    book = kept.book
    if kept.same_as is None:
        index_books(cli, [book])
    enabled = sum(1 for entry in book.entries if not entry.disable)
    document = {
        "book": book.name,
        "entries": len(book.entries),
        "enabled": enabled,
        "same_as": kept.same_as,
        "renamed_from": kept.asked if kept.renamed else None,
    }

    def text() -> None:
        if kept.same_as is not None:
            out(kept.note())
            return
        out(
            f"Imported lorebook {paint(book.name, 'bold')}: {len(book.entries)} entries "
            f"({enabled} enabled)"
        )
        if kept.renamed:
            out(paint(kept.note(), "dim"))

    cli.emit(document, text)


@command(import_app, "card")
def import_card_command(cli: Cli, file: FileArgument) -> None:
    """Make a character card (V2/V3, PNG or JSON) the session's character; its lorebook
    comes along, and an empty session starts with its greeting(s). With no session
    chosen yet, a new one is created for the card (named after its character)."""
    data = read_upload(file)
    try:
        sid: str | None = cli.session_id()
    except NoSessionError:
        sid = None
    if sid is not None:
        card, greetings, session = import_card(cli.store, sid, data, file.name)
    else:
        from planner.cards import load_card

        card = load_card(data, file.name)
        session, greetings = card_session(cli.store, card)
        cli.remember(session.id)
    if card.book is not None:
        index_books(cli, [card.book])
    document = {
        "name": card.name,
        "spec": card.spec,
        "book": card.book.name if card.book else None,
        "book_entries": len(card.book.entries) if card.book else 0,
        "greetings": [node.id for node in greetings],
        "session_id": session.id,
        "new_session": sid is None,
    }

    def text() -> None:
        lines = []
        if sid is None:
            lines.append(
                f"No session was chosen: created session {paint(session.id, 'bold')} "
                f"({session.title}) for the card"
            )
        lines.append(f"Imported card {paint(card.name, 'bold')} ({card.spec})")
        if card.book:
            lines.append(f"  lorebook {card.book.name}: {len(card.book.entries)} entries")
        if greetings:
            lines.append(
                f"  the story starts with its greeting ({len(greetings)} in all, as alternatives): "
                f"{render.short(greetings[0].id)}"
            )
        out(*lines)

    cli.emit(document, text)


@command(lore_app, "list")
def lore_list(cli: Cli) -> None:
    """The session's lorebooks and their entries (a book switched off in the page's lore
    manager says so: it does not play)."""
    from clotho.lore_edits import books_listed

    listed = books_listed(cli.store, cli.session_id())
    document = lorebooks_document([view.book for view in listed])
    for row, view in zip(document, listed, strict=True):
        row["enabled"] = view.enabled

    def text() -> None:
        if not listed:
            out(paint("(no lorebooks: clotho import lorebook FILE)", "dim"))
        for view in listed:
            book = view.book
            off = "" if view.enabled else paint("  switched off", "dim")
            out(paint(f"{book.name} ({len(book.entries)} entries)", "bold") + off)
            for entry in book.entries:
                label = entry.comment or ", ".join(entry.keys) or "(no keys)"
                flags = [
                    flag
                    for flag, on in (
                        ("disabled", entry.disable),
                        ("constant", entry.constant),
                        (f"if {entry.condition}", entry.condition),
                    )
                    if on
                ]
                extra = f"  {paint(' · '.join(flags), 'dim')}" if flags else ""
                out(f"  {entry.uid:>4}  {label}{extra}")

    cli.emit(document, text)


@command(lore_app, "test")
def lore_test(
    cli: Cli,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The next message.")],
    with_skipped: Annotated[
        bool,
        typer.Option(
            "--skipped",
            help="With --json: {fired, skipped}, the skipped being the entries that could "
            "have fired and did not, and why (the text output always shows them).",
        ),
    ] = False,
) -> None:
    """Which entries would fire if TEXT were the next message at HEAD, and why (and which
    did not: a rule, a roll, the budget, a regex key that took too long)."""
    session_id = cli.session_id()
    preview = asyncio.run(
        preview_lore(cli.settings, cli.store, session_id, text, close_clients=True)
    )
    fired, skipped = preview["fired"], preview["skipped"]

    def show() -> None:
        if not fired:
            out(paint("no entry would fire", "dim"))
        for row in fired:
            label = f"{row['book']}:{row['uid']}" + (f" {row['comment']}" if row["comment"] else "")
            out(f"{paint(label, 'bold')}  {row['reason']}")
        for row in skipped:
            out(paint(f"not {row['book']}:{row['uid']}  {row['reason']}", "dim"))
        out(paint(preview["reasoning"], "dim"))
        if preview["tokenizer"]:
            out(paint(f"tokens counted with {preview['tokenizer']}", "dim"))

    cli.emit({"fired": fired, "skipped": skipped} if with_skipped else fired, show)


def index_books(cli: Cli, books: list[Any]) -> None:
    """Embed the new books now (a large one takes a while once), not at the first turn."""
    if cli.settings.vectors:
        # on a terminal, while it works; a warning that it cannot (keywords only) erases it
        with progress("indexing the lore for search by meaning"):
            lore_index(cli.settings, books)
