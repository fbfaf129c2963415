"""The player's lines in ``clotho play``: prompt_toolkit on a terminal, stdin otherwise.

On a terminal, a line editor: Enter sends; Alt+Enter (or Esc then Enter) and Ctrl+J
start a new line, and a pasted text stays one message (bracketed paste); the arrows
walk the history, which is kept across sessions in the data folder (Ctrl+R searches
it); Tab completes the slash commands, with their help, node ids after the commands
that take one, and the cast's names after those that take a character; Backspace and
Delete take whole characters (a CJK character, an emoji with its modifiers); keys such
as Ctrl+L act and are not typed into the text; a line has no length limit. Between
lines (:meth:`LineReader.held`), keys typed while a reply streams neither echo into it
nor send anything. Piped input is read line by line, with control characters other
than tab and newline removed.

prompt_toolkit is imported only when a terminal asks for it (it costs every other
command a tenth of a second).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import regex

from clotho.errors import UsageError

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer
    from prompt_toolkit.history import History
    from prompt_toolkit.key_binding import KeyBindings

__all__ = [
    "CANONICAL_LIMIT",
    "HISTORY_FILE",
    "HISTORY_LIMIT",
    "KEYS_HINTS",
    "CommandHelp",
    "LineReader",
    "NodeChoice",
    "clean_line",
    "completions",
    "prompt_session",
]


#: C0 control characters but tab and newline, and DEL: never part of what the player says.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: The longest line a terminal in canonical mode hands over (Linux: 4095 bytes and the
#: newline); reading there, a longer line arrives cut, so one that long is refused.
CANONICAL_LIMIT = 4095
#: The line editor's history, in the data folder (``Settings.data_dir``).
HISTORY_FILE = "play-history"
#: How many lines the history keeps: the oldest beyond are dropped when it is loaded.
HISTORY_LIMIT = 1000
#: The keys, as the toolbar under the line says them: the longest that fits is shown.
KEYS_HINTS = (
    "Enter sends · Alt+Enter new line · ↑↓ history · Ctrl+R search · Tab completes · "
    "/help · Ctrl+D quits",
    "Enter sends · Alt+Enter new line · ↑↓ history · Tab completes · Ctrl+D quits",
    "Enter sends · Alt+Enter new line · /help",
    "Alt+Enter: new line",
)
#: One user-perceived character (a grapheme cluster: an emoji with its modifiers).
_GRAPHEME = regex.compile(r"\X")


def clean_line(text: str) -> str:
    """The player's line without control characters (tab and newline kept)."""
    return _CONTROLS.sub("", text)


@dataclass(frozen=True)
class CommandHelp:
    """A slash command as completion offers it: ``name`` (without the slash), its
    arguments and its one line of help; ``takes_node``: node ids complete after it;
    ``takes_member``: the names of the cast do."""

    name: str
    arguments: str
    help: str
    takes_node: bool = False
    takes_member: bool = False


@dataclass(frozen=True)
class NodeChoice:
    """A node completion offers: its short id and what it says."""

    short_id: str
    label: str


@dataclass(frozen=True)
class Candidate:
    """One completion: the ``text`` that replaces the last ``replace`` characters typed,
    shown as ``shown`` with ``meta`` beside it."""

    text: str
    replace: int
    shown: str
    meta: str


def completions(
    typed: str,
    commands: Sequence[CommandHelp],
    nodes: Callable[[], Sequence[NodeChoice]],
    members: Callable[[], Sequence[str]] = tuple,
) -> Iterator[Candidate]:
    """What Tab offers for the text before the cursor: slash commands (``/tr`` ->
    ``/trace``, ``/tree``) with their help, a command's name after ``/help``, after
    a command that takes a node, the nodes whose short id starts with the word being
    typed (``nodes`` is called only then), and after one that takes a member of the
    cast, the names (``members``) that start with what follows it, in any case (a
    name may have spaces)."""
    if not typed.startswith("/") or "\n" in typed:
        return
    word, space, rest = typed[1:].partition(" ")
    if not space:
        for command in commands:
            if command.name.startswith(word):
                shown = f"/{command.name} {command.arguments}".rstrip()
                yield Candidate(f"/{command.name}", len(typed), shown, command.help)
        return
    current = rest.rpartition(" ")[2]
    if word == "help" and " " not in rest:  # /help CMD: the commands' names
        for command in commands:
            if command.name.startswith(current):
                yield Candidate(command.name, len(current), command.name, command.help)
        return
    chosen = next((c for c in commands if c.name == word), None)
    if chosen is not None and chosen.takes_member:
        for name in members():
            if name.casefold().startswith(rest.casefold()) and name != rest:
                yield Candidate(name, len(rest), name, "")
        return
    if chosen is None or not chosen.takes_node:
        return
    for choice in nodes():
        if choice.short_id.startswith(current):
            yield Candidate(choice.short_id, len(current), choice.short_id, choice.label)


