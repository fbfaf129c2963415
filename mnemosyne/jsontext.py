"""JSON text from outside (imported and uploaded files), read within limits.

:func:`json.loads` trusts its input: a 5,000-digit integer raises a ``ValueError`` that
tells the user about ``sys.set_int_max_str_digits()``, ``[`` repeated 100,000 times
raises ``RecursionError`` from deep inside the decoder, ``NaN`` and ``1e999`` are read as
numbers no JSON document holds, ``"\\ud800"`` is read as text that cannot be stored,
and a file of ``[{},{},...]`` becomes millions of objects. Every importer (lorebooks,
character cards, tree files, SillyTavern chats) and the store's session documents read
their JSON here instead: :func:`loads` for one document, :func:`loads_lines` for JSON
Lines. A refusal is a :class:`~mnemosyne.errors.JsonTextError`: one line naming the
place (the JSON path, and the line in JSON Lines) and the limit.

How, cheaply and before anything recurses: string literals are cut out of the text with
one regular expression, so what is left is the document's skeleton (brackets, commas,
numbers, literals); the nesting depth, the number of values, over-long numbers and
``NaN``/``Infinity`` are read off the skeleton at C speed, before :func:`json.loads`
sees the text. Only when the skeleton shows a problem is the text walked token by token
in Python, to name where it is. Whether a text or a list may be too long is also told
from the text at C speed (a window inside one string literal; a list's commas on the
skeleton); only then is the parsed document walked, to find which and name where.

The limits (:class:`JsonLimits`) are generous for real files; each is a constant here,
with why it is what it is.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from functools import cached_property
from itertools import accumulate
from typing import Any, NoReturn

from .errors import JsonTextError, path_text

__all__ = [
    "CHAT",
    "DOCUMENT",
    "MAX_DEPTH",
    "MAX_DIGITS",
    "MAX_DOCUMENT_BYTES",
    "MAX_DOCUMENT_ENTRIES",
    "MAX_DOCUMENT_VALUES",
    "MAX_FILE_BYTES",
    "MAX_LINES",
    "MAX_SESSION_ENTRIES",
    "MAX_SESSION_VALUES",
    "MAX_STRING",
    "TREE",
    "JsonLimits",
    "JsonTextError",
    "loads",
    "loads_lines",
    "path_text",
    "preview",
]

MAX_DEPTH = 64
"""Nesting of lists and objects. Real cards, books, chats and tree files nest under 15
levels; the readers after the parser (copies, validation, the JSON encoder of the
database) recurse once or twice per level, so the limit stays far below Python's
recursion limit wherever the document goes next."""

MAX_DIGITS = 100
"""Digits in a row in one number. Real files hold ids, orders, timestamps and token
counts (at most 20 digits); Python refuses to read integers of more than 4,300 digits,
and converting long ones costs time quadratic in their length."""

MAX_STRING = 4 * 1024 * 1024
"""Characters in one text (a value or a key). The longest texts real files hold are a
PromptTrace's blobs in a tree file (a whole prompt: a million-token context window is
about 4 MB of text); a message, a card's description or a lore entry is far shorter."""

MAX_DOCUMENT_BYTES = 32 * 1024 * 1024
"""A lorebook or card document (and its copy kept with a session). Real World Info
books are a few MB and cards with an embedded book 1-5 MB; kept with a session, a card's
book is written out again indented, with the card's original inside it, so the store
reads back documents up to a few times the size of the file."""

MAX_DOCUMENT_ENTRIES = 20_000
"""Members of one list or object in a lorebook or card (and in a line of a chat). The
largest real World Info books hold a few thousand entries; each entry is validated,
converted and written out again on import (a fraction of a millisecond), so ten times
more is still an import of seconds, not minutes."""

MAX_DOCUMENT_VALUES = 2_000_000
"""Values in one lorebook or card, all levels together (counted from the text's commas
and brackets, an upper bound). Each costs memory once parsed (an empty object ~64
bytes): this bounds what a small file of ``[{},{},...]`` can take."""

