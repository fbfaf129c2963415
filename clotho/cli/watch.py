"""``clotho watch [SESSION]``: a session's changes as they commit, from any process
(another terminal, the page, the API), read from the database's log of events
(:mod:`mnemosyne.events`; docs/events.md).

One line per change: the version it made, its kind (``turn say``, ``edit rewrite``,
``undo``, ``head``...), the nodes added and changed, HEAD after it. ``--json``: one JSON
object per line (``event``: ``change`` or ``reset``, then the event's fields), for
scripts. ``--since VERSION`` starts after that version (what came since is printed
first); ``--count N`` stops after N changes. Ctrl+C stops it.

On PostgreSQL the command LISTENs for the notifications the writes send at their
commit (:class:`mnemosyne.events.Listener`) and reads the log anyway every
:data:`~mnemosyne.events.RECHECK_S` seconds; on SQLite it reads it every
:data:`~mnemosyne.events.POLL_S` seconds.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import TYPE_CHECKING, Annotated

import typer

from mnemosyne.events import POLL_S, RECHECK_S, Listener

from . import render
from ._app import Cli, app, command
from .style import out, paint

if TYPE_CHECKING:
    from mnemosyne.events import SessionEvent

__all__ = ["change_line", "watch"]


def change_line(event: SessionEvent) -> str:
    """One change as a line: ``v12  turn say  +2  ~1  HEAD 1a2b3c4d``."""
    payload = event.payload
    what = event.kind if not payload.get("action") else f"{event.kind} {payload['action']}"
    parts = [paint(f"v{event.version}", "dim"), paint(what, "bold")]
    if payload.get("added_count"):
        parts.append(f"+{payload['added_count']}")
    if payload.get("changed_count"):
        parts.append(f"~{payload['changed_count']}")
    if "title" in payload:
        parts.append(f"title {payload['title']!r}")
    parts.append(f"HEAD {render.short(payload.get('head'))}")
    return "  ".join(parts)


def _emit(cli: Cli, kind: str, document: dict[str, object], line: str) -> None:
    if cli.json:
        sys.stdout.write(json.dumps({"event": kind, **document}, ensure_ascii=False) + "\n")
    else:
        out(line)
    sys.stdout.flush()


@command(app, "watch")
def watch(
    cli: Cli,
    which: Annotated[
        str | None,
        typer.Argument(metavar="SESSION", help="The session (default: the current one)."),
    ] = None,
    since: Annotated[
        int | None,
        typer.Option(
            "--since",
            metavar="VERSION",
            min=0,
            help="Start after this version: the changes since are printed first.",
        ),
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", min=1, help="Stop after this many changes.")
    ] = None,
) -> None:
    """Print the session's changes as they commit, whoever makes them (another
    terminal, the page, the API): one line each, or one JSON object per line with
    --json. Ctrl+C stops it."""
    store = cli.store
    sid = store.session(which).id if which else cli.session_id()
    woken = threading.Event()
    listens = store.dialect == "postgresql"

    def notified(found: str, _version: int) -> None:
        if not found or found == sid:  # "": (re)connected, something may be missed
            woken.set()

    listener = Listener(store.engine, notified)
    listener.start()  # PostgreSQL only
    shown = 0
    try:
        read = store.events(sid, after=since)
        if not cli.json:
            out(paint(f"watching {render.short(sid)} at v{read.version} (Ctrl+C stops)", "dim"))
            sys.stdout.flush()
        while True:
            if read.reset:
                document = {"session_id": sid, "version": read.version}
                note = paint(f"v{read.version}  reset: changes were missed, read it again", "dim")
                _emit(cli, "reset", document, note)
            for change in read.events:
                _emit(cli, "change", change.as_dict(), change_line(change))
                shown += 1
                if count is not None and shown >= count:
                    return
            woken.wait(RECHECK_S if listens else POLL_S)
            woken.clear()
            read = store.events(sid, after=read.version)
    except KeyboardInterrupt:
        return
    finally:
        listener.close()
