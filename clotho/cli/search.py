"""``clotho grep TEXT``: search every branch (:meth:`mnemosyne.Store.search`).

Each hit on one line: its short id (what ``clotho checkout`` takes), its speaker,
``trunk`` (on the path root -> HEAD) or ``branch`` (a side branch or a pruned
fragment), ``disabled`` if it is, and a snippet with the words bolded on a terminal.
Filters: ``--role``, ``--trunk`` (the path root -> HEAD only), ``--under NODE`` (NODE
and its subtree), ``--since`` / ``--until`` (an ISO date or date and time, or an age:
``30m``, ``12h``, ``2d``, ``1w``; a bare date in ``--until`` counts its whole day).
``--json``: a list of hits (``node_id``, ``session_id``, ``role``, ``name``,
``snippet``, ``matches``, ``on_trunk``, ``enabled``, ``created_at``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from clotho.errors import UsageError
from mnemosyne._search import parse_moment

from . import render
from ._app import Cli, app, command
from .cells import clip, terminal_width
from .style import out, paint

if TYPE_CHECKING:
    from mnemosyne import SearchHit

__all__ = ["grep", "hit_line"]

#: Control characters (white space, escape sequences' start, DEL, C1) shown as one space
#: in a snippet: one character for one, so the match offsets hold.
_FLAT = str.maketrans(dict.fromkeys([*range(0x20), *range(0x7F, 0xA0)], " "))


def _bolded(text: str, matches: tuple[tuple[int, int], ...]) -> str:
    parts: list[str] = []
    at = 0
    for start, end in matches:
        if start < at:  # overlapping words: the first one shown wins
            continue
        parts += [text[at:start], paint(text[start:end], "bold")]
        at = end
    parts.append(text[at:])
    return "".join(parts)


def hit_line(hit: SearchHit, *, width: int | None, with_session: bool) -> str:
    """One line for a hit: where it is, then the snippet (clipped to ``width`` cells on
    a terminal; whole when ``width`` is ``None``)."""
    speaker = hit.name or hit.role
    place = "trunk" if hit.on_trunk else "branch"
    marks = [render.short(hit.node_id)]
    if with_session:
        marks.append(f"[{render.short(hit.session_id)}]")
    marks += [speaker, place] + ([] if hit.enabled else ["disabled"])
    lead = "  ".join(marks) + "  "
    text = hit.snippet.translate(_FLAT)
    shown = text if width is None else clip(text, max(20, width - len(lead)))
    kept = len(shown) if shown == text else len(shown) - 1  # the clip's "…" is no match
    matches = tuple((s, min(e, kept)) for s, e in hit.matches if s < kept)
    return paint(lead, "dim") + _bolded(shown, matches)


@command(app, "grep")
def grep(
    cli: Cli,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="Words to find (every one).")],
    all_sessions: Annotated[
        bool, typer.Option("--all-sessions", help="Search every session, not only this one.")
    ] = False,
    role: Annotated[
        str | None,
        typer.Option("--role", help="Only messages of this role (system, user, assistant)."),
    ] = None,
    trunk: Annotated[
        bool, typer.Option("--trunk", help="Only the path root -> HEAD (of each session).")
    ] = False,
    under: Annotated[
        str | None,
        typer.Option(
            "--under", metavar="NODE", help="Only NODE and the messages below it (this session)."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="WHEN",
            help="Only messages written from WHEN on: 2026-11-20, 2026-11-20T18:30, or an "
            "age: 30m, 12h, 2d, 1w.",
        ),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option(
            "--until",
            metavar="WHEN",
            help="Only messages written before WHEN (a date: up to its end), as --since.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=500, help="At most this many hits.")
    ] = 50,
) -> None:
    """Search every branch of the session (or of all sessions) for messages holding
    every word of TEXT, newest first: each hit's id, speaker, and whether it is on the
    trunk (root -> HEAD) or a side branch. TEXT is plain text, never search syntax."""
    if under is not None and all_sessions:
        raise UsageError("--under names a node of this session: not with --all-sessions")
    session_id = None if all_sessions else cli.session_id()
    hits = cli.store.search(
        text,
        session_id=session_id,
        role=role,
        trunk=trunk,
        under=under,
        since=None if since is None else parse_moment(since, what="--since"),
        until=None if until is None else parse_moment(until, end=True, what="--until"),
        limit=limit,
    )
    width = terminal_width()

    def show() -> None:
        if not hits:
            out(paint("no match", "dim"))
            return
        out(*(hit_line(hit, width=width, with_session=all_sessions) for hit in hits))

    cli.emit([hit.as_dict() for hit in hits], show)
