"""Plain keys: every key of a lorebook found in a text at once.

SillyTavern tests keys one by one (``matchKeys`` in world-info.js). A plain key is
compared with the text lower-cased unless the entry is case-sensitive; with "match
whole words" a key of one word must stand between non-word characters (JavaScript's
ASCII ``\\W``, or the ends of the text), and a key of several words is a plain
substring; without it every key is a substring.

Here the keys of one matching mode (case-sensitivity x whole words) are compiled once
into a :class:`Matcher` that finds all of them in a text in one pass per kind:

* one-word keys of ASCII word characters (most keys): the text's maximal runs of
  ``[A-Za-z0-9_]`` intersected with the key set (a key matches exactly when it is one
  of those runs);
* other one-word keys (``o'brien``, ``café``, ``東京``): one trie-shaped regex, tried at
  every position where a run can start, that reports the longest key there; the
  shorter keys it implies come from a precomputed closure;
* keys of several words: a trie of what follows each key's first space, which only
  starts at spaces, then the first word is checked before the space;
* substring keys of word characters (no whole words): the trie run over the text's
  distinct word runs.

The key texts given to a matcher are already normalized (lower-cased for a
case-insensitive mode), and so must the texts be.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Mapping

from ._jsregex import JS_SPACE, RegexKey, parse_regex_key

__all__ = ["Matcher", "is_multiword", "st_match_key"]

WORD_CHARS = frozenset(string.ascii_letters + string.digits + "_")
_RUN = re.compile(r"[A-Za-z0-9_]+")
_SPLIT = re.compile("[" + re.escape(JS_SPACE) + "]+")
_NOT_WORD_BEFORE = "(?<![A-Za-z0-9_])"
_NOT_WORD_AFTER = "(?![A-Za-z0-9_])"
_SMALL = 16
"""Up to this many keys of a rare kind are searched one by one (``str.find``)."""


def is_multiword(key: str) -> bool:
    """Whether SillyTavern's ``key.split(/\\s+/)`` gives more than one piece."""
    return len(_SPLIT.split(key)) > 1


@functools.lru_cache(maxsize=4096)
def _boundary(key: str) -> re.Pattern[str]:
    """SillyTavern's ``(?:^|\\W)(key)(?:$|\\W)`` with JavaScript's ASCII ``\\W``."""
    return re.compile(r"(?:\A|[^A-Za-z0-9_])" + re.escape(key) + r"(?:\Z|[^A-Za-z0-9_])")


@functools.lru_cache(maxsize=4096)
def _regex(key: str) -> RegexKey | None:
    found = parse_regex_key(key)
    return found if isinstance(found, RegexKey) else None


def st_match_key(haystack: str, key: str, case_sensitive: bool, whole_words: bool) -> bool:
    """SillyTavern's ``matchKeys``: one key against one text, exactly, however slow
    (but for a regex key inside a scan, which its :class:`~._jsregex.RegexClock` bounds).

    Args:
        haystack: the text as SillyTavern builds it (``\\x01`` before each message).
        key: the key as given (no trimming or macros here, as in SillyTavern).
        case_sensitive: the entry's effective setting.
        whole_words: the entry's effective setting.
    """
    regex = _regex(key)
    if regex is not None:
        return regex.test(haystack)
    if not case_sensitive:
        haystack = haystack.lower()
        key = key.lower()
    if whole_words and not is_multiword(key):
        return _boundary(key).search(haystack) is not None
    return key in haystack


_Trie = dict[str, "_Trie"]
"""A trie of characters: each key a path of nested dicts, ``""`` marking its end."""


def _trie(keys: Iterable[str]) -> str:
    """A regex matching exactly ``keys``, shaped as their trie (longest match first)."""
    root: _Trie = {}
    for key in keys:
        node = root
        for char in key:
            node = node.setdefault(char, {})
        node[""] = {}
    return _emit(root)


def _emit(node: _Trie) -> str:
    parts = []
    for char in sorted(k for k in node if k):
        child = node[char]
        chain = re.escape(char)
        while "" not in child and len(child) == 1:
            (char,) = child
            chain += re.escape(char)
            child = child[char]
        parts.append(chain + _emit(child))
    if not parts:
        return ""
    body = parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"
    return f"(?:{body})?" if "" in node else body


