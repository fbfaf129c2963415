"""``clotho play``'s slash commands (:data:`COMMANDS`, one table: name, arguments, one
line of help, what it does), and what a line the player sends does (:func:`dispatch`).

A command that takes a node takes any node name (an id or prefix, ``HEAD~N``:
``docs/cli.md``); the line editor completes the short ids after them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from mnemosyne import InvalidOperationError, JournalMismatchError, Message
from mnemosyne.edits import Rewrite
from mnemosyne.state import diff_states

from . import pager, render
from ._app import Cli
from .cells import clean, clip, terminal_size, terminal_width, wrap_line
from .editor import journal_line
from .playinput import HISTORY_FILE, CommandHelp, LineReader, NodeChoice
from .state import diff_lines, state_lines
from .style import out, paint
from .traceview import trace_lines

if TYPE_CHECKING:
    from orchestrator import TurnResult

    from .playscreen import ChatScreen

__all__ = ["COMMANDS", "LOG_LAST", "Command", "Play", "dispatch"]

#: How many of the last messages ``/log`` shows when not told.
LOG_LAST = 10
#: The prompt of a line being edited (``/edit``).
EDIT_PROMPT = "edit> "
#: How many nodes the completion of a node id offers at most.
_NODE_CHOICES = 200


@dataclass
class Play:
    """One ``clotho play`` session: what a line needs to act."""

    cli: Cli
    session_id: str
    lines: LineReader
    #: Play one turn of a kind (``say``, ``reroll``...) with the session's engine,
    #: streamed and reported: :func:`clotho.cli.play.run_turn`, bound.
    turn: Callable[..., TurnResult]
    #: What the player reads: ``screen.message(view)`` shows one message (its speaker,
    #: its text wrapped, ``reply 2/3`` and its id), ``screen.line(text)`` a line.
    screen: ChatScreen
    #: The player's message and who answers it (``speak(text, speaker)``: ``speaker``
    #: alone, else each the speaker order names, in turn):
    #: :func:`clotho.cli.play.play_round`, bound. ``None``: a say turn.
    speak: Callable[[str, str | None], Sequence[TurnResult]] | None = None
    #: The character the player picked to answer (``/speaker NAME``) until ``/speaker``
    #: alone gives it back to the speaker order.
    speaker: str | None = None
    #: Make the session's engine again, after its cast's settings changed (``/mute``).
    refresh: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        self.lines.attach(
            history=self.cli.settings.data_dir / HISTORY_FILE,
            commands=COMMANDS,
            nodes=self.node_choices,
            members=self.member_names,
        )

    def member_names(self) -> list[str]:
        """The cast's names, for completion."""
        from clotho.cast import session_cast

        return session_cast(self.cli.store, self.session_id).names

    def prompt(self) -> str:
        """The prompt of the player's line: ``> ``, or ``(to Bram) > `` while the
        player picked who answers."""
        if self.speaker is None:
            return paint("> ", "green", "bold")
        return paint(f"(to {self.speaker}) ", "dim") + paint("> ", "green", "bold")

    def node_choices(self) -> list[NodeChoice]:
        """The nodes a node id completes to: the path to HEAD, newest first, then the
        rest of the tree, each with its speaker and the start of its text."""
        tree = self.cli.store.tree(self.session_id)
        path = tree.path()
        on_path = {node.id for node in path}
        others = [node for node in reversed(tree.nodes) if node.id not in on_path]
        return [
            NodeChoice(
                render.short(node.id),
                clip(f"{node.name or node.role}: {' '.join(clean(node.content).split())}", 60),
            )
            for node in [*path, *others][:_NODE_CHOICES]
        ]

    def show(self, node_id: str, head_id: str | None) -> None:
        """One message, as the story shows it (its place among alternatives, its id;
        ``(HEAD)`` if it is ``head_id``)."""
        view = self.cli.store.turn(self.session_id, node_id)
        self.screen.message(view, head_id=head_id)

    def say(self, text: str, *styles: str) -> None:
        """A line of the game's own (wrapped on a terminal)."""
        self.screen.line(text, *styles)


@dataclass(frozen=True, kw_only=True)
class Command(CommandHelp):
    """A slash command: its help (:class:`clotho.cli.playinput.CommandHelp`), what it
    does with the rest of the line (``run(play, rest)``; ``False``: the session ends),
    and other names it answers to."""

    run: Callable[[Play, str], bool | None]
    aliases: tuple[str, ...] = ()


# -- playing -------------------------------------------------------------------------


def _reroll(play: Play, rest: str) -> None:
    play.turn("reroll", node=rest or None)


