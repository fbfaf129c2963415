"""What an entry scans in one loop: SillyTavern's ``buffer.get()``, kept in pieces.

SillyTavern joins the newest messages (newest first), the character texts the entry
scans, and the recursion buffer into one string, ``\\x01`` before each part and a
newline between them. Here the parts stay apart: the key ids found in each piece
(a message, a character text, one activated entry's content in the recursion
buffer) come from a cache, their union says which plain keys are present, and the
joined text is only built for the rare keys that need it. A haystack grows as
recursion adds to the buffer; what was found in it stays found.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from ._jsregex import RegexKey

__all__ = ["Haystack", "Label", "Piece"]

Label = tuple[str, Any]
"""``("message", index)``, ``("field", name)`` or ``("recursion", entry id)``."""
Piece = tuple[str, str, Label, frozenset[int]]
"""(prefix, text, label, key ids found in the text)."""
FOUND_ELSEWHERE = -1
"""A regex matched, at a place only the joined text can tell."""


class Haystack:
    """One haystack, built part by part (see :meth:`add`).

    Args:
        empty: SillyTavern's empty haystack (a scan depth of 0): nothing but regexes
            that match the empty string can match it.
    """

    __slots__ = (
        "_lower",
        "_starts",
        "_text",
        "empty",
        "kids",
        "parts",
        "pieces",
        "present",
        "regex",
        "rounds",
        "seg_pieces",
    )

    def __init__(self, empty: bool = False) -> None:
        self.empty = empty
        self.parts: list[str] = []
        self.seg_pieces: list[int] = []
        """The index of each part's first piece."""
        self.pieces: list[Piece] = []
        self.present: dict[int, int] = {}
        """Key id -> the first piece holding it."""
        self.kids: list[int] = []
        """The key ids of :attr:`present`, in the order they appeared."""
        self.regex: dict[int, tuple[int, int | None]] = {}
        """id(regex) -> (units already searched, where it matched or None)."""
        self.rounds = 0
        """How many parts of the recursion buffer are in."""
        self._text: str | None = None
        self._lower: str | None = None
        self._starts: list[int] | None = None

    def add(self, text: str, pieces: list[Piece]) -> None:
        """Append a part (its text joins its pieces' texts with newlines)."""
        self.seg_pieces.append(len(self.pieces))
        self.parts.append(text)
        present = self.present
        kids = self.kids
        for number, piece in enumerate(pieces, len(self.pieces)):
            for kid in piece[3]:
                if kid not in present:
                    present[kid] = number
                    kids.append(kid)
        self.pieces.extend(pieces)
        self._text = self._lower = None
        self._starts = None

    @property
    def text(self) -> str:
        """The haystack as SillyTavern joins it."""
        if self._text is None:
            self._text = "" if self.empty else "\x01" + "\n\x01".join(self.parts)
        return self._text

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.text.lower()
        return self._lower

    def piece_at(self, offset: int) -> int:
        """The piece holding a position of :attr:`text`."""
        if self._starts is None:
            starts: list[int] = []
            position = 1
            for piece in self.pieces:
                if piece[0] and starts:
                    position += 1  # the "\x01" after the newline that ends a part
                starts.append(position)
                position += len(piece[1]) + 1
            self._starts = starts
        return max(bisect.bisect_right(self._starts, offset) - 1, 0)

    def _part_has(self, number: int, kid: int) -> bool:
        end = self.seg_pieces[number + 1] if number + 1 < len(self.seg_pieces) else None
        return any(kid in piece[3] for piece in self.pieces[self.seg_pieces[number] : end])

    def find_regex(
        self, regex: RegexKey, literal: int, test: Callable[[RegexKey, str], bool]
    ) -> int | None:
        """Where a regex key matches: a piece, :data:`FOUND_ELSEWHERE`, or None.

        Args:
            regex: the key.
            literal: the id of its literal (-1: none); pieces without it are skipped.
            test: runs a regex on a text (and may cache the answer).
        """
        if self.empty:
            return FOUND_ELSEWHERE if test(regex, "") else None
        done, found = self.regex.get(id(regex), (0, None))
        if found is not None and regex.local:
            return found  # a piece, once matched, stays matched as the haystack grows
        if regex.local == 1:
            pieces = self.pieces
            for number in range(done, len(pieces)):
                prefix, text, _, hits = pieces[number]
                if (literal < 0 or literal in hits) and test(regex, prefix + text):
                    found = number
                    break
            done = len(pieces)
        elif regex.local == 2:
            parts, last = self.parts, len(self.parts) - 1
            for number in range(done, len(parts)):
                if literal >= 0 and not self._part_has(number, literal):
                    continue
                if test(regex, parts[number] + ("\n" if number < last else "")):
                    found = FOUND_ELSEWHERE
                    break
            done = last  # the last part is searched again once it is followed by another
        else:  # anchors or look-around: a longer text can stop matching, so search again
            text = self.text
            if done != len(text):
                found = None
                if literal < 0 or literal in self.present:
                    found = FOUND_ELSEWHERE if regex.test(text) else None
            done = len(text)
        self.regex[id(regex)] = (done, found)
        return found
