"""Regex keys: ``/pattern/flags`` read as SillyTavern reads them, run by ``regex``.

SillyTavern (``parseRegexFromString`` in world-info.js) takes a key for a regular
expression when it matches ``^/([\\w\\W]+?)/([gimsuy]*)$`` and its pattern holds no
unescaped ``/``; it then unescapes the *first* ``\\/`` only and builds a JavaScript
``RegExp``. If that throws, the key is no regex at all and is matched as plain text.

JavaScript and Python regexes differ in places a lorebook can hit, so the pattern is
translated rather than passed through: ``\\d \\w \\s \\b`` and their negations take
JavaScript's meaning (ASCII word characters, JavaScript's whitespace), ``.`` does not
match ``\\r`` or the Unicode line separators, ``$`` is the end of the text (not before
a final newline), ``[^]`` is any character and ``[]`` none, ``(?<name>...)`` and
``\\k<name>`` become Python's, identity escapes (``\\e`` = ``e``) stay literal, and
flags map to regex flags (``g`` changes nothing for a test, ``y`` anchors at the
start). The translation is compiled by the ``regex`` module (mrab-regex) in its
``VERSION0`` mode, which reads a pattern as ``re`` does but also takes variable-width
look-behind and, with the ``u`` flag, ``\\p{...}`` property escapes, as JavaScript
does. A property name ``regex`` does not know makes the key fail to compile (the
caller reports it); ``regex`` knows a few names JavaScript refuses (``\\p{IsLatin}``),
which then work here and are plain text in SillyTavern.

``regex`` also bounds a match: :class:`RegexClock` gives each match of one scan a
timeout and the scan a budget for all of them (:data:`MATCH_TIMEOUT_S`,
:data:`SCAN_BUDGET_S`), and matches release the GIL (``concurrent=True``), so a key with
catastrophic backtracking (``/(a|a)*$/`` on a long run of ``a``) costs a turn a
bounded time and never stalls the other threads of a server.

While translating, the longest run of literal ASCII word characters that every match
must contain is noted (:attr:`RegexKey.literal`), so that a regex only runs when its
literal is in the text.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import regex

__all__ = [
    "JS_SPACE",
    "MATCH_TIMEOUT_S",
    "SCAN_BUDGET_S",
    "RegexClock",
    "RegexKey",
    "RegexProblem",
    "js_trim",
    "parse_regex_key",
]

MATCH_TIMEOUT_S = 0.02
"""The longest one match of a regex key may take in a scan. A match runs on one message
or on the few newest messages joined; an ordinary key does that in well under a
millisecond, so only catastrophic backtracking reaches this. A key that does is skipped
for the rest of the scan, and the entry's miss says so."""
SCAN_BUDGET_S = 0.25
"""The time all regex keys of one scan may take together: a handful of keys that each
stop just short of :data:`MATCH_TIMEOUT_S` still cost a turn no more than this, which
is small beside the model's reply and keeps ``clotho lore test`` interactive. Once it
is spent, the keys not yet tried are skipped for the scan."""