def _continue(play: Play, rest: str) -> None:
    play.turn("continue")


def _impersonate(play: Play, rest: str) -> None:
    drafted = play.turn("impersonate")  # the player's line, stored nowhere
    if drafted.node is None:
        play.lines.draft = drafted.text  # the next prompt's text, to edit and send


def _swipe(play: Play, rest: str) -> None:
    ways: dict[str, Literal["prev", "next"]] = {
        "": "next",
        ">": "next",
        "next": "next",
        "right": "next",
        "<": "prev",
        "prev": "prev",
        "left": "prev",
    }
    direction = ways.get(rest)
    if direction is None:
        play.say("usage: /swipe < or /swipe > (/swipe alone: >)")
        return
    cli, session_id = play.cli, play.session_id
    head = cli.store.session(session_id).head_id
    if head is None:
        play.say("the story is empty: nothing to swipe", "dim")
        return
    view = cli.store.turn(session_id, head)
    last = view.index == len(view.siblings) - 1
    if direction == "next" and view.node.role == "assistant" and last:
        play.turn("reroll")  # SillyTavern's swipe right on the last one: a new reply
        return
    if (view.index == 0) if direction == "prev" else last:
        where = "first" if direction == "prev" else "last"
        play.say(f"this is the {where} alternative: nothing that way", "dim")
        return
    node, session = cli.store.switch_sibling(session_id, direction)
    play.show(node.id, session.head_id)


def _edit(play: Play, rest: str) -> None:
    cli, session_id = play.cli, play.session_id
    ref, given = rest, None
    if any(space.isspace() for space in rest):  # no node's name has a space: new text
        ref, given = "", rest  # for the last message, as /edit TEXT always did
    if not ref:
        messages = cli.store.messages(session_id)
        last = _last_said(messages)
        if last is None:
            play.say("nothing to edit: you have not said anything yet (/edit NODE edits any)")
            return
        ref = messages[last].id
    node = cli.store.node(session_id, ref)
    what = {"user": "your message", "assistant": "the reply"}.get(node.role, "the message")
    how = "as a fork, then a new reply" if node.role == "user" else "in place"
    keys = "Enter saves, Ctrl+C leaves it" if play.lines.terminal else "the next line is its text"
    if given is not None:
        text = given.strip()
    else:
        play.say(f"editing {what} {render.short(node.id)} ({how}): {keys}", "dim")
        try:
            text = play.lines.read(EDIT_PROMPT, draft=node.content).strip()
        except (KeyboardInterrupt, EOFError):
            play.say("edit left: nothing changed", "dim")
            return
    if not text:
        play.say("the new text is empty: nothing changed", "dim")
        return
    if text == node.content.strip():
        play.say("the text is unchanged: nothing changed", "dim")
        return
    if node.role == "user":
        play.turn("edit", node=node.id, text=text)  # a fork beside it, and its reply
        return
    _, session = cli.store.edit(session_id, Rewrite.checked(node_id=node.id, content=text))
    play.show(node.id, session.head_id)
    play.say("rewritten in place (/undo takes it back)", "dim")


def _checkout(play: Play, rest: str) -> None:
    if not rest:
        play.say("usage: /checkout NODE (an id, a prefix, HEAD~N)")
        return
    node, session = play.cli.store.checkout(play.session_id, rest)
    play.show(node.id, session.head_id)
    _check_pick(play)


def _undo(play: Play, rest: str) -> None:
    _travel(play, "undo")


def _redo(play: Play, rest: str) -> None:
    _travel(play, "redo")


def _travel(play: Play, way: Literal["undo", "redo"]) -> None:
    """Take back the last turn or edit (or bring it back), saying what it was."""
    store, session_id = play.cli.store, play.session_id
    try:
        result, session = store.undo(session_id) if way == "undo" else store.redo(session_id)
    except JournalMismatchError:
        raise  # the journal was cleared: the loop says so, in the store's words
    except InvalidOperationError:  # the journal has nothing that way
        play.say(f"nothing to {way}", "dim")
        return
    play.say(journal_line(result.action) + (f" ({result.note})" if result.note else ""), "dim")
    if session.head_id is not None:
        play.show(session.head_id, session.head_id)
    _check_pick(play)


def _quit(play: Play, rest: str) -> bool:
    return False


# -- the cast ------------------------------------------------------------------------


def _cast(play: Play, rest: str) -> None:
    from .cast import cast_document, cast_lines

    document = cast_document(play.cli.store, play.session_id)
    out(*cast_lines(document, terminal_width()))
    if play.speaker is not None:
        play.say(f"{play.speaker} answers your messages (/speaker alone: the order)", "dim")


