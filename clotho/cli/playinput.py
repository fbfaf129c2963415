"""The player's lines in ``clotho play``: prompt_toolkit on a terminal, stdin otherwise.

On a terminal a line of any length is read whole and keys such as Ctrl+L are handled,
not typed into the text; piped input is read line by line, with control characters
other than tab and newline removed.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from clotho.errors import UsageError

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

__all__ = ["CANONICAL_LIMIT", "LineReader", "clean_line"]


#: C0 control characters but tab and newline, and DEL: never part of what the player says.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: The longest line a terminal in canonical mode hands over (Linux: 4095 bytes and the
#: newline); reading there, a longer line arrives cut, so one that long is refused.
CANONICAL_LIMIT = 4095


def clean_line(text: str) -> str:
    """The player's line without control characters (tab and newline kept)."""
    return _CONTROLS.sub("", text)


class LineReader:
    """The player's lines: a prompt_toolkit session on a terminal (no length limit, its
    own handling of keys), else lines of stdin (piped input, tests).

    :meth:`read` raises ``EOFError`` at the end (Ctrl+D) and ``KeyboardInterrupt`` for
    Ctrl+C while typing, with either. ``draft`` (an impersonation's line) is the next
    line's text to edit, on a terminal.
    """

    def __init__(self, session: PromptSession[str] | None = None) -> None:
        if session is None and sys.stdin.isatty() and sys.stdout.isatty():
            from prompt_toolkit import PromptSession

            session = PromptSession()
        self.session = session
        self.draft = ""

    def read(self, prompt: str) -> str:
        """One line, cleaned (:func:`clean_line`).

        Raises:
            UsageError: a line read from a terminal in canonical mode reached its limit
                (the rest was cut off by the terminal).
        """
        if self.session is not None:
            from prompt_toolkit.formatted_text import ANSI

            draft, self.draft = self.draft, ""
            return clean_line(self.session.prompt(ANSI(prompt), default=draft))
        line = input(prompt)
        if sys.stdin.isatty() and len(line.encode()) >= CANONICAL_LIMIT - 1:
            raise UsageError(
                f"that line reached the terminal's limit of {CANONICAL_LIMIT} bytes and may "
                "have been cut: not sent (play reads whole lines of any length when both "
                "stdin and stdout are a terminal)"
            )
        return clean_line(line)
