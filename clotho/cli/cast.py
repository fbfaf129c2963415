"""``clotho cast``: the session's characters (:mod:`clotho.cast`), who is in the scene,
who speaks and how readily.

- ``clotho cast`` (``list``): the members in order (the first is the session's
  character), each present or away at HEAD, muted or not, its talkativeness, where it
  came from (a card, or written in place) and its own book; then the speaker order.
- ``add CARD_FILE`` (PNG or JSON, read as ``clotho import card`` reads it; a PNG's
  picture becomes its avatar) or ``add --name NAME [--description ...]`` (written in
  place); ``remove NAME``.
- ``leave NAME`` / ``join NAME``: a narration node under HEAD saying so, which carries
  the change of ``present`` (undoable; it rolls back with the story).
- ``mute`` / ``unmute NAME``, ``order [ORDER]``, ``talk NAME 0.8``: the session's cast
  settings (:class:`clotho.sessionconfig.CastSettings`), one write at the version read.

Play's ``/cast``, ``/leave``, ``/join``, ``/mute``, ``/unmute`` do the same
(:mod:`clotho.cli.playcommands`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from clotho.cast import (
    CastError,
    Member,
    add_member,
    campaign_character,
    cast_view,
    remove_member,
    scene_change,
    session_cast,
    update_cast,
    update_member,
    written_card,
)
from clotho.lore import read_card, read_upload
from clotho.sessionconfig import session_settings

from . import render
from ._app import Cli, app, command, group_default
from .cells import clip, terminal_width, wrap_line
from .style import out, paint
from .tree import ExpectVersion

if TYPE_CHECKING:
    from mnemosyne import Node, Session, Store

__all__ = [
    "ORDERS",
    "cast_app",
    "cast_document",
    "cast_lines",
    "set_muted",
]

cast_app = typer.Typer(
    help="The session's characters: who they are, who is in the scene, who speaks.",
    no_args_is_help=False,
)
app.add_typer(cast_app, name="cast")

#: The speaker orders, as the player reads them.
ORDERS = {
    "natural": "the names mentioned, then by talkativeness",
    "round_robin": "each in turn",
    "narrator": "one narrator voices everyone",
    "manual": "the first present unless you pick (--speaker)",
}
NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="A member of the cast (its name, any case).")
]


def cast_document(store: Store, session_id: str) -> dict[str, Any]:
    """The cast as :func:`clotho.cast.cast_view` reads it (``members``, ``present``,
    ``order``); with no member, ``character``: who plays the session instead (its
    campaign's character, if any)."""
    document = cast_view(store, store.session(session_id))
    if not document["members"]:
        character = campaign_character(store, session_id)
        document["character"] = character.name if character is not None else None
    return document


def cast_lines(document: dict[str, Any], width: int | None) -> list[str]:
    """The cast as text: one line per member (its number, name, present or away, muted,
    talkativeness, source, books), then the speaker order."""
    members = document["members"]
    if not members:
        who = document.get("character") or "the default one"
        return [
            paint(f"no cast yet: the session's character is {who}, of no card", "dim"),
            paint("`clotho cast add CARD` or `clotho cast add --name NAME` adds one", "dim"),
        ]
    names = max(len(clip(member["name"], render.NAME_CELLS)) for member in members)
    lines = []
    for number, member in enumerate(members, 1):
        name = clip(member["name"], render.NAME_CELLS).ljust(names)
        where = paint("present", "green") if member["present"] else paint("away   ", "yellow")
        muted = paint("muted", "red") if member["muted"] else "     "
        source = "written in place" if member["source"] == "written" else "card"
        if member["avatar"]:
            source += " with a picture"
        if member["books"]:
            source += "; book " + ", ".join(member["books"])
        lead = (
            f"{paint(str(number), 'dim')} {paint(name, 'bold')}  {where}  {muted}  "
            f"talk {member['talkativeness']:.2f}  "
        )
        lines += wrap_line(source, width, lead=lead, indent=4, styles=("dim",))
    order = document["order"]
    lines += wrap_line(
        f"{order} ({ORDERS.get(order, '')})",
        width,
        lead=paint("speaker order", "dim") + "  ",
        indent=2,
    )
    if document.get("recap_missed"):
        lines.append(f"{paint('recaps', 'dim')}  one back from away is told what it missed")
    return lines


def set_muted(
    store: Store, session_id: str, name: str, muted: bool, *, expected_version: int | None = None
) -> tuple[Member, Session]:
    """Mute a member (it never speaks; it still witnesses) or let it speak again.

    Raises:
        CastError: no member is named so, or it is muted already (or not muted).
        ConflictError: the session is not at ``expected_version``.
    """
    member = session_cast(store, session_id).find(name)
    if member.muted == muted:
        raise CastError(f"{member.name} is {'muted' if muted else 'not muted'} already")
    return update_member(
        store, session_id, member.name, muted=muted, expected_version=expected_version
    )


def _node_report(cli: Cli, node: Node, session: Session) -> None:
    cli.emit(
        {**node.as_dict(), "version": session.version},
        lambda: out(render.node_line(node, head_id=session.head_id)),
    )


@group_default(cast_app)
def cast_default(cli: Cli) -> None:
    """The session's characters (`clotho cast list`)."""
    _list(cli)


@command(cast_app, "list")
def cast_list(cli: Cli) -> None:
    """The characters in order, who is in the scene, who is muted; the speaker order.

    The first is the session's character. Each: present or away at HEAD, muted,
    talkativeness, where it came from (a card, or written in place), its own book."""
    _list(cli)


def _list(cli: Cli) -> None:
    document = cast_document(cli.store, cli.session_id())
    cli.emit(document["members"], lambda: out(*cast_lines(document, terminal_width())))


@command(cast_app, "add")
def cast_add(
    cli: Cli,
    file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[CARD_FILE]",
            help="A character card (V2/V3, PNG or JSON); a PNG's picture is its avatar.",
            show_default=False,
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="A character written in place: its name.", show_default=False),
    ] = None,
    description: Annotated[
        str, typer.Option("--description", help="Written in place: who it is.")
    ] = "",
    personality: Annotated[
        str, typer.Option("--personality", help="Written in place: its manner.")
    ] = "",
    scenario: Annotated[
        str, typer.Option("--scenario", help="Written in place: its circumstances.")
    ] = "",
    expect_version: ExpectVersion = None,
) -> None:
    """Add a character: from a card file, or written in place with --name.

    While someone has come or gone, a new member is away until `clotho cast join`."""
    from clotho.errors import UsageError

    written = name is not None or description or personality or scenario
    if (file is None) == (not written):
        raise UsageError(
            "give a card file, or --name (and --description, --personality, --scenario) "
            "for a character written in place; not both"
        )
    avatar = None
    if file is not None:
        data = read_upload(file)
        card, avatar = read_card(data, file.name)
    else:
        if not name or not name.strip():
            raise UsageError("--name: a character written in place needs a name")
        card = written_card(name.strip(), description, personality, scenario)
    sid = cli.session_id()
    replaced = None
    if not session_cast(cli.store, sid).members:
        character = campaign_character(cli.store, sid)
        replaced = character.name if character is not None else None
    member, session = add_member(
        cli.store, sid, card, avatar=avatar, expected_version=expect_version
    )
    if card.book is not None:
        from .lore import index_books

        index_books(cli, [card.book])
    document = {**member.as_dict(), "version": session.version}

    def text() -> None:
        line = f"{paint(member.name, 'bold')} joins the cast"
        if member.books:
            line += f" (its book: {', '.join(member.books)})"
        out(line)
        if replaced and replaced.casefold() != member.name.casefold():
            out(
                paint(
                    f"{replaced}, the campaign's character, stays the session's character: "
                    "the first of the cast",
                    "dim",
                )
            )
        here = cli.store.state(sid).present if session.head_id else None
        if here is not None and member.name not in here:
            out(paint(f"away for now: `clotho cast join {member.name}` brings it in", "dim"))

    cli.emit(document, text)