def _member(play: Play, rest: str, usage: str) -> str | None:
    """The cast's name ``rest`` stands for (any case); ``None`` (and the usage said)
    when it is empty."""
    from clotho.cast import session_cast

    if not rest:
        play.say(f"usage: {usage} (Tab completes the names)")
        return None
    return session_cast(play.cli.store, play.session_id).find(rest).name


def _speaker(play: Play, rest: str) -> None:
    if not rest:
        play.speaker = None
        play.say("the speaker order decides who answers again", "dim")
        return
    from clotho.cast import session_cast

    store, session_id = play.cli.store, play.session_id
    cast = session_cast(store, session_id)  # one read: who it is, muted, present
    member = cast.find(rest)
    name = member.name
    if member.muted:
        play.say(f"{name} is muted: /unmute {name} first")
        return
    head = store.session(session_id).head_id
    if name not in cast.present(store.state(session_id).present if head else None):
        play.say(f"{name} is not in the scene: /join {name} first")
        return
    play.speaker = name
    play.say(f"{name} answers your messages now (/speaker alone: the order decides)", "dim")


def _next(play: Play, rest: str) -> None:
    name = _member(play, rest, "/next [NAME]") if rest else None
    play.turn("reply", speaker=name)


def _scene(play: Play, rest: str, move: Literal["leaves", "joins"]) -> None:
    from clotho.cast import scene_change

    name = _member(play, rest, "/leave NAME" if move == "leaves" else "/join NAME")
    if name is None:
        return
    node, session = scene_change(play.cli.store, play.session_id, name, move)
    play.show(node.id, session.head_id)
    if move == "leaves":
        _unpick(play, name)


def _leave(play: Play, rest: str) -> None:
    _scene(play, rest, "leaves")


def _join(play: Play, rest: str) -> None:
    _scene(play, rest, "joins")


def _mute(play: Play, rest: str, muted: bool) -> None:
    from .cast import set_muted

    name = _member(play, rest, "/mute NAME" if muted else "/unmute NAME")
    if name is None:
        return
    member, _ = set_muted(play.cli.store, play.session_id, name, muted)
    play.say(f"{member.name} " + ("never speaks now (it still sees)" if muted else "may speak"))
    play.refresh()
    if muted:
        _unpick(play, member.name)


def _check_pick(play: Play) -> None:
    """After HEAD moved (a checkout, an undo, a redo): the speaker the player picked
    still answers only if it is still in the cast and in the scene there."""
    if play.speaker is None:
        return
    from clotho.cast import UnknownMemberError, session_cast

    store, session_id = play.cli.store, play.session_id
    cast = session_cast(store, session_id)
    try:
        name = cast.find(play.speaker).name
    except UnknownMemberError:
        _unpick(play, play.speaker)
        return
    head = store.session(session_id).head_id
    if name not in cast.present(store.state(session_id).present if head else None):
        _unpick(play, name)


def _unpick(play: Play, name: str) -> None:
    """``name`` no longer answers the player's messages (it left, or was muted): the
    speaker order decides again, and the player is told."""
    if play.speaker == name:
        play.speaker = None
        play.say(f"{name} was to answer: the speaker order decides again", "dim")


def _muted(play: Play, rest: str) -> None:
    _mute(play, rest, True)


def _unmuted(play: Play, rest: str) -> None:
    _mute(play, rest, False)


# -- reading -------------------------------------------------------------------------


def _log(play: Play, rest: str) -> None:
    if rest not in ("", "all") and not (rest.isdigit() and int(rest) > 0):
        play.say("usage: /log [N] (the last N messages) or /log all")
        return
    last = None if rest == "all" else int(rest) if rest else LOG_LAST
    session, turns, first = render.log_window(play.cli.store, play.session_id, last)
    lines = render.log_lines(session, turns, width=terminal_size().columns, first_number=first)
    if first > 1:
        earlier = f"{first - 1} earlier message" + ("s" if first > 2 else "")
        lines.insert(0, paint(f"… {earlier} (/log all shows them)", "dim"))
    pager.page(lines)


def _tree(play: Play, rest: str) -> None:
    if rest not in ("", "all") and not rest.isdigit():
        play.say("usage: /tree (side branches folded), /tree N (unfolded N levels), /tree all")
        return
    tree = play.cli.store.tree(play.session_id)
    width = terminal_size().columns
    depth = int(rest) if rest.isdigit() else 0
    pager.page(render.tree_lines(tree, width=width, depth=depth, all=rest == "all"))