MAX_FILE_BYTES = 64 * 1024 * 1024
"""A tree file or a SillyTavern chat: the largest file the command line reads and the
HTTP API accepts by default. A 20,000-message chat is about 20 MB."""

MAX_SESSION_ENTRIES = 1_000_000
"""Members of one list or object in a tree file (its ``nodes``, ``blobs``, ``traces``):
a whole session, 20,000 messages with their alternatives, fragments and trash."""

MAX_SESSION_VALUES = 4_000_000
"""Values in a whole tree file or chat (all lines together). A 20,000-message chat or
its tree file holds about a million (each message ~20-40 values with its metadata);
this is four times that, and bounds the memory a hostile file of tiny values takes
(a few hundred MB at most)."""

MAX_LINES = 100_000
"""Lines of a SillyTavern chat: messages, one a line, five times a long chat (20,000
messages). An import holds every message, as a node to write, in memory at once: a few
KB each. Counted before any line is parsed."""


@dataclass(frozen=True)
class JsonLimits:
    """What a JSON text may hold; past any of it, it is refused before it costs much."""

    max_bytes: int = MAX_DOCUMENT_BYTES
    """Size of the whole text (bytes of a file; characters when given text)."""
    max_depth: int = MAX_DEPTH
    max_digits: int = MAX_DIGITS
    max_string: int = MAX_STRING
    max_entries: int = MAX_DOCUMENT_ENTRIES
    """Members of any one list or object (and lines of JSON Lines)."""
    max_values: int = MAX_DOCUMENT_VALUES
    """Values of the whole text (all lines of JSON Lines together)."""

    @cached_property
    def _long_number(self) -> re.Pattern[str]:
        # From the start of a run of digits only (a digit with none before it): tried
        # at every digit, a run just short of the limit would be read again from each
        # of its digits.
        return re.compile(f"[0-9](?<![0-9]{{2}})[0-9]{{{self.max_digits}}}")

    @cached_property
    def _crowded(self) -> re.Pattern[str]:
        # A list or object with more than max_entries members, written as its opening
        # bracket and its commas (its members' own contents taken out).
        return re.compile(f"[\\[{{],{{{self.max_entries}}}")


DOCUMENT = JsonLimits()
"""Lorebooks, character cards, and the session documents the store keeps."""
TREE = JsonLimits(
    max_bytes=MAX_FILE_BYTES, max_entries=MAX_SESSION_ENTRIES, max_values=MAX_SESSION_VALUES
)
"""A tree file: a whole session."""
CHAT = JsonLimits(max_bytes=MAX_FILE_BYTES, max_entries=MAX_LINES, max_values=MAX_SESSION_VALUES)
"""A SillyTavern chat (JSON Lines): ``max_entries`` is its number of lines; a line's lists
and objects are held to :data:`MAX_DOCUMENT_ENTRIES`."""