@command(cast_app, "remove")
def cast_remove(cli: Cli, name: NameArgument, expect_version: ExpectVersion = None) -> None:
    """Take a character out of the cast (its book and messages stay).

    Its card and picture go; its book stays with the session's lore."""
    sid = cli.session_id()
    member = session_cast(cli.store, sid).find(name)
    session = remove_member(cli.store, sid, member.name, expected_version=expect_version)
    cli.emit(
        {"name": member.name, "version": session.version},
        lambda: out(f"{paint(member.name, 'bold')} left the cast (its messages stay)"),
    )


@command(cast_app, "leave")
def cast_leave(cli: Cli, name: NameArgument, expect_version: ExpectVersion = None) -> None:
    """A character leaves the scene: a node saying so (undoable).

    What happens while it is away is left out of its prompts."""
    node, session = scene_change(
        cli.store, cli.session_id(), name, "leaves", expected_version=expect_version
    )
    _node_report(cli, node, session)


@command(cast_app, "join")
def cast_join(cli: Cli, name: NameArgument, expect_version: ExpectVersion = None) -> None:
    """A character comes (back) into the scene: a node saying so (undoable)."""
    node, session = scene_change(
        cli.store, cli.session_id(), name, "joins", expected_version=expect_version
    )
    _node_report(cli, node, session)