def _state(play: Play, rest: str) -> None:
    world = play.cli.store.state(play.session_id, rest or None)
    out(*state_lines(world, terminal_width()))


def _diff(play: Play, rest: str) -> None:
    store, session_id = play.cli.store, play.session_id
    names = rest.split()
    if len(names) > 2:
        play.say("usage: /diff [A] [B] (default: before the last turn, and HEAD)")
        return
    if names:
        a, b = names[0], names[1] if len(names) == 2 else "HEAD"
        changed = store.diff(session_id, a, b)
        said = f"from {a} to {b}"
    else:
        before = _before_last_turn(play)
        if before is None:  # the story's start: against the initial state
            initial = store.schema(session_id).initial_state()
            head = store.state(session_id).as_dict()
            changed = diff_states(initial, head)
            said = "since the story began"
        else:
            changed = store.diff(session_id, before, "HEAD")
            said = f"by the last turn (from {render.short(before)} to HEAD)"
    play.say(f"what changed {said}:", "dim")
    out(*diff_lines(changed, terminal_width()))


def _last_said(messages: Sequence[Message]) -> int | None:
    """The index of the player's last message in ``messages`` (``None``: none)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"), None)


def _before_last_turn(play: Play) -> str | None:
    """The node before the player's last message (where the last turn started), or the
    node before HEAD if the player has said nothing; ``None`` at the story's start."""
    messages = play.cli.store.messages(play.session_id)
    last = _last_said(messages)
    if last is None:
        last = len(messages) - 1
    return messages[last - 1].id if last > 0 else None


def _trace(play: Play, rest: str) -> None:
    store, session_id = play.cli.store, play.session_id
    ref = rest or store.session(session_id).head_id
    if ref is None:
        play.say("the story is empty: no trace", "dim")
        return
    found = store.trace(session_id, ref)
    if found is None:
        name = rest or "HEAD"
        play.say(f"{name} was not written by the model: no trace (/trace NODE for a reply)")
        return
    pager.page(trace_lines(found.as_dict(), terminal_width()))


def _lore(play: Play, rest: str) -> None:
    from clotho.lore_edits import books_listed

    store, session_id = play.cli.store, play.session_id
    width = terminal_width()
    labels = {
        f"{view.book.name}:{entry.uid}": entry.comment or ", ".join(entry.keys)
        for view in books_listed(store, session_id)
        for entry in view.book.entries
    }
    active = store.state(session_id).active_lore_ids
    lines = [paint("active at HEAD", "bold") + (":" if active else ": none")]
    for lore_id in active:
        lines += wrap_line(labels.get(lore_id, ""), width, lead=f"  {lore_id}  ", indent=4)
    reply = _last_reply_trace(play)
    if reply is None:
        lines.append(paint("no reply written by the model yet: nothing fired", "dim"))
    else:
        node_id, trace = reply
        hits, skipped = trace.get("lore") or [], trace.get("lore_skipped") or []
        heading = f"fired for the last reply ({render.short(node_id)})"
        lines.append(paint(heading, "bold") + (":" if hits else ": nothing"))
        for hit in hits:
            label = labels.get(hit["id"]) or hit.get("comment") or ""
            lead = f"  {hit['id']}" + (f" {label}" if label else "") + ": "
            lines += wrap_line(hit["reason"], width, lead=lead, indent=4)
        for miss in skipped:
            lines += wrap_line(
                f"not {miss['id']}: {miss['reason']}", width, lead="  ", indent=4, styles=("dim",)
            )
    out(*lines)


def _last_reply_trace(play: Play) -> tuple[str, dict[str, Any]] | None:
    """The last reply on the path with a trace (a few messages back at most), and it."""
    store, session_id = play.cli.store, play.session_id
    for message in reversed(store.messages(session_id)[-8:]):
        if message.role != "assistant":
            continue
        found = store.trace(session_id, message.id)
        if found is not None:
            return message.id, found.as_dict()
    return None


def _help(play: Play, rest: str) -> None:
    name = rest.lstrip("/")
    if name:
        command = _find(name)
        if command is None:
            play.say(f"no command /{name}: /help lists them")
            return
        chosen: Sequence[Command] = [command]
    else:
        chosen = COMMANDS
    width = terminal_width()
    column = max(len(f"/{c.name} {c.arguments}") for c in chosen) + 2
    lines: list[str] = []
    for command in chosen:
        usage = f"/{command.name} {command.arguments}".rstrip().ljust(column)
        also = f" (also /{', /'.join(command.aliases)})" if command.aliases else ""
        lines += wrap_line(command.help + also, width, lead=paint(usage, "bold"))
    if not name:
        lines += wrap_line(
            "Anything else you type is said in the story. Enter sends; Alt+Enter (or "
            "Ctrl+J) starts a new line; Tab completes commands and node ids; Ctrl+D quits.",
            width,
            styles=("dim",),
        )
    out(*lines)