def _closure(keys: Mapping[str, int], boundary: bool) -> dict[str, tuple[int, ...]]:
    """For each key, the ids of the keys that match wherever it matches.

    Substring keys: the keys that are its prefixes. Whole-word keys: the prefixes
    followed, inside the key, by a non-word character.
    """
    closure = {}
    for key in keys:
        ids = []
        for size in range(1, len(key) + 1):
            kid = keys.get(key[:size])
            if kid is None:
                continue
            if boundary and size < len(key) and key[size] in WORD_CHARS:
                continue
            ids.append(kid)
        closure[key] = tuple(ids)
    return closure


class _TrieSearch:
    """Every key of a set found in a text, overlapping ones included."""

    def __init__(self, keys: Mapping[str, int], boundary: bool) -> None:
        self.small = len(keys) <= _SMALL
        self.keys = dict(keys)
        self.boundary = boundary
        if self.small:
            return
        body = "(" + _trie(keys) + ")"
        after = _NOT_WORD_AFTER if boundary else ""
        before = _NOT_WORD_BEFORE if boundary else ""
        self.pattern = re.compile(f"{before}(?={body}{after})")
        self.closure = _closure(keys, boundary)

    def find(self, text: str, out: set[int]) -> None:
        if self.small:
            for key, kid in self.keys.items():
                if key in text and (not self.boundary or _boundary(key).search(text)):
                    out.add(kid)
            return
        closure = self.closure
        for found in self.pattern.finditer(text):
            out.update(closure[found.group(1)])


class _SpacedSearch:
    """Keys of several words: a trie of what follows their first space, then the head."""

    def __init__(self, keys: Mapping[str, int]) -> None:
        tails: dict[str, dict[int, dict[str, int]]] = {}
        for key, kid in keys.items():
            cut = next(i for i, char in enumerate(key) if char in JS_SPACE)
            tails.setdefault(key[cut:], {}).setdefault(cut, {})[key[:cut]] = kid
        self.pattern = re.compile(_trie(tails))
        self.heads = {
            tail: tuple(
                (size, heads)
                for prefix in (tail[:end] for end in range(1, len(tail) + 1))
                if prefix in tails
                for size, heads in tails[prefix].items()
            )
            for tail in tails
        }

    def find(self, text: str, out: set[int]) -> None:
        search = self.pattern.search
        pos = 0
        while (found := search(text, pos)) is not None:
            at = found.start()
            for size, heads in self.heads[found.group()]:
                if size <= at:
                    kid = heads.get(text[at - size : at])
                    if kid is not None:
                        out.add(kid)
            pos = at + 1


class Matcher:
    """All plain keys of one matching mode.

    Args:
        keys: normalized key text -> key id.
        whole_words: the mode's whole-word setting.
    """

    def __init__(self, keys: Mapping[str, int], whole_words: bool) -> None:
        words: dict[str, int] = {}
        inner: dict[str, int] = {}
        bounded: dict[str, int] = {}
        other: dict[str, int] = {}
        spaced: dict[str, int] = {}
        for key, kid in keys.items():
            if is_multiword(key):
                spaced[key] = kid
            elif all(char in WORD_CHARS for char in key):
                (words if whole_words else inner)[key] = kid
            else:
                (bounded if whole_words else other)[key] = kid
        self._words = words
        self._word_set = frozenset(words)
        self._inner = _TrieSearch(inner, boundary=False) if inner else None
        self._bounded = _TrieSearch(bounded, boundary=True) if bounded else None
        self._other = _TrieSearch(other, boundary=False) if other else None
        self._spaced = _SpacedSearch(spaced) if spaced else None
        self._runs = bool(words) or bool(inner)

    def hits(self, text: str) -> set[int]:
        """The ids of the keys found in ``text`` (already normalized for the mode)."""
        out: set[int] = set()
        if self._runs:
            runs = _RUN.findall(text)
            if self._word_set:
                words = self._words
                for word in self._word_set.intersection(runs):
                    out.add(words[word])
            if self._inner is not None:
                self._inner.find("\x00".join(set(runs)), out)
        if self._bounded is not None:
            self._bounded.find(text, out)
        if self._other is not None:
            self._other.find(text, out)
        if self._spaced is not None:
            self._spaced.find(text, out)
        return out
