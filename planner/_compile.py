"""Lorebook entries compiled for scanning: their keys, haystack, mode and order."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ._jsregex import RegexKey, RegexProblem, js_trim, parse_regex_key
from ._keys import Matcher
from .lorebook import Entry, Lorebook

__all__ = [
    "ALWAYS",
    "FIELDS",
    "LITERAL_MODE",
    "NEVER",
    "PLAIN",
    "REGEX",
    "SLOW",
    "Item",
    "Key",
    "Layer",
    "entry_hash",
    "has_macros",
    "js_key_order",
    "js_order",
    "key_index",
    "make_item",
    "parse_decorators",
    "resolve",
    "substitute_macros",
]

PLAIN, REGEX, ALWAYS, NEVER, SLOW = range(5)
"""Kinds of keys. ALWAYS: blank after trimming (SillyTavern matches it everywhere);
NEVER: empty; SLOW: holds a newline or the ``\\x01`` message marker, so it could match
across the pieces of a haystack and is matched against the joined text."""
LITERAL_MODE = (False, False)
"""Regex literals are found as case-insensitive substrings, like plain keys of that mode."""
FIELDS = ("persona", "description", "personality", "depth_prompt", "scenario", "creator_notes")
"""The texts of ``character`` an entry may scan, in SillyTavern's order."""
_FIELD_FLAGS = (
    "match_persona_description",
    "match_character_description",
    "match_character_personality",
    "match_character_depth_prompt",
    "match_scenario",
    "match_creator_notes",
)
_MACROS = re.compile(r"\{\{(char|user)\}\}|<(USER|BOT|CHAR)>", re.IGNORECASE)
_GROUP_SPLIT = re.compile(r",\s*")
_DECORATORS = ("@@activate", "@@dont_activate")
_ARRAY_INDEX = 2**32 - 1


def substitute_macros(text: str, char: str, user: str) -> str:
    """``{{char}}``/``<BOT>``/``<CHAR>`` and ``{{user}}``/``<USER>`` (any case) replaced."""

    def name(found: re.Match[str]) -> str:
        macro = (found.group(1) or found.group(2)).lower()
        return user if macro == "user" else char

    return _MACROS.sub(name, text)


def has_macros(text: str) -> bool:
    return _MACROS.search(text) is not None


@dataclass(frozen=True, slots=True)
class Key:
    """A key ready to match."""

    kind: int
    text: str
    """As written, after macros and trimming (for reasons)."""
    kid: int = -1
    """PLAIN: the key's id in its layer. REGEX: its literal's id (-1: none)."""
    regex: RegexKey | None = None


@dataclass(slots=True, eq=False)
class Item:
    """An entry as the scan uses it."""

    index: int
    """Its place in SillyTavern's sorted entry list."""
    id: str
    book: str
    entry: Entry
    content: str
    """The content without its decorators (macros not yet replaced)."""
    decorators: tuple[str, ...]
    mode: tuple[bool, bool]
    """(case-sensitive, whole words), the entry's or the global setting."""
    where: tuple[int | None, tuple[str, ...]]
    """Its haystack: (its own scan depth or None, the character texts it also scans)."""
    groups: tuple[str, ...]
    """Its inclusion groups (``group`` split on ``/,\\s*/`` as SillyTavern does)."""
    delay_level: int
    sticky: int
    cooldown: int
    delay: int
    dynamic: bool
    """Some key holds ``{{char}}`` or ``{{user}}``: compiled per (char, user)."""
    hash: str | None = None
    """Set for entries with sticky or cooldown (the only ones with stored effects)."""
    keys: tuple[Key, ...] = ()
    secondary: tuple[Key, ...] = ()
    problems: tuple[str, ...] = ()
    """Its keys in regex form that do not compile (SillyTavern matches them as text)."""


class Layer:
    """Plain keys interned by mode, and the matchers that find them.

    Args:
        offset: the first key id (layers used together have disjoint ids).
    """

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.size = 0
        self.keys: dict[tuple[bool, bool], dict[str, int]] = {}
        self.matchers: dict[tuple[bool, bool], Matcher] = {}
        self.cache: dict[tuple[tuple[bool, bool], str], frozenset[int]] = {}
        """(mode, normalized text) -> the key ids found in it, kept across scans."""

    def intern(self, mode: tuple[bool, bool], text: str) -> int:
        keys = self.keys.setdefault(mode, {})
        kid = keys.get(text)
        if kid is None:
            kid = keys[text] = self.offset + self.size
            self.size += 1
        return kid

    def freeze(self) -> None:
        self.matchers = {mode: Matcher(keys, mode[1]) for mode, keys in self.keys.items()}

    def hits(self, mode: tuple[bool, bool], text: str) -> frozenset[int]:
        """The ids of this mode's keys in a (normalized) text."""
        cache = self.cache
        found = cache.get((mode, text))
        if found is None:
            matcher = self.matchers.get(mode)
            found = frozenset(matcher.hits(text)) if matcher is not None else frozenset()
            if len(cache) >= 8192:
                del cache[next(iter(cache))]
            cache[(mode, text)] = found
        return found