COMMANDS: tuple[Command, ...] = (
    Command(name="help", arguments="[COMMAND]", help="every command, or one", run=_help),
    Command(
        name="log",
        arguments="[N|all]",
        help=f"the last N messages (default {LOG_LAST}), numbered; all: every one",
        run=_log,
    ),
    Command(
        name="tree",
        arguments="[N|all]",
        help="the story's tree, side branches folded (N levels unfolded; all)",
        run=_tree,
    ),
    Command(
        name="state",
        arguments="[NODE]",
        help="the world state now (or after NODE): variables, lore, summary",
        run=_state,
        takes_node=True,
    ),
    Command(
        name="diff",
        arguments="[A] [B]",
        help="what the last turn changed (or from A to B, or from A to HEAD)",
        run=_diff,
        takes_node=True,
    ),
    Command(
        name="lore",
        arguments="",
        help="the lore active now, and what fired for the last reply and why",
        run=_lore,
    ),
    Command(
        name="trace",
        arguments="[NODE]",
        help="what the model was sent for a reply (default HEAD), and why",
        run=_trace,
        takes_node=True,
    ),
    Command(
        name="reroll",
        arguments="[NODE]",
        help="a new alternative of the last reply (or NODE); old ones stay",
        run=_reroll,
        takes_node=True,
    ),
    Command(
        name="swipe",
        arguments="[<|>]",
        help="the previous or next alternative; > past the last writes one",
        run=_swipe,
    ),
    Command(name="continue", arguments="", help="the reply goes on where it ended", run=_continue),
    Command(
        name="impersonate",
        arguments="",
        help="the model drafts your next line in the input, to edit and send",
        run=_impersonate,
    ),
    Command(
        name="edit",
        arguments="[NODE | TEXT]",
        help="your last message or NODE: a reply in place, yours as a fork "
        "(/edit TEXT: your last message becomes TEXT)",
        run=_edit,
        takes_node=True,
    ),
    Command(
        name="checkout",
        arguments="NODE",
        help="go to a message (the story goes on from there)",
        run=_checkout,
        takes_node=True,
    ),
    Command(
        name="cast",
        arguments="",
        help="the characters: who is in the scene, muted, the speaker order",
        run=_cast,
    ),
    Command(
        name="speaker",
        arguments="[NAME]",
        help="NAME answers your messages from now on; alone: the speaker order decides",
        run=_speaker,
        takes_member=True,
    ),
    Command(
        name="next",
        arguments="[NAME]",
        help="a character speaks with no message of yours (default: the order's pick)",
        run=_next,
        takes_member=True,
    ),
    Command(
        name="leave",
        arguments="NAME",
        help="NAME leaves the scene (misses what happens until /join)",
        run=_leave,
        takes_member=True,
    ),
    Command(
        name="join",
        arguments="NAME",
        help="NAME comes (back) into the scene",
        run=_join,
        takes_member=True,
    ),
    Command(
        name="mute",
        arguments="NAME",
        help="NAME never speaks (it still sees)",
        run=_muted,
        takes_member=True,
    ),
    Command(
        name="unmute",
        arguments="NAME",
        help="NAME may speak again",
        run=_unmuted,
        takes_member=True,
    ),
    Command(name="undo", arguments="", help="take back the last turn or edit", run=_undo),
    Command(name="redo", arguments="", help="bring back what /undo took back", run=_redo),
    Command(
        name="quit",
        arguments="",
        help="end the session; Ctrl+D does too",
        run=_quit,
        aliases=("exit", "q"),
    ),
)


def _find(name: str) -> Command | None:
    return next((c for c in COMMANDS if name == c.name or name in c.aliases), None)


def dispatch(play: Play, line: str) -> bool:
    """Act on a line the player sent: a message to say, or a slash command; ``False``
    when the player asked to quit."""
    with play.lines.held():  # keys typed meanwhile neither echo nor send anything
        if not line.startswith("/"):
            if play.speak is None:
                play.turn("say", text=line, speaker=play.speaker)
            else:
                play.speak(line, play.speaker)
            return True
        word, _, rest = line[1:].partition(" ")
        command = _find(word)
        if command is None:
            play.say(f"unknown command /{word}: /help lists them")
            return True
        return command.run(play, rest.strip()) is not False