# A JSON string literal (escapes taken whole), so that what is left is the skeleton.
_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)
_NOT_STRUCTURE = bytes(byte for byte in range(256) if byte not in b"[]{},")
_INNERMOST = re.compile(r"[\[{],*[\]}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_CONSTANT = re.compile(r"NaN|Infinity")
# A lone surrogate written as an escape (the only way one gets into JSON text): a high
# one not followed by a low one, or a low one not after a high one. (``\\\\ud800``, an
# escaped backslash before ``ud800``, matches too: the walk then looks at the text.)
_HIGH, _LOW = r"\\u[dD][89abAB][0-9a-fA-F]{2}", r"\\u[dD][c-fC-F][0-9a-fA-F]{2}"
_LONE_ESCAPE = re.compile(
    rf"\\u[dD](?:[89abAB][0-9a-fA-F]{{2}}(?!{_LOW})|[c-fC-F][0-9a-fA-F]{{2}}(?<!{_HIGH}{_LOW}))"
)
_LONE = re.compile("[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]")
# The tokens of JSON, for naming where a problem is (the slow path).
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    | (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")
    | (?P<number>-?[0-9][0-9.eE+-]*)
    | (?P<word>-?[A-Za-z]+)
    | (?P<mark>[\[\]{},:])
    """,
    re.DOTALL | re.VERBOSE,
)
PREVIEW = 60
"""Characters of a value shown in an error message (a refusal names, it does not echo)."""


def preview(value: Any, width: int = PREVIEW) -> str:
    """``repr(value)`` cut to about ``width`` characters, for error messages.

    A file's value can be megabytes long; a message shows its start and how long it is.
    """
    if isinstance(value, str):
        shown = repr(value[: width + 1])
        return shown if len(value) <= width else f"{shown[: width + 1]}… ({len(value)} characters)"
    if isinstance(value, list | dict) and len(value) > 20:
        kind = "list" if isinstance(value, list) else "object"
        return f"a {kind} of {len(value)} entries"
    shown = repr(value)
    return shown if len(shown) <= width else f"{shown[:width]}… ({len(shown)} characters)"


class _Refused(Exception):
    """Raised by the decoder's hooks: the number literal it was given."""

    def __init__(self, literal: str) -> None:
        super().__init__(literal)
        self.literal = literal


def _constant(literal: str) -> Any:
    raise _Refused(literal)


def _float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        raise _Refused(literal)
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float)


def _decode(data: bytes | str, limits: JsonLimits) -> str:
    if isinstance(data, str):
        if len(data) > limits.max_bytes:
            raise JsonTextError(
                f"{len(data):,} characters, more than the {limits.max_bytes:,} allowed",
                limit="max_bytes",
            )
        return data.removeprefix("\ufeff")
    if len(data) > limits.max_bytes:
        raise JsonTextError(
            f"{len(data):,} bytes, more than the {limits.max_bytes:,} allowed", limit="max_bytes"
        )
    encoding = json.detect_encoding(data)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise JsonTextError(
            f"not {encoding.upper().removesuffix('-SIG')} text ({error.reason} at byte "
            f"{error.start})"
        ) from None


def loads(data: bytes | str, limits: JsonLimits = DOCUMENT) -> Any:
    """One JSON document, read within ``limits``.

    Args:
        data: the text, or a file's bytes (UTF-8, -16 or -32, as :func:`json.loads`
            detects; a byte-order mark is skipped).
        limits: what the document may hold.

    Raises:
        JsonTextError: not JSON, or past a limit; the message names the JSON path (or the
            line and column) and the limit.
    """
    text = _decode(data, limits)
    return _parse(text, limits, _scan(text, limits, 0))


def loads_lines(data: bytes | str, limits: JsonLimits = CHAT) -> list[Any]:
    """JSON Lines: one value per line (a last empty line is no value), each read within
    ``limits``; ``limits.max_entries`` is the number of lines (counted before any is
    parsed), a line's lists and objects are held to :data:`MAX_DOCUMENT_ENTRIES`, and
    ``limits.max_values`` holds for all lines together.

    Raises:
        JsonTextError: its ``line`` is the line's number (from 1).
    """
    text = _decode(data, limits)
    if text.count("\n") + (not text.endswith("\n")) > limits.max_entries:
        raise JsonTextError(
            f"more than {limits.max_entries:,} lines (the limit)", limit="max_entries"
        )
    lines = text.split("\n")
    if lines and not lines[-1].strip():
        lines.pop()
    each = replace(limits, max_entries=min(limits.max_entries, MAX_DOCUMENT_ENTRIES))
    values: list[Any] = []
    total = 0
    for number, line in enumerate(lines, start=1):
        try:
            scanned = _scan(line, each, total)
            total += scanned.values
            values.append(_parse(line, each, scanned))
        except JsonTextError as error:
            error.line = number
            raise
    return values


@dataclass(frozen=True)
class _Scanned:
    values: int
    """The number of values (an upper bound: commas and opening brackets)."""
    entries: bool
    """Whether a list or object may have too many members (the values are more)."""
    texts: bool
    """Whether a text may be too long."""
    surrogates: bool
    """Whether a lone surrogate may be in a text (one is written as an escape)."""


def _scan(text: str, limits: JsonLimits, before: int) -> _Scanned:
    """Check what the skeleton shows (nesting, number of values, long numbers, ``NaN``
    and ``Infinity``) before the text is parsed; ``before``: values of earlier lines."""
    skeleton = _STRING.sub('""', text)
    # Its brackets and commas (all else deleted by bytes.translate: a regular expression
    # would stop at every number and literal).
    structure = skeleton.encode("ascii", "replace").translate(None, _NOT_STRUCTURE).decode()
    opening = structure.count("[") + structure.count("{")
    values = structure.count(",") + opening + 1
    if before + values > limits.max_values:
        raise JsonTextError(
            f"more than {limits.max_values:,} values in all (the limit)", limit="max_values"
        )
    if _CONSTANT.search(skeleton) or limits._long_number.search(skeleton):
        _locate(text, limits)
    if (
        opening > limits.max_depth
        and max(accumulate(map(_STEP.__getitem__, structure.replace(",", "")))) > limits.max_depth
    ):
        _locate(text, limits)
        # Found nowhere by the walk: the text stops being JSON first. It is refused all
        # the same, as the decoder must not recurse that deep.
        raise JsonTextError(
            f"nested too deep: more than {limits.max_depth} levels (the limit)", limit="max_depth"
        )
    # A text as written is at least as long as it is read (escapes shrink).
    texts = len(text) - len(skeleton) > limits.max_string and _may_hold_long_text(
        text, limits.max_string
    )
    surrogates = _LONE_ESCAPE.search(text) is not None
    entries = values > limits.max_entries and _may_be_crowded(structure, limits)
    return _Scanned(values, entries, texts, surrogates)


def _may_be_crowded(structure: str, limits: JsonLimits) -> bool:
    """Whether a list or object has more than ``limits.max_entries`` members, told from
    the skeleton's brackets and commas: the innermost lists and objects (``[,,,]``) are
    taken out one level at a time; every list or object is innermost once, its commas
    then right after its opening bracket."""
    while not limits._crowded.search(structure):
        shorter = _INNERMOST.sub("", structure)
        if len(shorter) == len(structure):
            return False
        structure = shorter
    return True


def _may_hold_long_text(text: str, longest: int) -> bool:
    """Whether a string literal of more than ``longest`` characters may be in ``text``.

    Such a literal covers a whole window of ``longest // 2`` characters (windows side by
    side), and inside a literal every ``"`` is escaped: a window whose every quote has a
    backslash before it. No such window: no such literal (two ``str.count`` a window).
    """
    width = max(longest // 2, 1)
    for start in range(0, len(text) - width + 1, width):
        end = start + width
        if text.count('"', start, end) == text.count('\\"', max(start - 1, 0), end):
            return True
    return False


def _parse(text: str, limits: JsonLimits, scanned: _Scanned) -> Any:
    try:
        document = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise JsonTextError(error.msg, line=error.lineno, column=error.colno) from None
    except _Refused as refused:
        _locate(text, limits)
        raise JsonTextError(f"{preview(refused.literal)} is not a finite number") from None
    if scanned.texts or scanned.surrogates:
        _walk(document, limits, scanned.surrogates)
    elif scanned.entries:
        _count(document, limits.max_entries)
    return document


def _walk(document: Any, limits: JsonLimits, surrogates: bool) -> None:
    """The lengths of texts and of lists and objects (and, if ``surrogates``, lone
    surrogates in texts) over the parsed document: a stack, not recursion, and a tight
    loop, as it visits every value of a large file."""
    max_string, max_entries = limits.max_string, limits.max_entries
    lone = _LONE.search if surrogates else None

    def wrong_text(text: str) -> bool:
        return len(text) > max_string or (lone is not None and lone(text) is not None)

    if type(document) is str and wrong_text(document):
        _refuse_text(document, (), limits)
    stack: list[tuple[Any, tuple[str | int, ...]]] = []
    if type(document) is dict or type(document) is list:
        stack.append((document, ()))
    while stack:
        value, path = stack.pop()
        if len(value) > max_entries:
            _refuse_entries(value, path, max_entries)
        items = value.items() if type(value) is dict else enumerate(value)
        for key, item in items:
            if type(key) is str and (len(key) > max_string or lone is not None) and wrong_text(key):
                _refuse_text(key, (*path, key), limits)
            kind = type(item)
            if kind is str:
                if (len(item) > max_string or lone is not None) and wrong_text(item):
                    _refuse_text(item, (*path, key), limits)
            elif kind is dict or kind is list:
                stack.append((item, (*path, key)))


def _count(document: Any, max_entries: int) -> None:
    """The members of every list and object, texts left alone (the loop of :func:`_walk`
    with nothing to do for a text)."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = []
    if type(document) is dict or type(document) is list:
        stack.append((document, ()))
    while stack:
        value, path = stack.pop()
        if len(value) > max_entries:
            _refuse_entries(value, path, max_entries)
        items = value.items() if type(value) is dict else enumerate(value)
        for key, item in items:
            if type(item) is dict or type(item) is list:
                stack.append((item, (*path, key)))


def _refuse_entries(value: Any, path: tuple[str | int, ...], max_entries: int) -> NoReturn:
    raise JsonTextError(
        f"{len(value):,} entries, more than the {max_entries:,} allowed in one list or object",
        limit="max_entries",
        path=path,
    )


def _refuse_text(text: str, path: tuple[str | int, ...], limits: JsonLimits) -> NoReturn:
    if len(text) > limits.max_string:
        raise JsonTextError(
            f"a text of {len(text):,} characters, more than the {limits.max_string:,} allowed",
            limit="max_string",
            path=path,
        )
    raise JsonTextError(
        "a text holding a lone UTF-16 surrogate (\\ud800-\\udfff): not Unicode text", path=path
    )


class _Frame:
    __slots__ = ("index", "key", "object", "want_key")

    def __init__(self, is_object: bool) -> None:
        self.object = is_object
        self.index = 0
        self.key: str | None = None
        self.want_key = is_object


def _locate(text: str, limits: JsonLimits) -> None:
    """Walk the tokens to the first problem the skeleton showed, and raise it with its path.

    Returns only if it finds none (text that is not JSON before the problem: the
    decoder then says where)."""
    stack: list[_Frame] = []

    def path() -> tuple[str | int, ...]:
        parts: list[str | int] = []
        for frame in stack:
            if frame.object:
                if frame.key is not None:
                    parts.append(frame.key)
            else:
                parts.append(frame.index)
        return tuple(parts)

    position = 0
    end = len(text)
    while position < end:
        match = _TOKEN.match(text, position)
        if match is None:
            return
        position = match.end()
        kind = match.lastgroup
        token = match.group()
        if kind == "space":
            continue
        if kind == "mark":
            if token in "[{":
                if len(stack) >= limits.max_depth:
                    raise JsonTextError(
                        f"nested too deep: more than {limits.max_depth} levels (the limit)",
                        limit="max_depth",
                        path=path(),
                    )
                stack.append(_Frame(token == "{"))
            elif token in "]}":
                if not stack:
                    return
                stack.pop()
            elif token == "," and stack:
                frame = stack[-1]
                frame.index += 1
                frame.want_key = frame.object
            continue
        if kind == "string" and stack and stack[-1].want_key:
            try:
                stack[-1].key = json.loads(token)
            except ValueError:
                return
            stack[-1].want_key = False
            continue
        if kind == "number":
            digits = max((len(run) for run in re.findall("[0-9]+", token)), default=0)
            if digits > limits.max_digits:
                raise JsonTextError(
                    f"a number of {digits:,} digits, more than the {limits.max_digits} allowed",
                    limit="max_digits",
                    path=path(),
                )
            if any(c in token for c in ".eE") and math.isinf(_safe_float(token)):
                raise JsonTextError(
                    f"{preview(token)} is too large to be a number (not finite)", path=path()
                )
        elif kind == "word" and token.lstrip("-") in ("NaN", "Infinity"):
            raise JsonTextError(f"{token} is not a JSON number", path=path())


def _safe_float(token: str) -> float:
    try:
        return float(token)
    except ValueError:
        return 0.0
