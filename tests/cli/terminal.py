"""A player's terminal for the tests: ``clotho`` run in a real pseudo-terminal of a given
size, its output fed to a terminal emulator (pyte) so a test reads the display as a
player sees it, scrollback included.

The child is a session leader with the pseudo-terminal as its controlling terminal, so
the terminal's line discipline does what a real one does: Ctrl+C (``\\x03``) outside the
line editor is SIGINT to the program, and a resize is SIGWINCH.

    with Terminal(["play"], env, columns=80) as term:
        term.wait_prompt()
        term.send("I open the door")
        term.press("Enter")
        term.wait_prompt()
        term.display()  # every line, the scrollback first

A prompt is ready when prompt_toolkit turns bracketed paste on (:data:`PROMPT_READY`)
after the last line ended; a redraw of the same prompt (Ctrl+L, a resize) turns it on
again, so :meth:`press` waits for the program to settle before Enter, and
:meth:`resize` for both of prompt_toolkit's redraws.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import subprocess
import termios
import threading
import time
import unicodedata
from collections.abc import Mapping, Sequence
from types import TracebackType

import pyte
from pyte import modes as mo
from pyte.screens import Char
from wcwidth import wcwidth

from .test_cli import CLOTHO

__all__ = [
    "KEYS",
    "PROMPT_READY",
    "Terminal",
    "TerminalError",
    "control_characters",
    "displayed",
]

#: What prompt_toolkit writes when a prompt is ready for keys (bracketed paste on).
PROMPT_READY = b"\x1b[?2004h"

#: The bytes a key sends in an xterm.
KEYS: Mapping[str, bytes] = {
    "Enter": b"\r",
    "Alt+Enter": b"\x1b\r",
    "Escape": b"\x1b",
    "Tab": b"\t",
    "Backspace": b"\x7f",
    "Ctrl+A": b"\x01",
    "Ctrl+C": b"\x03",
    "Ctrl+D": b"\x04",
    "Ctrl+E": b"\x05",
    "Ctrl+L": b"\x0c",
    "Ctrl+U": b"\x15",
    "Up": b"\x1b[A",
    "Down": b"\x1b[B",
    "Right": b"\x1b[C",
    "Left": b"\x1b[D",
    "Home": b"\x1b[H",
    "End": b"\x1b[F",
}


class TerminalError(AssertionError):
    """What was waited for did not come (the message holds the display)."""


def control_characters(text: str) -> list[str]:
    """The control characters in a text (C0 but tab and newline, DEL, C1), and caret
    notations of escape sequences (``^[[A``, ``^L``) that a terminal echoed."""
    found = [
        repr(char) for char in text if unicodedata.category(char) == "Cc" and char not in "\t\n"
    ]
    for caret in ("^[", "^L", "^C", "^D", "^?", "^@"):
        if caret in text:
            found.append(caret)
    return found


class Terminal:
    """``clotho ARGS`` in a pseudo-terminal of ``columns`` x ``rows``, displayed by pyte."""

    def __init__(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        *,
        columns: int = 80,
        rows: int = 24,
        history: int = 20000,
    ) -> None:
        self._lock = threading.Condition()
        self._raw = bytearray()
        self._ended = False
        self.screen = _Screen(columns, rows, history=history, ratio=0.5)
        self._stream = pyte.ByteStream(self.screen)
        self._typed_from = 0  # where the output after the player's last Enter begins
        self._last_output = time.monotonic()
        master, slave = pty.openpty()
        self._set_size(slave, columns, rows)
        environment = {
            **env,
            "TERM": "xterm-256color",
            "PROMPT_TOOLKIT_NO_CPR": "1",
        }
        environment.pop("COLUMNS", None)  # the program reads the terminal's size, as a
        environment.pop("LINES", None)  # player's does
        self.process = subprocess.Popen(
            [CLOTHO, *args],
            env=environment,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            close_fds=True,
            start_new_session=True,
            preexec_fn=_take_terminal,  # an ioctl in the child, before exec
        )
        os.close(slave)
        self.master = master
        self._reader = threading.Thread(target=self._read, name="terminal-reader", daemon=True)
        self._reader.start()

    # -- the child's output --------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the program ended (EIO) or the master was closed
                chunk = b""
            with self._lock:
                if not chunk:
                    self._ended = True
                    self._lock.notify_all()
                    return
                self._raw += chunk
                self._last_output = time.monotonic()
                self._stream.feed(chunk)
                self._lock.notify_all()

    def raw(self) -> str:
        """Everything the program wrote, escape sequences included."""
        with self._lock:
            return self._raw.decode(errors="replace")

    def display(self) -> list[str]:
        """The lines a player can see or scroll back to, the scrollback first, trailing
        blanks removed (a wide character once, not its two cells)."""
        with self._lock:
            lines = [_render(line, self.screen.columns) for line in self._lines()]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def wrapped(self) -> list[int]:
        """The indexes in :meth:`display` of the lines the terminal wrapped itself: the
        program wrote past the right edge there, so the line goes on in the next one
        (where a word can be cut in two)."""
        with self._lock:
            return [i for i, line in enumerate(self._lines()) if getattr(line, _WRAPPED, False)]

    def text(self) -> str:
        """:meth:`display` as one text."""
        return "\n".join(self.display())

    def _lines(self) -> list[Mapping[int, Char]]:
        screen = self.screen
        return [*screen.history.top, *(screen.buffer[y] for y in range(screen.lines))]

    def wait_for(self, text: str, timeout: float = 30, *, raw: bool = False) -> None:
        """Until ``text`` is on the display (or, ``raw``, in what the program wrote)."""
        self._wait(lambda: text in (self.raw() if raw else self.text()), timeout, text)

    def wait_prompt(self, timeout: float = 60) -> None:
        """Until the line editor asks for a line, after the last line ended (Enter,
        Ctrl+C, Ctrl+D; at once if it already did)."""
        self._wait(
            lambda: self._raw.find(PROMPT_READY, self._typed_from) >= 0, timeout, "the prompt"
        )

    def wait_exit(self, timeout: float = 30) -> int:
        """The program's exit code, once it ended."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TerminalError(f"the program did not end:\n{self.text()}") from None
        self._reader.join(timeout=10)
        return code

    def _wait(self, ready: object, timeout: float, what: str) -> None:
        assert callable(ready)
        deadline = time.monotonic() + timeout
        with self._lock:
            while not ready():
                left = deadline - time.monotonic()
                if left <= 0 or self._ended:
                    why = "the program ended" if self._ended else f"{timeout} s passed"
                    raise TerminalError(
                        f"waited for {what!r}, {why}; the display:\n{self.text()[-3000:]}"
                    )
                self._lock.wait(min(left, 0.5))

    # -- the player's keys -----------------------------------------------------------

    def send(self, text: str) -> None:
        """Type ``text`` (a piece at a time, as a fast typist or a paste would)."""
        data = text.encode()
        for start in range(0, len(data), 256):
            self._write(data[start : start + 256])

    def press(self, key: str) -> None:
        """Press a key by name (:data:`KEYS`). After Enter, Ctrl+C or Ctrl+D, which end
        a line, :meth:`wait_prompt` waits for the next prompt; Enter first waits until
        the program has shown what was typed (so that all it writes next comes after).
        Ctrl+L waits for the line editor to have cleared the screen and drawn its prompt
        again."""
        if key == "Enter":
            self.settle()
        with self._lock:
            pressed_at = len(self._raw)
            if key in ("Enter", "Ctrl+C", "Ctrl+D"):
                self._typed_from = pressed_at
        self._write(KEYS[key])
        if key == "Ctrl+L":

            def redrawn() -> bool:
                cleared = self._raw.find(b"\x1b[2J", pressed_at)
                return cleared >= 0 and self._raw.find(PROMPT_READY, cleared) >= 0

            self._wait(redrawn, 30, "the screen cleared and the prompt drawn again")

    def settle(self, quiet: float = 0.1, timeout: float = 10) -> None:
        """Until the program has written nothing for ``quiet`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                silent = time.monotonic() - self._last_output
            if silent >= quiet or self._ended:
                return
            if time.monotonic() > deadline:
                raise TerminalError(f"the program kept writing for {timeout} s:\n{self.text()}")
            time.sleep(quiet - silent)

    def line(self, text: str) -> None:
        """Type a line and press Enter, once the prompt is there."""
        self.wait_prompt()
        self.send(text)
        self.press("Enter")

    def page_through(self, timeout: float = 60) -> bool:
        """Until the next prompt (or the program's end); if a pager (less) shows a page
        and waits meanwhile, read to its end a page at a time (Space) and leave it (q),
        as a player does. Whether a pager showed."""
        deadline = time.monotonic() + timeout
        paged = False
        while time.monotonic() < deadline:
            self.settle()
            with self._lock:
                if self._ended or self._raw.find(PROMPT_READY, self._typed_from) >= 0:
                    return paged
                last = _render(self.screen.buffer[self.screen.cursor.y], self.screen.columns)
                if last.strip() == "(END)":
                    self._typed_from = len(self._raw)
            if last.strip() == "(END)":
                self._write(b"q")
                return True
            if last.strip() == ":":
                paged = True
                self._write(b" ")
            else:
                time.sleep(0.05)
        raise TerminalError(f"no prompt came back in {timeout} s:\n{self.text()}")

    def _write(self, data: bytes) -> None:
        while data:
            data = data[os.write(self.master, data) :]

    # -- the window ------------------------------------------------------------------

    def resize(self, columns: int, rows: int) -> None:
        """The window resized, as a terminal does it: fewer rows push the top ones into
        the scrollback as far as the cursor's row needs (the rest go from the bottom),
        fewer columns cut the lines; the program gets SIGWINCH (the kernel sends it
        to the terminal's foreground group on the size's change). Returns once the
        program has redrawn what it redraws."""
        with self._lock:
            screen = self.screen
            dropped = max(0, screen.cursor.y + 1 - rows)
            kept = [screen.buffer[y] for y in range(screen.lines)]
            screen.history.top.extend(kept[:dropped])
            screen.buffer.clear()
            for y, line in enumerate(kept[dropped : dropped + rows]):
                screen.buffer[y] = line
            screen.cursor.y -= dropped
            screen.lines = min(screen.lines, rows)  # the rows are gone: resize cuts no more
            screen.resize(rows, columns)
        self._set_size(self.master, columns, rows)
        # prompt_toolkit redraws on SIGWINCH, and again when it polls the size (every
        # half second): both before the next key, or a redraw reads as the next prompt
        self.settle(quiet=0.7)

    @staticmethod
    def _set_size(fd: int, columns: int, rows: int) -> None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))

    # -- the end ---------------------------------------------------------------------

    def close(self) -> None:
        """End the program if it still runs (its whole process group) and the terminal."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        with contextlib.suppress(OSError):  # closed already
            os.close(self.master)
        self._reader.join(timeout=10)

    def __enter__(self) -> Terminal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def displayed(written: str, columns: int, rows: int = 24) -> tuple[list[str], list[int]]:
    """What a terminal of ``columns`` x ``rows`` shows of ``written`` (a program's
    output): the lines as :meth:`Terminal.display` gives them, and the indexes of those
    it wrapped at its edge (:meth:`Terminal.wrapped`)."""
    screen = _Screen(columns, rows, history=10000)
    pyte.Stream(screen).feed(written.replace("\n", "\r\n"))
    lines = [*screen.history.top, *(screen.buffer[y] for y in range(screen.lines))]
    shown = [_render(line, columns) for line in lines]
    while shown and not shown[-1]:
        shown.pop()
    return shown, [i for i, line in enumerate(lines) if getattr(line, _WRAPPED, False)]


def _take_terminal() -> None:
    """In the child, before exec: the pseudo-terminal (its stdin) becomes its
    controlling terminal, as a shell gives one to a program it runs."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


#: The attribute of a line of pyte's buffer that the terminal wrapped at its edge.
_WRAPPED = "wrapped_at_edge"


class _Screen(pyte.HistoryScreen):
    """pyte's screen, which also marks the lines it wraps itself (auto-wrap: a
    character written past the last column goes on the next line), until they are
    erased."""

    _drawing = False

    def draw(self, data: str) -> None:
        self._drawing = True
        try:
            if data.isascii():
                super().draw(data)
                return
            start = 0  # a wide character with one column left goes on the next line, as
            for index, char in enumerate(data):  # in xterm (pyte would put it in the last)
                if wcwidth(char) == 2:
                    super().draw(data[start:index])
                    start = index
                    if self.cursor.x == self.columns - 1 and mo.DECAWM in self.mode:
                        self.buffer[self.cursor.y].__dict__[_WRAPPED] = True
                        super().carriage_return()
                        self.linefeed()
            super().draw(data[start:])
        finally:
            self._drawing = False

    def carriage_return(self) -> None:
        if self._drawing:  # only auto-wrap returns the carriage while drawing
            self.buffer[self.cursor.y].__dict__[_WRAPPED] = True
        super().carriage_return()

    def erase_in_line(self, how: int = 0, private: bool = False) -> None:
        if how in (0, 2):
            self.buffer[self.cursor.y].__dict__.pop(_WRAPPED, None)
        super().erase_in_line(how, private)

    def erase_in_display(self, how: int = 0, *args: object, **kwargs: object) -> None:
        if how in (0, 2, 3):
            start = self.cursor.y if how == 0 else 0
            for y in range(start, self.lines):
                self.buffer[y].__dict__.pop(_WRAPPED, None)
        super().erase_in_display(how, *args, **kwargs)


def _render(line: Mapping[int, Char], columns: int) -> str:
    """One line of pyte's buffer as text, trailing blanks removed: a wide character
    once, not its stub cell."""
    cells: list[str] = []
    skip = False
    for x in range(columns):
        if skip:
            skip = False
            continue
        char = line[x].data if x in line else " "
        skip = bool(char) and wcwidth(char[0]) == 2
        cells.append(char)
    return "".join(cells).rstrip()