def _completer(
    commands: Sequence[CommandHelp],
    nodes: Callable[[], Sequence[NodeChoice]],
    members: Callable[[], Sequence[str]] = tuple,
) -> Completer:
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document

    class SlashCompleter(Completer):
        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterator[Completion]:
            typed = document.text_before_cursor
            for found in completions(typed, commands, nodes, members):
                yield Completion(
                    found.text,
                    start_position=-found.replace,
                    display=found.shown,
                    display_meta=found.meta,
                )

    return SlashCompleter()


def _last_grapheme(text: str) -> int:
    """The length (in code points) of the last whole character of ``text``."""
    line = text[text.rfind("\n") + 1 :]  # no character spans a newline
    found = _GRAPHEME.findall(line)
    return len(found[-1]) if found else min(len(text), 1)


def _first_grapheme(text: str) -> int:
    """The length (in code points) of the first whole character of ``text``."""
    found = _GRAPHEME.match(text)
    return len(found.group()) if found else min(len(text), 1)


def _key_bindings() -> KeyBindings:
    """Enter sends (or takes the completion chosen in the menu); Alt+Enter, Esc then
    Enter, and Ctrl+J add a new line; Backspace, Delete and the arrows go by whole
    characters."""
    from prompt_toolkit.enums import DEFAULT_BUFFER
    from prompt_toolkit.filters import has_focus, has_selection
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()
    editing = has_focus(DEFAULT_BUFFER)

    @bindings.add("enter", filter=editing)
    def _send(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        state = buffer.complete_state
        if state is not None and state.current_completion is not None:
            buffer.apply_completion(state.current_completion)  # the menu's choice, kept
            return
        buffer.validate_and_handle()

    @bindings.add("escape", "enter", filter=editing)
    @bindings.add("c-j", filter=editing)
    def _new_line(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    @bindings.add("backspace", filter=editing & ~has_selection)
    def _delete_before(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        for _ in range(event.arg):
            before = buffer.document.text_before_cursor
            if before:
                buffer.delete_before_cursor(_last_grapheme(before))

    @bindings.add("delete", filter=editing & ~has_selection)
    def _delete_after(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        for _ in range(event.arg):
            after = buffer.document.text_after_cursor
            if after:
                buffer.delete(_first_grapheme(after))

    @bindings.add("left", filter=editing)
    def _left(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        for _ in range(event.arg):
            before = buffer.document.text_before_cursor
            if before and not before.endswith("\n"):
                buffer.cursor_position -= _last_grapheme(before)

    @bindings.add("right", filter=editing)
    def _right(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        for _ in range(event.arg):
            after = buffer.document.text_after_cursor
            if after and not after.startswith("\n"):
                buffer.cursor_position += _first_grapheme(after)

    return bindings


def _keys_hint() -> str:
    """The longest of :data:`KEYS_HINTS` that fits the terminal's width now."""
    from prompt_toolkit.application import get_app

    width = get_app().output.get_size().columns
    return next((hint for hint in KEYS_HINTS if len(hint) < width), "")


def prompt_session(
    *,
    history: Path | None = None,
    commands: Sequence[CommandHelp] = (),
    nodes: Callable[[], Sequence[NodeChoice]] = tuple,
    members: Callable[[], Sequence[str]] = tuple,
    **options: Any,
) -> PromptSession[str]:
    """The line editor (see the module's doc): its history in the file ``history``
    (none kept: ``None``), completion of ``commands``, of ``nodes`` and of the cast's
    names (``members``); ``options`` go to prompt_toolkit's ``PromptSession`` (tests
    pass ``input`` and ``output``)."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import InMemoryHistory

    if history is not None:
        history.parent.mkdir(parents=True, exist_ok=True)
    return PromptSession(
        history=_capped_history(history) if history is not None else InMemoryHistory(),
        multiline=True,
        prompt_continuation=lambda width, line, wrap: "." * (width - 1) + " ",
        completer=_completer(commands, nodes, members),
        complete_while_typing=True,
        key_bindings=_key_bindings(),
        bottom_toolbar=_keys_hint,
        **options,
    )


def _capped_history(path: Path) -> History:
    """prompt_toolkit's history file, which only grows, kept to its newest
    :data:`HISTORY_LIMIT` lines: rewritten (whole, in prompt_toolkit's own format, then
    renamed over) when it is loaded holding more. The class is made here, not at import:
    prompt_toolkit is imported only when a terminal asks for it."""
    from prompt_toolkit.history import FileHistory

    class CappedFileHistory(FileHistory):
        def load_history_strings(self) -> Iterable[str]:
            newest_first = list(super().load_history_strings())
            if len(newest_first) > HISTORY_LIMIT:
                del newest_first[HISTORY_LIMIT:]
                kept = path.with_name(path.name + ".tmp")
                kept.unlink(missing_ok=True)
                writer = FileHistory(kept)
                for text in reversed(newest_first):
                    writer.store_string(text)
                kept.replace(path)
            return newest_first

    return CappedFileHistory(path)


class LineReader:
    """The player's lines: a prompt_toolkit session on a terminal (no length limit, its
    own handling of keys), else lines of stdin (piped input, tests).

    On a terminal the line editor (:func:`prompt_session`) is made at the first read,
    with what :meth:`attach` gave it; a session passed in is used as it is.
    :meth:`read` raises ``EOFError`` at the end (Ctrl+D) and ``KeyboardInterrupt`` for
    Ctrl+C while typing, with either. ``draft`` (an impersonation's line) is the next
    line's text to edit, on a terminal.
    """

    def __init__(
        self,
        session: PromptSession[str] | None = None,
        *,
        edit_session: PromptSession[str] | None = None,
    ) -> None:
        self.session = session
        #: The line editor of a text edited in place (``read(draft=...)``): one with no
        #: history, so a reply's text edited is not offered again by the arrows (made
        #: at its first use unless given).
        self.edit_session = edit_session
        self.terminal = session is not None or (sys.stdin.isatty() and sys.stdout.isatty())
        self.draft = ""
        self._history: Path | None = None
        self._commands: Sequence[CommandHelp] = ()
        self._nodes: Callable[[], Sequence[NodeChoice]] = tuple
        self._read_nodes: Sequence[NodeChoice] | None = None  # this line's, once asked
        self._members: Callable[[], Sequence[str]] = tuple
        self._read_members: Sequence[str] | None = None

    def attach(
        self,
        *,
        history: Path | None,
        commands: Sequence[CommandHelp],
        nodes: Callable[[], Sequence[NodeChoice]],
        members: Callable[[], Sequence[str]] = tuple,
    ) -> None:
        """What the line editor keeps and completes: its history file, the slash
        commands, the nodes (asked for when a node id is being completed), the cast's
        names (when a member's is)."""
        self._history, self._commands, self._nodes = history, commands, nodes
        self._members = members

    def _members_now(self) -> Sequence[str]:
        """The cast's names to complete, read once a line."""
        if self._read_members is None:
            self._read_members = self._members()
        return self._read_members

    def _nodes_now(self) -> Sequence[NodeChoice]:
        """The nodes to complete, read once a line (not at every key typed)."""
        if self._read_nodes is None:
            self._read_nodes = self._nodes()
        return self._read_nodes

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """While the game acts on a line (a turn streams, a command prints): on a
        terminal, keys typed meanwhile are not echoed into what it writes, and are
        dropped when it is done (an Enter typed meanwhile sends nothing). Ctrl+C still
        interrupts (the terminal's signals stay on)."""
        fd = sys.stdin.fileno() if self.terminal and sys.stdin.isatty() else None
        if fd is None:
            yield
            return
        import termios

        before = termios.tcgetattr(fd)
        quiet = list(before)
        quiet[3] = before[3] & ~(termios.ECHO | termios.ICANON)  # the local modes
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        try:
            yield
        finally:  # TCSAFLUSH: what was typed meanwhile and not read is dropped
            termios.tcsetattr(fd, termios.TCSAFLUSH, before)

    def read(self, prompt: str, *, draft: str | None = None) -> str:
        """One line, cleaned (:func:`clean_line`); on a terminal, ``draft`` (else
        :attr:`draft`, once) is its text to begin with.

        Raises:
            UsageError: a line read from a terminal in canonical mode reached its limit
                (the rest was cut off by the terminal).
        """
        if self.terminal:
            from prompt_toolkit.formatted_text import ANSI

            if self.session is None:
                self.session = prompt_session(
                    history=self._history,
                    commands=self._commands,
                    nodes=self._nodes_now,
                    members=self._members_now,
                )
            self._read_nodes = None  # the tree may have changed since the last line
            self._read_members = None  # and the cast
            editor = self.session
            if draft is not None:
                if self.edit_session is None:
                    self.edit_session = prompt_session(history=None)
                editor, text = self.edit_session, draft
            else:
                text, self.draft = self.draft, ""
            return clean_line(editor.prompt(ANSI(prompt), default=text))
        line = input(prompt)
        if sys.stdin.isatty() and len(line.encode()) >= CANONICAL_LIMIT - 1:
            raise UsageError(
                f"that line reached the terminal's limit of {CANONICAL_LIMIT} bytes and may "
                "have been cut: not sent (play reads whole lines of any length when both "
                "stdin and stdout are a terminal)"
            )
        return clean_line(line)
