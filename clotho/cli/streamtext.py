"""Text written as it streams, word-wrapped to a terminal's width in cells.

:class:`TextWrapper` takes a model's reply in chunks of any size and writes it at once,
holding back only the word not yet ended (a chunk may end inside a word). The width is
read before each word is placed, so a resize changes what follows. Widths are cells
(``rich.cells``: a CJK character or an emoji takes two, a joined emoji sequence is
measured whole); a CJK run breaks between its characters, never before a closing mark
nor after an opening one; a word is cut only when it alone is wider than the line.
``*actions*`` can be set in italics, also when a ``*`` and its closing one come in
different chunks. :func:`clotho.cli.cells.wrap` wraps a whole text the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from rich.cells import cell_len, split_graphemes
from rich.style import Style

from .cells import CLOSING_MARKS, OPENING_MARKS

__all__ = ["TextWrapper", "styled"]

#: Punctuation that never starts a line: it stays with the character before it.
_NO_BREAK_BEFORE = frozenset(CLOSING_MARKS)
#: Opening marks that never end a line: the character after them stays with them.
_NO_BREAK_AFTER = frozenset(OPENING_MARKS)
_ZERO_WIDTH_JOINER = "\u200d"


def styled(text: str, styles: Sequence[str]) -> str:
    """``text`` in Rich styles (``"bold cyan"``, ``"italic"``...), as escape sequences."""
    if not styles or not text:
        return text
    return Style.parse(" ".join(styles)).render(text)


class TextWrapper:
    """Writes text word-wrapped to a width read before each word, as it comes.

    ``feed`` takes text in chunks of any size (a word may span chunks: it is held until
    the whitespace after it, or :meth:`flush`); control characters other than the line
    end are left out (a model's text never moves the cursor); ``styles`` are applied to
    all of it (Rich style names: ``"dim"``, ``"italic"``...) when ``color``; with
    ``actions``, text between ``*`` is in italics as well (the stars kept). A newline in
    the text ends the line (and any open ``*action*``).
    """

    def __init__(
        self,
        write: Callable[[str], object],
        width: Callable[[], int],
        *,
        color: bool,
        styles: Sequence[str] = (),
        actions: bool = False,
        column: int = 0,
    ) -> None:
        self._write = write
        self._width = width
        self.color = color
        self.styles = tuple(styles)
        self.actions = actions
        #: The cells written on the current line.
        self.column = column
        self._word: list[tuple[str, bool]] = []  # (grapheme or piece, in an action)
        self._spaces = 0
        self._italic = False
        self._joined = False  # the last character was a zero width joiner
        self._last_wide = False  # the last character held takes two cells
        self._opening = False  # the last character held is an opening mark
        self._soft = False  # the current line began by wrapping (no indent kept)

    def feed(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self._place()
                self._newline(soft=False)
                self._italic = False
            elif char in " \t":
                self._place()
                self._spaces += 1
            elif char < " " or "\x7f" <= char <= "\x9f":
                continue  # a control character (an escape's start...): never sent as is
            elif self.actions and char == "*":
                if not self._italic:
                    self._italic = True
                    self._add(char)
                else:
                    self._add(char)
                    self._italic = False
            else:
                self._add(char)

    def end_line(self) -> None:
        """Flush, and end the current line if anything is on it."""
        self._place()
        if self.column > 0:
            self._newline(soft=False)
        self._spaces = 0

    def _add(self, char: str) -> None:
        size = cell_len(char)
        if size == 0 or self._joined or self._opening or char in _NO_BREAK_BEFORE:
            # joins what is held: a combining mark, a joined emoji, closing punctuation
            if self._word:
                text, italic = self._word[-1]
                self._word[-1] = (text + char, italic)
            else:
                self._word.append((char, self._italic))
        else:
            wide = size > 1
            if self._word and (wide or self._last_wide):
                self._place()  # a break between CJK characters (or around one)
            self._word.append((char, self._italic))
            self._last_wide = wide
        self._joined = char == _ZERO_WIDTH_JOINER
        self._opening = char in _NO_BREAK_AFTER

    def _newline(self, *, soft: bool) -> None:
        self._write("\n")
        self.column = 0
        self._soft = soft

    def _place(self) -> None:
        """Write the word held, on this line if it fits, else on the next one."""
        word, self._word = self._word, []
        if not word:
            return
        spaces = self._spaces
        self._spaces = 0
        if self.column == 0 and self._soft:
            spaces = 0  # a wrapped line starts with the word
        width = max(self._width(), 1)
        size = sum(cell_len(piece) for piece, _ in word)
        if self.column + spaces + size > width and self.column > 0:
            self._newline(soft=True)
            spaces = 0
        if spaces and self.column + spaces + size <= width:
            self._write(" " * spaces)
            self.column += spaces
        if self.column + size <= width:
            self._styled(word)
            self.column += size
            return
        # wider than the line: cut it by cells, a grapheme at a time
        for piece, italic in word:
            spans, _ = split_graphemes(piece)
            for start, end, size in spans:
                if self.column + size > width and self.column > 0:
                    self._newline(soft=True)
                self._styled([(piece[start:end], italic)])
                self.column += size

    def _styled(self, pieces: Iterable[tuple[str, bool]]) -> None:
        if not self.color:
            self._write("".join(piece for piece, _ in pieces))
            return
        run: list[str] = []
        current: bool | None = None
        for piece, italic in pieces:
            if current is not None and italic != current:
                self._write(self._paint("".join(run), current))
                run = []
            current = italic
            run.append(piece)
        if current is not None:
            self._write(self._paint("".join(run), current))

    def _paint(self, text: str, italic: bool) -> str:
        return styled(text, [*self.styles, *(["italic"] if italic else [])])
