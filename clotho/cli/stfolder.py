"""``clotho import sillytavern DIR``: a whole SillyTavern user folder (see
:mod:`clotho.stfolder`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clotho.lore import lore_index
from clotho.stfolder import Plan, plan_folder, write_plan

from ._app import Cli, command, import_app

#: How the summary says each session's status.
_STATUS = {
    "new": ("would import", "green"),
    "changed": ("would import again", "yellow"),
    "already there": ("already there", "dim"),
    "imported": ("imported", "green"),
    "failed": ("failed", "red"),
}


@command(import_app, "sillytavern")
def import_sillytavern_command(
    cli: Cli,
    folder: Annotated[
        Path,
        typer.Argument(
            metavar="DIR",
            help="A SillyTavern user folder (data/default-user), or the data/ folder "
            "holding one user.",
        ),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print what would come in; change nothing.")
    ] = False,
) -> None:
    """Everything a SillyTavern user has: characters (cards and their books), each
    chat and group chat as a session (one transaction each), World Info books in the
    sessions that link them, personas. A file that cannot be used is skipped with its
    reason; what an earlier run imported is not imported twice."""
    plan = plan_folder(folder, cli.store)
    if not dry_run:
        write_plan(cli.store, plan)
        if cli.settings.vectors:  # embedded now, not at each session's first turn
            imported = [p for p in plan.sessions if p.status == "imported"]
            books = {book.name: book for p in imported for book in p.lorebooks()}
            if books:
                lore_index(cli.settings, list(books.values()))
    cli.emit({**plan.as_dict(), "dry_run": dry_run}, lambda: _summary(plan, dry_run=dry_run))


def _summary(plan: Plan, *, dry_run: bool) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # names come from the player's files: Text, never read as Rich markup
    console = Console(highlight=False, soft_wrap=True)
    table = Table(title=Text(f"SillyTavern folder {plan.folder}"), title_justify="left")
    table.add_column("", no_wrap=True)
    for column in ("session", "character", "books", "player"):
        table.add_column(column)
    for planned in plan.sessions:
        said, style = _STATUS[planned.status]
        who = planned.card.name if planned.card else ", ".join(planned.members) or "-"
        table.add_row(
            Text(said, style=style),
            Text(planned.title),
            Text(who),
            Text(", ".join(book.name for book in planned.lorebooks()) or "-"),
            Text(planned.persona.name if planned.persona else "-"),
        )
    console.print(table)
    for planned in plan.sessions:
        for note in planned.notes:
            console.print(f"  {planned.source}: {note}", style="yellow", markup=False)
    if plan.skipped:
        console.print(f"Skipped {len(plan.skipped)} file(s):", style="bold")
        for skipped in plan.skipped:
            console.print(f"  {skipped.file}: {skipped.reason}", markup=False)
    if plan.available_books:
        console.print(
            "World Info books no character links (clotho import lorebook FILE): "
            + ", ".join(plan.available_books),
            markup=False,
        )
    counts: dict[str, int] = {}
    for planned in plan.sessions:
        counts[planned.status] = counts.get(planned.status, 0) + 1
    tally = ", ".join(f"{count} {_STATUS[status][0]}" for status, count in counts.items())
    console.print(
        ("Dry run: nothing changed. " if dry_run else "")
        + f"{len(plan.sessions)} session(s): {tally or 'none'}; {len(plan.skipped)} skipped",
        markup=False,
    )