#: JavaScript's ``\s`` (and the characters ``String.prototype.trim`` removes).
JS_SPACE = (
    "\t\n\v\f\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
_SPACE_CLASS = "".join(f"\\u{ord(char):04x}" for char in JS_SPACE)
_WORD = "A-Za-z0-9_"
_LINE_END = r"\n\r\u2028\u2029"
_KEY_FORM = re.compile(r"\A/([\s\S]+?)/([gimsuy]*)\Z")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_MODIFIERS = re.compile(r"([ims]*)(?:-([ims]+))?:")
_GROUP_NAME = re.compile(r"([A-Za-z_$][\w$]*)>")
_ASCII_RUN = re.compile(r"[A-Za-z0-9_]+")
_ESCAPE_CLASSES = {
    "d": ("[0-9]", "0-9"),
    "D": ("[^0-9]", None),
    "w": (f"[{_WORD}]", _WORD),
    "W": (f"[^{_WORD}]", None),
    "s": (f"[{_SPACE_CLASS}]", _SPACE_CLASS),
    "S": (f"[^{_SPACE_CLASS}]", None),
}
_BOUNDARY = r"(?a:\b)"
_NOT_BOUNDARY = r"(?a:\B)"
_CONTROL = {"n": "\\n", "r": "\\r", "t": "\\t", "f": "\\f", "v": "\\v"}
_PY_FLAGS = {"i": regex.IGNORECASE, "m": 0, "s": regex.DOTALL}
_PROPERTY = re.compile(r"\{([A-Za-z_]+(?:=[A-Za-z0-9_]+)?)\}")
"""What follows ``\\p`` in JavaScript (``{Name}`` or ``{Name=Value}``)."""
_CLOCK: ContextVar[RegexClock | None] = ContextVar("regex_clock", default=None)


def js_trim(text: str) -> str:
    """``text.trim()`` as JavaScript does it."""
    return text.strip(JS_SPACE)


@dataclass(frozen=True)
class RegexKey:
    """A key that is a regular expression."""

    source: str
    """The key as written (after macros), e.g. ``/dra(g|k)on/i``."""
    pattern: regex.Pattern[str]
    anchored: bool
    """JavaScript's ``y`` flag: a match must start at the beginning of the text."""
    literal: str | None
    """Lower-case ASCII word characters every match contains, or ``None``."""
    local: int = 0
    """How it may be searched piece by piece (no anchors, no look-around but ``\\b``):
    1: nothing in it can match a newline, so each match lies in one line (with the
    ``\\x01`` before a message); 2: nothing can match ``\\x01``, so each match lies in one
    message and the newline after it; 0: neither, the whole text is searched."""

    def test(self, text: str) -> bool:
        """``RegExp.prototype.test`` on ``text`` (inside :meth:`RegexClock.running`: a
        skipped key matches nothing)."""
        return self._search(text) is not None

    def first(self, text: str) -> int | None:
        """Where the first match starts, or ``None`` (as :meth:`test`)."""
        found = self._search(text)
        return None if found is None else found.start()

    def _search(self, text: str) -> regex.Match[str] | None:
        clock = _CLOCK.get()
        if clock is not None:
            return clock.search(self, text)
        return self.search(text, None)

    def search(self, text: str, timeout: float | None) -> regex.Match[str] | None:
        """The first match, the GIL released while matching.

        Raises:
            TimeoutError: the match took longer than ``timeout`` seconds.
        """
        find = self.pattern.match if self.anchored else self.pattern.search
        return find(text, timeout=timeout, concurrent=True)


@dataclass
class RegexClock:
    """The time the regex keys of one scan may take (see :data:`MATCH_TIMEOUT_S` and
    :data:`SCAN_BUDGET_S`), and the keys skipped for going over it.

    Inside :meth:`running`, every :meth:`RegexKey.test` and :meth:`RegexKey.first` of
    the current thread goes through :meth:`search`, wherever the scan calls it from.
    """

    match_timeout: float = MATCH_TIMEOUT_S
    budget: float = SCAN_BUDGET_S
    spent: float = 0.0
    """Seconds spent matching so far."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Key (as written) -> why it was skipped for the rest of the scan."""

    @contextmanager
    def running(self) -> Iterator[RegexClock]:
        token = _CLOCK.set(self)
        try:
            yield self
        finally:
            _CLOCK.reset(token)

    def search(self, key: RegexKey, text: str) -> regex.Match[str] | None:
        """The key's first match in ``text``; ``None`` if there is none, or if the key is
        skipped (:attr:`skipped` then names it)."""
        if key.source in self.skipped:
            return None
        left = self.budget - self.spent
        if left <= 0:
            self.skipped[key.source] = (
                f"regex {key.source} was not tried: the scan's {_ms(self.budget)} for "
                "regex keys were spent"
            )
            return None
        timeout = min(self.match_timeout, left)
        start = time.perf_counter()
        try:
            return key.search(text, timeout)
        except TimeoutError:
            if timeout < self.match_timeout:
                why = f"ran out of the scan's {_ms(self.budget)} for regex keys"
            else:
                why = f"took longer than {_ms(self.match_timeout)}"
            self.skipped[key.source] = f"regex {key.source} {why} and was skipped for this scan"
            return None
        finally:
            self.spent += time.perf_counter() - start


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:g} ms"