def resolve(layer: Layer, raw: str, mode: tuple[bool, bool], problems: list[str]) -> Key:
    """A key (after macros) as SillyTavern reads it; plain keys interned in ``layer``."""
    if raw == "":
        return Key(NEVER, raw)
    text = js_trim(raw)
    if text == "":
        return Key(ALWAYS, raw)
    parsed = parse_regex_key(text)
    if isinstance(parsed, RegexKey):
        kid = layer.intern(LITERAL_MODE, parsed.literal) if parsed.literal else -1
        return Key(REGEX, text, kid, parsed)
    if isinstance(parsed, RegexProblem):
        problems.append(f"regex {text} does not compile ({parsed.error}); matched as plain text")
    if "\x01" in text or "\n" in text:
        return Key(SLOW, text)
    return Key(PLAIN, text, layer.intern(mode, text if mode[0] else text.lower()))


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """SillyTavern's ``parseDecorators``: the ``@@`` lines at the top of the content."""
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    decorators: list[str] = []
    fallback = False
    rest = content
    for index, line in enumerate(lines):
        if not line.startswith("@@"):
            rest = "\n".join(lines[index:])
            break
        if line.startswith("@@@") and not fallback:
            continue
        name = line[1:] if line.startswith("@@@") else line
        if name.startswith(_DECORATORS):
            decorators.append(name)
            fallback = False
        else:
            fallback = True
    return tuple(decorators), rest


def js_order(book: Lorebook) -> list[Entry]:
    """A book's entries as JavaScript's ``Object.keys`` orders them (the keys are uids):
    integer keys ascending first, then the others in file order."""
    indexed = [entry for entry in book.entries if 0 <= entry.uid < _ARRAY_INDEX]
    rest = [entry for entry in book.entries if not 0 <= entry.uid < _ARRAY_INDEX]
    return sorted(indexed, key=lambda entry: entry.uid) + rest


def js_key_order(keys: Iterable[str]) -> list[str]:
    """The order of a JavaScript object's keys: array indices ascending, then insertion."""
    keys = list(keys)
    indices = [key for key in keys if key.isdigit() and str(int(key)) == key]
    indices = [key for key in indices if int(key) < _ARRAY_INDEX]
    chosen = set(indices)
    return sorted(indices, key=int) + [key for key in keys if key not in chosen]


def entry_hash(book: str, entry: Entry) -> str:
    """A stable hash of an entry and its book: editing the entry ends its timed effects."""
    document = {"book": book, "entry": entry.model_dump(mode="json", by_alias=True)}
    text = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def make_item(
    index: int, book: Lorebook, entry: Entry, case_sensitive: bool, whole_words: bool
) -> Item:
    """An entry compiled but for its keys (see :func:`resolve`)."""
    decorators, content = parse_decorators(entry.content)
    case = entry.case_sensitive if entry.case_sensitive is not None else case_sensitive
    whole = entry.match_whole_words if entry.match_whole_words is not None else whole_words
    pairs = zip(FIELDS, _FIELD_FLAGS, strict=True)
    scanned = tuple(name for name, flag in pairs if getattr(entry, flag))
    item = Item(
        index=index,
        id=f"{book.name}:{entry.uid}",
        book=book.name,
        entry=entry,
        content=content,
        decorators=decorators,
        mode=(case, whole),
        where=(entry.scan_depth, scanned),
        groups=tuple(part for part in _GROUP_SPLIT.split(entry.group) if part),
        delay_level=entry.delay_until_recursion,
        sticky=entry.sticky or 0,
        cooldown=entry.cooldown or 0,
        delay=entry.delay or 0,
        dynamic=any(has_macros(raw) for raw in (*entry.keys, *entry.secondary_keys)),
    )
    if item.sticky or item.cooldown:
        item.hash = entry_hash(book.name, entry)
    return item


def key_index(
    pairs: Iterable[tuple[Item, tuple[Key, ...]]],
) -> tuple[dict[Any, dict[int, list[int]]], set[int]]:
    """Which entries a key's presence can activate (per haystack), and which entries
    always need a look (constants, decorators, regexes without a literal, blank or
    separator keys)."""
    index: dict[Any, dict[int, list[int]]] = {}
    always: set[int] = set()
    for item, keys in pairs:
        if item.entry.disable:
            continue
        if item.entry.constant or item.decorators:
            always.add(item.index)
        by_key = index.setdefault(item.where, {})
        for key in keys:
            if key.kind == PLAIN or (key.kind == REGEX and key.kid >= 0):
                by_key.setdefault(key.kid, []).append(item.index)
            elif key.kind != NEVER:
                always.add(item.index)
    return index, always
