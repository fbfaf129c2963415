"""What the player reads while playing: replies streamed word-wrapped, a spinner while
the model works, a footer after each turn, messages and the story's last messages.

:class:`ChatScreen` is the one home of it, used by ``clotho play`` and by the playing
commands (``say``, ``reroll``, ``edit``, ``continue``, ``impersonate``).

On a terminal, text is wrapped to the terminal's width as it comes
(:class:`clotho.cli.streamtext.TextWrapper`: the width read again before every word, so
a resize changes what follows; measured in cells, CJK and emoji taking two; a word never
cut unless it is wider than the line). A reply starts with its speaker's name in a
colour (each member of the cast its own), ``*actions*`` are in italics (a ``*`` may
come in one token and its closing one later), and the model's reasoning shows dim under
a "thinking" label before the reply.
Colours follow :data:`clotho.cli.style.COLOR` (off with ``NO_COLOR``).

Off a terminal (a pipe, a file), a reply's text is written exactly as the model wrote
it, with no name, no wrapping and no styles: scripts get the text as it is.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from rich.cells import cell_len

from mnemosyne.state import BUILT_INS

from . import cells, render, style
from .streamtext import TextWrapper, styled

if TYPE_CHECKING:
    from rich.live import Live

    from mnemosyne import NodeAmongSiblings, ProjectionPage

__all__ = ["RECAP", "ChatScreen", "footer_text", "state_changes"]

#: How many of the story's last messages ``clotho play`` shows on start and resume.
RECAP = 6
#: The most lines a message takes in a recap; a longer one ends with a note.
RECAP_LINES = 8
#: The player's colour; characters get one of :data:`_CHARACTER_COLORS` (see
#: :func:`speaker_color`).
_PLAYER_COLOR = "green"
_CHARACTER_COLORS = ("cyan", "magenta", "yellow", "blue", "bright_cyan", "bright_magenta")


def speaker_color(name: str, *, player: bool, cast: Sequence[str] = ()) -> str:
    """The colour of a speaker's name: the player's, or one per character: a member of
    ``cast`` (the session's, in its order) by its place in it, so the first six
    members never share one; any other name by the name (stable across runs)."""
    if player:
        return _PLAYER_COLOR
    if name in cast:
        return _CHARACTER_COLORS[list(cast).index(name) % len(_CHARACTER_COLORS)]
    return _CHARACTER_COLORS[zlib.crc32(name.encode()) % len(_CHARACTER_COLORS)]


@dataclass(frozen=True)
class Change:
    """A variable that a turn changed: its name, its value before and after."""

    name: str
    before: Any
    after: Any

    def text(self) -> str:
        if isinstance(self.before, list) and isinstance(self.after, list):
            added = [item for item in self.after if item not in self.before]
            removed = [item for item in self.before if item not in self.after]
            parts = [f"+{_value(item)}" for item in added]
            parts += [f"-{_value(item)}" for item in removed]
            return f"{self.name} {' '.join(parts)}" if parts else f"{self.name} reordered"
        return f"{self.name} {_value(self.before)} → {_value(self.after)}"


def _value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value, ensure_ascii=False)


def state_changes(diff: Mapping[str, Sequence[Any]]) -> list[Change]:
    """The variables a diff of two states (:meth:`mnemosyne.Store.diff`: ``{path:
    [before, after]}``, a map's entries as ``affinity.marla``) changed, in its order."""
    return [
        Change(path, before, after)
        for path, (before, after) in diff.items()
        if path not in BUILT_INS
    ]


def footer_text(
    view: NodeAmongSiblings,
    changes: Sequence[Change] = (),
    *,
    prompt_tokens: int | None = None,
    window: int | None = None,
    head_id: str | None = None,
    speaker: str | None = None,
) -> list[tuple[str, str]]:
    """A message's footer as (text, style) parts: its ``speaker`` if given (a reply's
    in a cast of several, where no header names it), ``reply 2/2``, the changes, the
    prompt's tokens over the context window, its marks (incomplete, disabled, ``HEAD``
    if it is ``head_id``), and its short id last."""
    node = view.node
    what = {"assistant": "reply", "user": "message"}.get(node.role, node.role)
    if render.is_scene(node):
        what = "scene"
    parts = [(speaker, "bold")] if speaker else []
    parts.append((f"{what} {view.index + 1}/{len(view.siblings)}", "dim"))
    parts.extend((change.text(), "yellow") for change in changes)
    if prompt_tokens is not None and window:
        parts.append((f"{prompt_tokens:,}/{window:,} tokens", "dim"))
    if node.metadata.get("incomplete"):
        parts.append(("incomplete", "yellow"))
    if not node.enabled:
        parts.append(("disabled", "dim"))
    if node.id == head_id:
        parts.append(("HEAD", "bold yellow"))
    parts.append((render.short(node.id), "dim"))
    return parts


class _Spinner:
    """A spinner and a line of text on stderr (Rich), while the model works; without
    ``color``, no styles at all."""

    def __init__(self, *, color: bool) -> None:
        self._live: Live | None = None
        self.color = color

    @property
    def shown(self) -> bool:
        return self._live is not None

    def show(self, text: str) -> None:
        from rich.spinner import Spinner
        from rich.text import Text

        renderable = Spinner("dots", text=Text(text, style="dim"), style="cyan")
        if self._live is not None:
            self._live.update(renderable, refresh=True)
            return
        from rich.console import Console
        from rich.live import Live

        console = Console(
            file=sys.stderr,
            highlight=False,
            soft_wrap=False,
            color_system="auto" if self.color else None,
        )
        self._live = Live(
            renderable,
            console=console,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=True,  # a warning logged meanwhile lands above it
            refresh_per_second=12.5,
        )
        self._live.start()

    def hide(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()


class ChatScreen:
    """The screen of a playing session: a turn's events (:meth:`on_event`), its footer
    (:meth:`footer`), one message (:meth:`message`) and the story so far (:meth:`recap`).

    ``terminal`` (default: whether stdout is one) decides wrapping, names and the
    spinner; ``color`` (default: :data:`clotho.cli.style.COLOR` on a terminal) the
    styles; ``width`` how wide a line is (default: the terminal's, read each time);
    ``quiet`` (``--json``) shows nothing.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        *,
        terminal: bool | None = None,
        color: bool | None = None,
        width: Callable[[], int] | None = None,
        quiet: bool = False,
        speakers: Mapping[str, str] | None = None,
        cast: Sequence[str] = (),
    ) -> None:
        self.out = out if out is not None else sys.stdout
        #: The name a message of a role is shown with when it has none of its own (older
        #: stories): ``{"user": player, "assistant": character}``.
        self.speakers = dict(speakers or {})
        #: The session's characters in order: each name's colour is its place's.
        self.cast = tuple(cast)
        self.err = err if err is not None else sys.stderr
        self.terminal = self.out.isatty() if terminal is None else terminal
        self.color = (style.COLOR and self.terminal) if color is None else color
        self.width = width or (lambda: cells.terminal_width(self.out) or 80)
        self.quiet = quiet
        #: A spinner only where a person watches: stderr a terminal, stdout too.
        self.live = not quiet and self.terminal and _isatty(self.err)
        self._spinner = _Spinner(color=self.color)
        self._text: TextWrapper | None = None  # the reply or reasoning being written
        self._thinking = False
        self._speaker: tuple[str, bool, str] | None = None  # the next reply's speaker
        self._raw_midline = False
        self._leading = False  # the text begun has nothing but blanks yet
        self._ended_waiting = False  # the turn ended while the spinner was shown

    # -- painting ------------------------------------------------------------------

    def paint(self, text: str, *styles: str) -> str:
        """``text`` in Rich styles (``"bold cyan"``...) when colour is on."""
        return styled(text, styles) if self.color else text

    def line(self, text: str = "", *styles: str) -> None:
        """A whole line of plain text (wrapped by words on a terminal)."""
        self._wrapped(text, styles, self.out)

    def _wrapped(self, text: str, styles: Sequence[str], stream: TextIO) -> None:
        """``text`` on ``stream`` as lines of its own, wrapped by words on a terminal."""
        if not self.terminal:
            stream.write(text + "\n")
        elif not text.strip():
            stream.write("\n" * (text.count("\n") + 1))  # blank lines stay blank
        else:
            wrapper = self._wrapper(styles=styles, write=stream.write)
            wrapper.feed(text)
            wrapper.end_line()
        stream.flush()

    def _wrapper(
        self,
        *,
        styles: Sequence[str] = (),
        actions: bool = False,
        column: int = 0,
        write: Callable[[str], object] | None = None,
    ) -> TextWrapper:
        return TextWrapper(
            write or self.out.write,
            self.width,
            color=self.color,
            styles=styles,
            actions=actions,
            column=column,
        )

    def _name(self, name: str, *, player: bool, suffix: str = "") -> str:
        color = speaker_color(name, player=player, cast=self.cast)
        return self.paint(name + suffix, "bold", color)

    # -- a turn --------------------------------------------------------------------

    def expect_reply(self, speaker: str | None, *, player: bool = False, note: str = "") -> None:
        """Who the next streamed text is from (a reply's header names them; ``note``
        follows the name, e.g. ``(continues)``)."""
        self._speaker = (speaker, player, note) if speaker else None

    def waiting(self, text: str) -> None:
        """What the turn is doing, beside a spinner (on a terminal; else nothing)."""
        if self.live:
            self._end_text()
            self._spinner.show(text)

    def done_waiting(self) -> None:
        """Erase the spinner, if one is shown."""
        self._spinner.hide()

    def on_event(self, kind: str, text: str) -> None:
        """A turn's event (:meth:`orchestrator.Engine.run`'s ``on_event``)."""
        if self.quiet:
            return
        if kind == "progress" or (kind == "status" and self.live):
            self.waiting(text)  # before the reply, or on a line of its own under it
            return
        waited = self._spinner.shown  # its line (and a ^C echoed on it) is erased
        self.done_waiting()
        if kind == "token":
            self._token(text)
        elif kind == "reasoning":
            self._reasoning(text)
        elif kind == "status":
            self._end_text()
            self.err_line(f"… {text}", "dim")
        elif kind == "warning":
            self._end_text(always=not waited)  # also past a ^C the terminal echoed
            self.err_line(f"warning: {text}", "yellow")
        self.out.flush()

    def _token(self, text: str) -> None:
        if not self.terminal:
            if self._thinking:
                self.out.write("\n")
                self._thinking = False
            self.out.write(text)
            self._raw_midline = not text.endswith("\n")
            return
        if self._thinking or self._text is None:
            self._end_text()
            self._thinking = False
            column = 0
            if self._speaker is not None:
                name, player, note = self._speaker
                header = self._name(name, player=player, suffix="" if note else ":")
                if note:
                    header += " " + self.paint(f"{note}:", "dim")
                self.out.write(header + " ")
                column = cell_len(name) + (cell_len(note) + 2 if note else 1) + 1
            self._text = self._wrapper(actions=True, column=column)
            self._leading = True
        self._feed(text)

    def _reasoning(self, text: str) -> None:
        if not self.terminal:
            if not self._thinking:
                self.out.write(self.paint("(thinking) ", "dim", "italic"))
                self._thinking = True
            self.out.write(text)
            self._raw_midline = not text.endswith("\n")
            return
        if not self._thinking:
            self._end_text()
            self.out.write(self.paint("thinking", "dim", "bold") + "\n")
            self._thinking = True
            self._text = self._wrapper(styles=("dim", "italic"))
            self._leading = True
        self._feed(text)

    def _feed(self, text: str) -> None:
        """Text for the reply or reasoning begun: what leads it blank left out."""
        if self._leading:
            text = text.lstrip()
            if not text:
                return
            self._leading = False
        assert self._text is not None
        self._text.feed(text)

    def _end_text(self, *, always: bool = False) -> None:
        """End the text being written on a line of its own."""
        if self._text is not None:
            self._text.end_line()
            self._text = None
        elif self._raw_midline or always:
            self.out.write("\n")
        self._raw_midline = False
        self.out.flush()

    def end_turn(self) -> None:
        """The turn is over (done, failed or interrupted): the spinner erased, the
        reply's last line ended."""
        self._ended_waiting = self._spinner.shown
        self.done_waiting()
        if not self.quiet:
            self._end_text()
        self._thinking = False

    def stopped(self, text: str) -> None:
        """Why the turn stopped, a line on stderr of its own: past the ``^C`` the
        terminal echoed (the spinner's line, erased with it, needs no line end)."""
        if not self._ended_waiting:
            self.err.write("\n")
        self.err_line(text, "yellow")

    def err_line(self, text: str, *styles: str) -> None:
        """A line on stderr, wrapped by words on a terminal."""
        self._wrapped(text, styles, self.err)

    def footer(self, parts: Sequence[tuple[str, str]]) -> None:
        """A footer line of ``(text, style)`` parts, `` · `` between them; wrapped
        between parts, never inside one, on a terminal."""
        if not self.terminal:
            self.out.write(" · ".join(text for text, _ in parts) + "\n")
            self.out.flush()
            return
        width = self.width()
        line, column = "", 0
        for text, part_style in parts:
            size = cell_len(text)
            if column and column + 3 + size > width:
                self.out.write(line + "\n")
                line, column = "", 0
            if column:
                line += self.paint(" · ", "dim")
                column += 3
            line += self.paint(text, part_style)
            column += size
        self.out.write(line + "\n")
        self.out.flush()

    # -- messages ------------------------------------------------------------------

    def message(
        self,
        view: NodeAmongSiblings,
        *,
        head_id: str | None = None,
        max_lines: int | None = None,
        details: bool = True,
    ) -> None:
        """One message: its speaker's name (or its role) and its text, wrapped, then a
        dim line: its place among alternatives (``reply 2/3``), its marks (incomplete,
        disabled, HEAD) and its short id; without ``details``, that line only when it
        has alternatives or a mark. ``max_lines`` shortens a long one, with a note that
        ``/log`` shows it whole."""
        node = view.node
        scene = render.scene_label(node)
        if scene is not None:  # narration, set apart: no speaker
            self.line(scene.text, *scene.styles)
            footer = footer_text(view, head_id=head_id)
            if details or len(footer) > 2 or len(view.siblings) > 1:
                self.footer(footer)
            return
        name = node.name or self.speakers.get(node.role) or node.role
        player = node.role == "user"
        text = cells.clean(node.content) or "(empty)"  # stored text: no escape reaches us
        if not self.terminal:
            if max_lines is not None:
                text = _shortened(text, max_lines * 80)
            self.out.write(f"{name}: {text}\n")
        else:
            buffer: list[str] = []
            wrapper = self._wrapper(
                actions=True,
                column=cell_len(name) + 2,
                styles=("dim", "strike") if not node.enabled else (),
                write=buffer.append,
            )
            wrapper.feed(text)
            wrapper.end_line()
            lines = "".join(buffer).split("\n")[:-1]
            if max_lines is not None and len(lines) > max_lines:
                hidden = len(lines) - (max_lines - 1)
                lines = [
                    *lines[: max_lines - 1],
                    self.paint(f"… {hidden} more lines (/log shows it whole)", "dim"),
                ]
            self.out.write(
                self._name(name, player=player, suffix=":") + " " + "\n".join(lines) + "\n"
            )
        footer = footer_text(view, head_id=head_id)
        if details or len(footer) > 2 or len(view.siblings) > 1:  # a mark, alternatives
            self.footer(footer)
        self.out.flush()

    def recap(self, page: ProjectionPage, *, hint: str) -> None:
        """The story so far as ``clotho play`` opens: its last messages (a long one
        shortened), how many came before, then ``hint`` (one line)."""
        if page.earlier:
            self.line(
                f"… {page.earlier:,} earlier message{'s' * (page.earlier != 1)} "
                "(/log N shows more)",
                "dim",
            )
        if not page.turns:
            self.line("A new story: say something to begin.", "dim")
        for number, view in enumerate(page.turns):
            last = number == len(page.turns) - 1
            if number and view.node.role == "user":
                self.out.write("\n")  # a turn: the player's message and its reply
            self.message(
                view,
                head_id=page.session.head_id,
                max_lines=RECAP_LINES,
                details=last,
            )
        self.line(hint, "dim")


def _shortened(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " … (/log shows it whole)"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