@dataclass(frozen=True)
class RegexProblem:
    """A key in regex form that does not compile; SillyTavern matches it as plain text."""

    source: str
    error: str


def parse_regex_key(key: str) -> RegexKey | RegexProblem | None:
    """The key as a regex, a compile problem, or ``None`` when it is no regex.

    Args:
        key: the key after macro substitution and trimming.
    """
    form = _KEY_FORM.match(key)
    if form is None:
        return None
    pattern, flags = form.groups()
    if _UNESCAPED_SLASH.search(pattern):
        return None
    pattern = pattern.replace("\\/", "/", 1)
    if len(set(flags)) != len(flags):
        return RegexProblem(key, f"flag repeated in {flags!r}")
    try:
        py_flags = 0
        for flag in flags:
            py_flags |= _PY_FLAGS.get(flag, 0)
        translator = _Translator(pattern, flags, py_flags)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            translated, literal = translator.translate()
            compiled = regex.compile(translated, py_flags | regex.VERSION0)
    except (regex.error, ValueError, OverflowError, RecursionError) as error:
        return RegexProblem(key, str(error))
    local = 0
    if translator.plain and "y" not in flags:
        local = 1 if not translator.newline else 2 if not translator.marker else 0
    return RegexKey(key, compiled, "y" in flags, literal, local)


