"""Terminal output: styled lines written straight to stdout.

Rich would parse markup and measure every line; for a log of thousands of messages
that costs more than everything else the command does, so the hot commands write
plain lines with ANSI styles when stdout is a terminal (and ``NO_COLOR`` is unset).
"""

from __future__ import annotations

import os
import sys

__all__ = ["out", "paint"]

_CODES = {
    "bold": "1",
    "dim": "2",
    "italic": "3",
    "strike": "9",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}


def _color_wanted() -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR") or os.environ.get("CLICOLOR_FORCE"):
        return True
    return sys.stdout.isatty() and os.environ.get("TERM") != "dumb"


COLOR = _color_wanted()


def paint(text: str, *styles: str) -> str:
    """``text`` in the given styles (``"bold"``, ``"cyan"``...), if colour is on."""
    if not COLOR or not styles:
        return text
    return f"\x1b[{';'.join(_CODES[s] for s in styles)}m{text}\x1b[0m"


def out(*lines: str) -> None:
    """Write lines to stdout."""
    sys.stdout.write("".join(line + "\n" for line in lines))