def _mute_report(cli: Cli, member: Member, session: Session, muted: bool) -> None:
    said = "muted: it never speaks (it still sees)" if muted else "may speak again"
    cli.emit(
        {"name": member.name, "muted": muted, "version": session.version},
        lambda: out(f"{paint(member.name, 'bold')} {said}"),
    )


@command(cast_app, "mute")
def cast_mute(cli: Cli, name: NameArgument, expect_version: ExpectVersion = None) -> None:
    """A character never speaks (it still sees what happens)."""
    member, session = set_muted(
        cli.store, cli.session_id(), name, True, expected_version=expect_version
    )
    _mute_report(cli, member, session, True)


@command(cast_app, "unmute")
def cast_unmute(cli: Cli, name: NameArgument, expect_version: ExpectVersion = None) -> None:
    """A muted character may speak again."""
    member, session = set_muted(
        cli.store, cli.session_id(), name, False, expected_version=expect_version
    )
    _mute_report(cli, member, session, False)


@command(cast_app, "order")
def cast_order(
    cli: Cli,
    order: Annotated[
        Literal["natural", "round_robin", "narrator", "manual"] | None,
        typer.Argument(
            metavar="[natural|round_robin|narrator|manual]",
            help="Who answers the player when no speaker is named (none: say which).",
            show_default=False,
        ),
    ] = None,
    expect_version: ExpectVersion = None,
) -> None:
    """Who answers the player when no speaker is named (none: say which).

    natural: the characters named, then by talkativeness; round_robin: each in turn;
    narrator: one voice for everyone; manual: the first present unless --speaker."""
    sid = cli.session_id()
    if order is None:
        current = session_settings(cli.store.session(sid).metadata).cast_settings.order
        cli.emit({"order": current}, lambda: out(f"{current} ({ORDERS[current]})"))
        return
    session = update_cast(cli.store, sid, order=order, expected_version=expect_version)
    cli.emit(
        {"order": order, "version": session.version},
        lambda: out(f"speaker order: {paint(order, 'bold')} ({ORDERS[order]})"),
    )


@command(cast_app, "recap")
def cast_recap(
    cli: Cli,
    switch: Annotated[
        Literal["on", "off"] | None,
        typer.Argument(metavar="[on|off]", help="none: say which.", show_default=False),
    ] = None,
    expect_version: ExpectVersion = None,
) -> None:
    """Whether a character back from away is told what it missed (none: say which).

    On: each gap in its prompt carries a recap of what happened there, written by the
    summary model once per gap and character. Off: one line says it was away."""
    sid = cli.session_id()
    if switch is None:
        on = session_settings(cli.store.session(sid).metadata).cast_settings.recap_missed
        cli.emit({"recap_missed": on}, lambda: out("on" if on else "off"))
        return
    session = update_cast(
        cli.store, sid, recap_missed=switch == "on", expected_version=expect_version
    )
    cli.emit(
        {"recap_missed": switch == "on", "version": session.version},
        lambda: out(f"recaps of what a character missed: {paint(switch, 'bold')}"),
    )


@command(cast_app, "talk")
def cast_talk(
    cli: Cli,
    name: NameArgument,
    value: Annotated[
        float,
        typer.Argument(
            metavar="TALKATIVENESS",
            min=0.0,
            max=1.0,
            help="0 to 1: how readily it speaks unnamed in the natural order.",
        ),
    ],
    expect_version: ExpectVersion = None,
) -> None:
    """How readily a character speaks unnamed (0 to 1), in place of its card's."""
    member, session = update_member(
        cli.store, cli.session_id(), name, talkativeness=value, expected_version=expect_version
    )
    cli.emit(
        {"name": member.name, "talkativeness": value, "version": session.version},
        lambda: out(f"{paint(member.name, 'bold')} talkativeness {value:.2f}"),
    )