class _Translator:
    """One pass over a JavaScript pattern: the Python pattern and a required literal."""

    def __init__(self, pattern: str, flags: str, py_flags: int) -> None:
        self.p = pattern
        self.py_flags = py_flags
        self.plain = True
        """No anchors, no look-around."""
        self.newline = False
        """Some atom can match a newline."""
        self.marker = False
        """Some atom can match ``\\x01``."""
        self.n = len(pattern)
        self.dotall = "s" in flags
        self.multiline = "m" in flags
        self.unicode = "u" in flags
        self.fold = "i" in flags
        self.out: list[str] = []
        self.depth = 0
        self.runs: list[str] = []
        self.current: list[str] = []
        self.alternation = False

    def translate(self) -> tuple[str, str | None]:
        i = 0
        while i < self.n:
            i = self._token(i)
        if self.depth:
            raise ValueError("missing ), unterminated group")
        self._end_run()
        return "".join(self.out), self._literal()

    # -- literal tracking (top level only) --------------------------------------

    def _end_run(self) -> None:
        if self.current:
            self.runs.append("".join(self.current))
            self.current = []

    def _atom(self, i: int, text: str, char: str | None, check: bool = True) -> int:
        """Emit an atom; ``char`` is the literal character it stands for, if any."""
        self.out.append(text)
        if check and not self.newline and regex.fullmatch(text, "\n", self.py_flags):
            self.newline = True
        if check and not self.marker and regex.fullmatch(text, "\x01", self.py_flags):
            self.marker = True
        if self.depth or char is None:
            self._end_run()
            return i
        quantifier = self.p[i] if i < self.n else ""
        if quantifier and quantifier in "*?":
            self._end_run()
        elif quantifier == "{":
            bound = _QUANTIFIER.match(self.p, i)
            if bound is None:
                self.current.append(char)
            else:
                if int(bound.group(1)) > 0:
                    self.current.append(char)
                self._end_run()
        else:
            self.current.append(char)
            if quantifier == "+":
                self._end_run()
        return i

    def _literal(self) -> str | None:
        if self.alternation:
            return None
        best = ""
        for run in self.runs:
            for piece in _ASCII_RUN.findall(run):
                if len(piece) > len(best):
                    best = piece
        return best.lower() if len(best) >= 2 else None

    # -- tokens -----------------------------------------------------------------

    def _token(self, i: int) -> int:
        c = self.p[i]
        if c == "\\":
            return self._escape_outside(i)
        if c == "[":
            end, text = self._class(i)
            return self._atom(end, text, None)
        if c == "(":
            return self._group(i)
        if c == ")":
            if not self.depth:
                raise ValueError("unmatched )")
            self.depth -= 1
            self.out.append(")")
            self._end_run()
            return i + 1
        if c == "|":
            if not self.depth:
                self.alternation = True
            self.out.append("|")
            self._end_run()
            return i + 1
        if c in "*+?":
            return self._quantifier(i + 1, c)
        if c == "{":
            bound = _QUANTIFIER.match(self.p, i)
            if bound is not None:
                return self._quantifier(bound.end(), bound.group())
            return self._atom(i + 1, "\\{", "{")
        if c == "}":
            return self._atom(i + 1, "\\}", "}")
        if c == ".":
            text = "." if self.dotall else f"[^{_LINE_END}]"
            return self._atom(i + 1, text, None)
        if c == "$":
            self._end_run()
            self.plain = False
            self.out.append(f"(?=[{_LINE_END}]|\\Z)" if self.multiline else "\\Z")
            return i + 1
        if c == "^":
            self._end_run()
            self.plain = False
            self.out.append(f"(?:(?<=[{_LINE_END}])|\\A)" if self.multiline else "\\A")
            return i + 1
        return self._atom(i + 1, regex.escape(c), c)

    def _quantifier(self, i: int, text: str) -> int:
        if i < self.n and self.p[i] == "?":
            text += "?"
            i += 1
        if i < self.n and self.p[i] in "*+?":
            raise ValueError(f"nothing to repeat at position {i}")
        self.out.append(text)
        return i

    def _group(self, i: int) -> int:
        self._end_run()
        self.depth += 1
        if not self.p.startswith("(?", i):
            self.out.append("(")
            return i + 1
        rest = i + 2
        head = self.p[rest : rest + 2]
        if head[:1] in (":", "=", "!"):
            self.plain = self.plain and head[:1] == ":"
            self.out.append("(?" + head[:1])
            return rest + 1
        if head in ("<=", "<!"):
            self.plain = False
            self.out.append("(?" + head)
            return rest + 2
        if head[:1] == "<":
            name = _GROUP_NAME.match(self.p, rest + 1)
            if name is None:
                raise ValueError(f"invalid group name at position {rest + 1}")
            self.out.append(f"(?P<{name.group(1)}>")
            return name.end()
        modifiers = _MODIFIERS.match(self.p, rest)
        if modifiers is None:
            raise ValueError(f"invalid group (?{self.p[rest : rest + 1]} at position {i}")
        self.out.append("(?" + modifiers.group())
        return modifiers.end()

    def _escape_outside(self, i: int) -> int:
        if i + 1 >= self.n:
            raise ValueError("\\ at end of pattern")
        e = self.p[i + 1]
        if e in _ESCAPE_CLASSES:
            return self._atom(i + 2, _ESCAPE_CLASSES[e][0], None)
        if e == "b":
            self._end_run()
            self.out.append(_BOUNDARY)
            return i + 2
        if e == "B":
            self._end_run()
            self.out.append(_NOT_BOUNDARY)
            return i + 2
        if e.isdigit() and e != "0":
            j = i + 1
            while j < self.n and self.p[j].isdigit():
                j += 1
            return self._atom(j, "(?:\\" + self.p[i + 1 : j] + ")", None, check=False)
        if e in "pP" and self.unicode:
            end, text = self._property(i)
            return self._atom(end, text, None)
        if e == "k" and self.p.startswith("<", i + 2):
            name = _GROUP_NAME.match(self.p, i + 3)
            if name is not None:
                return self._atom(name.end(), f"(?P={name.group(1)})", None, check=False)
        end, char = self._char_escape(i)
        return self._atom(end, regex.escape(char), char)

    def _char_escape(self, i: int) -> tuple[int, str]:
        """A ``\\`` escape that stands for one character: where it ends, and the character."""
        e = self.p[i + 1]
        if e in _CONTROL:
            return i + 2, {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "v": "\v"}[e]
        if e == "0":
            j = i + 2
            while j < self.n and j < i + 4 and self.p[j] in "01234567":
                j += 1
            return j, chr(int(self.p[i + 1 : j], 8))
        if e == "c" and i + 2 < self.n and self.p[i + 2].isascii() and self.p[i + 2].isalpha():
            return i + 3, chr(ord(self.p[i + 2]) % 32)
        if e == "c":
            return i + 1, "\\"
        if e == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", self.p[i + 2 : i + 4]):
            return i + 4, chr(int(self.p[i + 2 : i + 4], 16))
        if e == "u":
            if self.unicode and self.p.startswith("{", i + 2):
                close = self.p.find("}", i + 3)
                digits = self.p[i + 3 : close] if close > 0 else ""
                if re.fullmatch(r"[0-9A-Fa-f]{1,6}", digits) and int(digits, 16) <= 0x10FFFF:
                    return close + 1, chr(int(digits, 16))
                raise ValueError(f"invalid \\u{{...}} escape at position {i}")
            if re.fullmatch(r"[0-9A-Fa-f]{4}", self.p[i + 2 : i + 6]):
                return i + 6, chr(int(self.p[i + 2 : i + 6], 16))
            return i + 2, "u"
        return i + 2, e

    def _property(self, i: int) -> tuple[int, str]:
        """``\\p{...}`` or ``\\P{...}`` (``u`` flag): where it ends, and the same for ``regex``."""
        found = _PROPERTY.match(self.p, i + 2)
        if found is None:
            raise ValueError(f"invalid property name at position {i}")
        return found.end(), self.p[i : found.end()]

    def _class(self, i: int) -> tuple[int, str]:
        j = i + 1
        negate = self.p.startswith("^", j)
        if negate:
            j += 1
        if self.p.startswith("]", j):
            return j + 1, (r"[\s\S]" if negate else "(?!)")
        items: list[str] = []
        extra: list[str] = []
        while j < self.n and self.p[j] != "]":
            c = self.p[j]
            if c == "\\" and j + 1 < self.n and self.p[j + 1] in _ESCAPE_CLASSES:
                whole, inner = _ESCAPE_CLASSES[self.p[j + 1]]
                if inner is None:
                    extra.append(whole)
                else:
                    items.append(inner)
                j += 2
                if self.p.startswith("-", j):
                    items.append("\\-")
                    j += 1
            elif c == "\\":
                if j + 1 >= self.n:
                    raise ValueError("\\ at end of pattern")
                if self.p[j + 1] in "pP" and self.unicode:
                    j, text = self._property(j)
                    items.append(text)
                    if self.p.startswith("-", j):
                        items.append("\\-")
                        j += 1
                    continue
                if self.p[j + 1] == "b":
                    end, char = j + 2, "\b"
                elif self.p[j + 1].isdigit() and self.p[j + 1] != "0":
                    end = j + 2
                    while end < self.n and end < j + 4 and self.p[end] in "01234567":
                        end += 1
                    digits = self.p[j + 1 : end]
                    if all(d in "01234567" for d in digits):
                        char = chr(int(digits, 8))
                    else:
                        end, char = j + 2, self.p[j + 1]
                else:
                    end, char = self._char_escape(j)
                items.append(regex.escape(char))
                j = end
            elif c in "[&~|" or (c == "-" and self.p.startswith("-", j + 1)):
                items.append("\\" + c)
                j += 1
            else:
                items.append(c)
                j += 1
        if j >= self.n:
            raise ValueError("unterminated character class")
        body = "".join(items)
        if not extra:
            return j + 1, ("[^" if negate else "[") + body + "]"
        options = ([f"[{body}]"] if body else []) + extra
        if not negate:
            return j + 1, "(?:" + "|".join(options) + ")"
        return j + 1, "(?:(?!" + "|".join(options) + r")[\s\S])"
