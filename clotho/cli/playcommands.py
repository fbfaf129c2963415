"""``clotho play``'s slash commands, and what a line the player sends does."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from . import render
from ._app import Cli
from .editor import journal_line
from .playinput import LineReader
from .style import out, paint
from .traceview import print_trace

if TYPE_CHECKING:
    from orchestrator import Engine, TurnResult

    from .playscreen import ChatScreen

__all__ = ["PLAY_HELP", "Play", "dispatch"]


PLAY_HELP = (
    "Type to speak. /reroll, /swipe < or >, /edit TEXT (your last message, as a fork), "
    "/continue (extends the reply), /impersonate (drafts your line), /undo, /redo, /state, "
    "/trace, /tree, /quit"
)


@dataclass
class Play:
    """One ``clotho play`` session: what a line needs to act."""

    cli: Cli
    session_id: str
    engine: Engine
    lines: LineReader
    #: Play one turn of a kind (``say``, ``reroll``...) with the session's engine,
    #: streamed and reported: :func:`clotho.cli.play.run_turn`, bound.
    turn: Callable[..., TurnResult]
    #: What the player reads: ``screen.message(view)`` shows one message (its speaker,
    #: its text wrapped, ``reply 2/3`` and its id), ``screen.line(text)`` a line.
    screen: ChatScreen


def _last_alternative_of_a_reply(cli: Cli, session_id: str) -> bool:
    """Whether HEAD is a reply with no alternative after it (where `>` writes one)."""
    head = cli.store.session(session_id).head_id
    if head is None:
        return False
    view = cli.store.turn(session_id, head)
    return view.node.role == "assistant" and view.index == len(view.siblings) - 1


def dispatch(play: Play, line: str) -> bool:
    """Act on a line the player sent: a message to say, or a slash command; ``False``
    when the player asked to quit."""
    cli, session_id, lines, turn = play.cli, play.session_id, play.lines, play.turn
    if not line.startswith("/"):
        turn("say", text=line)
        return True
    word, _, rest = line[1:].partition(" ")
    rest = rest.strip()
    if word in ("quit", "exit", "q"):
        return False
    if word == "reroll":
        turn("reroll")
    elif word == "continue":
        turn(word)
    elif word == "impersonate":
        drafted = turn(word)  # the player's line, stored nowhere: the next prompt's text
        if drafted.node is None:
            lines.draft = drafted.text
    elif word == "edit":
        last = next((m for m in reversed(cli.store.messages(session_id)) if m.role == "user"), None)
        if last is None or not rest:
            out("usage: /edit TEXT  (replaces your last message, as a fork)")
        else:
            turn("edit", node=last.id, text=rest)
    elif word == "swipe":
        direction: Literal["prev", "next"] = "prev" if rest in ("<", "prev", "left") else "next"
        if direction == "next" and _last_alternative_of_a_reply(cli, session_id):
            turn("reroll")  # SillyTavern's swipe right on the last one: a new reply
            return True
        node, _ = cli.store.switch_sibling(session_id, direction)
        turn_view = cli.store.turn(session_id, node.id)
        out(render.node_line(node, head_id=node.id, alternatives=render.alternatives(turn_view)))
        out(node.content)
    elif word in ("undo", "redo"):  # a turn too: its messages to the trash and back
        result, _ = cli.store.undo(session_id) if word == "undo" else cli.store.redo(session_id)
        out(paint(journal_line(result.action), "dim"))
    elif word == "state":
        out(json.dumps(cli.store.state(session_id).as_dict(), ensure_ascii=False, indent=2))
    elif word == "trace":
        head = cli.store.session(session_id).head_id
        found = cli.store.trace(session_id, head) if head else None
        if found is None:
            out("HEAD was not generated: no trace")
        else:
            print_trace(found.as_dict())
    elif word == "tree":
        tree = cli.store.tree(session_id)
        render.print_tree(tree)
    else:
        out(PLAY_HELP)
    return True
