"""Text measured in terminal cells: a CJK character or an emoji takes two, a combining
accent none (``rich.cells``, the measure the rest of the CLI uses).

- :func:`clean`: a stored text made safe to print (no control characters, tabs as
  spaces): a message may hold anything, and an escape sequence must not reach the
  terminal as one.
- :func:`wrap`: word wrapping to a width in cells; a word is cut only when it alone is
  wider than the line, and a run of CJK breaks between its characters (never before a
  closing mark such as ``。`` or ``」``).
- :func:`clip`: one line cut to a width with ``…``.

Plain ASCII, nearly every line of most stories, is measured by its length: the log of
a long story wraps every line it prints.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import sys
from typing import TextIO

from rich.cells import cell_len, chop_cells

from .style import paint

__all__ = [
    "CLOSING_MARKS",
    "MIN_WIDTH",
    "OPENING_MARKS",
    "cell_len",
    "clean",
    "clip",
    "terminal_size",
    "terminal_width",
    "wrap",
    "wrap_line",
]

# Characters a line may break before and after (East Asian wide: CJK ideographs,
# kana, hangul, CJK punctuation, fullwidth forms).
_WIDE = (
    "\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6"
    "\U00020000-\U0003fffd"
)
#: What never starts a line: closing marks, small kana, the prolonged sound mark, and
#: ASCII punctuation right after a wide character (the streaming writer,
#: :mod:`clotho.cli.streamtext`, keeps to the same two sets).
CLOSING_MARKS = (
    "、。，．：；？！）」』】〉》〕｝〗〙〛ー…‥・ゝゞ々”’～"
    "ぁぃぅぇぉっゃゅょゎァィゥェォッャュョヮヵヶ"
    ".,:;?!)]}'\""
)
#: What never ends a line: opening marks.
OPENING_MARKS = "（「『【〈《〔｛〖〘〚“‘("
_CLOSING = re.escape(CLOSING_MARKS)
_OPENING = re.escape(OPENING_MARKS)
_PARTS = re.compile(f"[{_OPENING}]*[{_WIDE}][{_CLOSING}]*|[^{_WIDE}]+[{_CLOSING}]*")
# An escape sequence (CSI or OSC) whole, else any control character but the line end.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_ANY_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # a quick look first
_BLANK_RUN = re.compile(r"\n{3,}")


def clean(text: str) -> str:
    """``text`` safe to print: line ends as ``\\n``, tabs as spaces, other control
    characters (escape sequences' start among them) left out, at most one blank line
    in a row, no blank lines around it."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\t" in text:
        text = text.expandtabs(4)
    if _ANY_CONTROL.search(text):
        text = _CONTROL.sub("", text)
    if "\n\n\n" in text:
        text = _BLANK_RUN.sub("\n\n", text)
    return text.strip("\n")


def _width(text: str) -> int:
    return len(text) if text.isascii() else cell_len(text)


def clip(text: str, width: int) -> str:
    """``text`` (one line) cut to ``width`` cells, ending with ``…`` when cut."""
    if _width(text) <= width:
        return text
    if width <= 1:
        return "…"[:width]
    return chop_cells(text[: width * 4], width - 1)[0] + "…"


def wrap(text: str, width: int) -> list[str]:
    """``text``'s lines word-wrapped to ``width`` cells (at least 1).

    A line that fits is kept as it is (its spaces too); a longer one is broken between
    words (runs of spaces collapse), and inside a CJK run between characters. A word
    wider than the line alone is cut at the width. Blank lines stay blank lines.
    ``text`` should be :func:`clean` already.
    """
    width = max(width, 1)
    lines: list[str] = []
    for source in text.split("\n"):
        source = source.rstrip()
        if source.isascii():
            if len(source) <= width:
                lines.append(source)
            else:  # one character a cell: a regular expression finds the breaks
                lines.extend(_ascii_lines(width).findall(" ".join(source.split())))
        elif cell_len(source) <= width:
            lines.append(source)
        else:
            _reflow(source, width, lines)
    return lines


@functools.lru_cache(maxsize=8)
def _ascii_lines(width: int) -> re.Pattern[str]:
    """The lines of an ASCII text (single spaces) wrapped to ``width``: as many words
    as fit, or a word wider than the line cut at the width."""
    return re.compile(f"\\S.{{0,{width - 1}}}(?= |$)|\\S{{{width}}}")


def _reflow(source: str, width: int, lines: list[str]) -> None:
    """One line too long for ``width``, broken into ``lines``."""
    parts: list[str] = []
    used = 0
    for word in source.split():
        gap = 1 if used else 0  # a space before a word, not inside one
        for piece in (word,) if word.isascii() else _PARTS.findall(word):
            size = _width(piece)
            if used + gap + size <= width:
                if gap:
                    parts.append(" ")
                parts.append(piece)
                used += gap + size
            else:
                if used:
                    lines.append("".join(parts))
                if size > width:  # a word wider than the line: cut at the width
                    *whole, piece = chop_cells(piece, width)
                    lines.extend(whole)
                    size = _width(piece)
                parts, used = [piece], size
            gap = 0
    if parts:
        lines.append("".join(parts))


#: Narrower than this, a line is wrapped as if it were this wide (lines then overflow
#: rather than vanish).
MIN_WIDTH = 20


def terminal_size() -> os.terminal_size:
    """The terminal's columns and lines (``COLUMNS``/``LINES`` first; off a terminal,
    80 x 24): the size a log or a tree is drawn to, on a terminal or not."""
    return shutil.get_terminal_size()


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width of the terminal ``stream`` (default stdout) writes to, now (it may
    have changed since the last line), or ``None`` when it is no terminal (a pipe, a
    file: lines are written whole)."""
    stream = stream or sys.stdout
    if not stream.isatty():
        return None
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):  # a stream with no descriptor of its own (a test's)
        return shutil.get_terminal_size().columns


def wrap_line(
    text: str,
    width: int | None,
    *,
    lead: str = "",
    indent: int | None = None,
    styles: tuple[str, ...] = (),
) -> list[str]:
    """``lead`` (styled already) then ``text`` in ``styles``, word-wrapped to ``width``
    cells (:func:`clotho.cli.cells.wrap`: a word is cut only when wider than the line,
    CJK and emoji by their cells), each continuation line indented by ``indent`` cells
    (default: the lead's width). ``width`` ``None`` (not a terminal): one line, the
    text as it is."""
    if width is None:
        return [lead + paint(text, *styles)]
    lead_cells = cell_len(clean(lead))  # the lead's escape sequences left out
    indent = lead_cells if indent is None else indent
    room = max(width, MIN_WIDTH) - max(lead_cells, indent)
    if room < MIN_WIDTH // 2:  # a lead too wide for the line: the text under it
        return [lead, *(paint(piece, *styles) for piece in wrap(clean(text), width))]
    pieces = wrap(clean(text), room) or [""]
    return [lead + paint(pieces[0], *styles)] + [
        " " * indent + paint(piece, *styles) for piece in pieces[1:]
    ]
