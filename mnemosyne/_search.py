"""Full-text search over every node of every branch (:meth:`mnemosyne.Store.search`).

The query is a user's text, never search syntax: it is split on white space into
words, and a node matches when its content holds every word (case-insensitively).

- SQLite: the FTS5 table ``nodes_fts`` (migration 0008), external content over
  ``nodes.content`` with the ``trigram`` tokenizer, kept by triggers: each word is
  quoted as a phrase (``"`` doubled), so ``*``, ``NEAR``, ``-``, ``AND``, quotes are
  text. A trigram matches substrings (``grep``'s sense), CJK included; a word shorter
  than three characters has no trigram, so a query holding one is answered by
  ``LIKE`` over the nodes instead (correct, slower: a scan).
- PostgreSQL: ``to_tsvector('simple', content) @@ plainto_tsquery('simple', ...)``
  (the GIN index of migration 0008) finds the nodes holding the words as whole words,
  then ``ILIKE`` keeps those holding each word as typed (punctuation included). A
  query with CJK text (which the ``simple`` parser does not split into words), or of
  punctuation alone, is answered by ``ILIKE`` over the nodes instead (a scan).

Hits are newest first (creation order, ``pk`` descending), not ranked by relevance.
Trashed sessions and nodes in a trashed subtree are never found; disabled nodes
and pruned fragments are, marked. Whether a hit is on the session's trunk (the path
root -> HEAD) is read from the store's path cache.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from . import _dialect as dialect
from . import _queries as q
from .errors import InvalidOperationError
from .models import Role

__all__ = [
    "MAX_LIMIT",
    "MAX_QUERY_LENGTH",
    "SearchHit",
    "SearchQuery",
    "is_search_object",
    "parse_query",
]

#: The longest query taken (characters).
MAX_QUERY_LENGTH = 200
#: The most hits one search returns.
MAX_LIMIT = 500
#: Characters of context on each side of the first match in a snippet.
SNIPPET_CONTEXT = 60
_WORDLIKE = re.compile(r"\w")
#: The shortest word the trigram index can find.
_TRIGRAM = 3

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\uff00-\uffef]"
)


def is_search_object(name: str | None) -> bool:
    """Whether a database object is the search index's (not described in
    ``mnemosyne._schema``): for schema comparisons to leave out."""
    return name is not None and (name.startswith("nodes_fts") or name == "ix_nodes_content_search")


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A node whose content matched, and where it is."""

    node_id: str
    session_id: str
    role: Role
    name: str | None
    snippet: str
    """The content around the first match (``…`` where it was cut)."""
    matches: tuple[tuple[int, int], ...]
    """Where the query's words are in ``snippet``: ``(start, end)`` offsets."""
    on_trunk: bool
    """On the path root -> HEAD of its session (else on a side branch or a fragment)."""
    enabled: bool
    created_at: datetime

    def as_dict(self) -> dict[str, Any]:
        """The hit as a JSON-ready mapping (the CLI's and the API's shape)."""
        return {
            "node_id": self.node_id,
            "session_id": self.session_id,
            "role": self.role,
            "name": self.name,
            "snippet": self.snippet,
            "matches": [list(span) for span in self.matches],
            "on_trunk": self.on_trunk,
            "enabled": self.enabled,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class SearchQuery:
    """A checked query: its words, and whether the index can answer it."""

    text: str
    words: tuple[str, ...]
    has_cjk: bool
    has_short_word: bool


def parse_query(text: str) -> SearchQuery:
    """The words of a user's query.

    Raises:
        InvalidOperationError: no words, or longer than :data:`MAX_QUERY_LENGTH`.
    """
    if not isinstance(text, str):
        raise InvalidOperationError(f"a search query is text, not {type(text).__name__}")
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidOperationError(
            f"a search query is at most {MAX_QUERY_LENGTH} characters (this one has {len(text)})"
        )
    if "\x00" in text:
        raise InvalidOperationError("a search query holds no NUL character")
    words = tuple(dict.fromkeys(text.split()))
    if not words:
        raise InvalidOperationError("a search query needs at least one word")
    return SearchQuery(
        text,
        words,
        has_cjk=bool(_CJK.search(text)),
        has_short_word=any(len(word) < _TRIGRAM for word in words),
    )


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidOperationError(f"a search limit is from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def _like_pattern(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _fts_phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


_COLUMNS = "n.pk, n.id, s.id, n.role, n.name, n.content, n.enabled, n.created_at, n.session_pk"


def matching_rows(
    conn: Connection,
    query: SearchQuery,
    *,
    session_pk: int | None,
    role: str | None,
    limit: int,
) -> list[tuple[Any, ...]]:
    """Rows ``(pk, id, session id, role, name, content, enabled, created_at,
    session_pk)`` of nodes of live sessions matching ``query``, newest first."""
    p = dialect.param(conn)
    sqlite = conn.dialect.name == "sqlite"
    params: list[Any] = []
    if sqlite and not query.has_short_word:
        source = "nodes_fts f JOIN nodes n ON n.pk = f.rowid"
        where = [f"nodes_fts MATCH {p}"]
        params.append(" ".join(_fts_phrase(word) for word in query.words))
        order = "f.rowid DESC"
    else:
        source = "nodes n"
        where = []
        if not sqlite and not query.has_cjk and any(_WORDLIKE.search(w) for w in query.words):
            # the index finds the words; the ILIKEs below keep the query's punctuation
            where.append(f"to_tsvector('simple', n.content) @@ plainto_tsquery('simple', {p})")
            params.append(" ".join(query.words))
        like = "LIKE" if sqlite else "ILIKE"
        where.extend(f"n.content {like} {p} ESCAPE '\\'" for _ in query.words)
        params.extend(_like_pattern(word) for word in query.words)
        order = "n.pk DESC"
    where.append("s.trashed_at IS NULL")
    if session_pk is not None:
        where.append(f"n.session_pk = {p}")
        params.append(session_pk)
    if role is not None:
        where.append(f"n.role = {p}")
        params.append(role)
    sql = (
        f"SELECT {_COLUMNS} FROM {source} JOIN sessions s ON s.pk = n.session_pk"
        f" WHERE {' AND '.join(where)} ORDER BY {order} LIMIT {int(limit)}"
    )
    return _fetch(conn, sql, params)


# CROSS JOIN: SQLite then reads the sessions first and each one's detached tops by
# ix_nodes_children (else it scans every node); the walk down uses that index too.
_TRASHED = """WITH RECURSIVE below(session_pk, pk) AS (
    SELECT n.session_pk, n.pk FROM sessions s CROSS JOIN nodes n
    WHERE n.session_pk = s.pk AND n.parent_pk IS NULL AND n.detached = 'trash'
    AND s.trashed_at IS NULL{scope}
    UNION ALL
    SELECT c.session_pk, c.pk FROM below JOIN nodes c
    ON c.session_pk = below.session_pk AND c.parent_pk = below.pk
)
SELECT pk FROM below"""


def trashed_keys(conn: Connection, session_pk: int | None) -> set[int]:
    """The pks of every node in a trashed subtree (of one session, or of all)."""
    p = dialect.param(conn)
    scope = f" AND s.pk = {p}" if session_pk is not None else ""
    rows = _fetch(conn, _TRASHED.format(scope=scope), [] if session_pk is None else [session_pk])
    return {row[0] for row in rows}


def _fetch(conn: Connection, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, tuple(params))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def snippet(content: str, words: Sequence[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The content around the first of ``words`` it holds, and where each word is in
    it (case-insensitive). Found in the text itself, not in a lowered copy: lowering
    may lengthen a character (``İ``), which would shift every offset after it."""
    patterns = [re.compile(re.escape(word), re.IGNORECASE) for word in words if word]
    found = [m.start() for m in (p.search(content) for p in patterns) if m is not None]
    first = min(found, default=0)
    start = max(0, first - SNIPPET_CONTEXT)
    end = min(len(content), first + SNIPPET_CONTEXT * 2)
    prefix = "…" if start > 0 else ""
    text = prefix + content[start:end] + ("…" if end < len(content) else "")
    matches = [(m.start(), m.end()) for p in patterns for m in p.finditer(text)]
    return text, tuple(sorted(matches))


def hit_from_row(row: Sequence[Any], words: Sequence[str], trunk: frozenset[int]) -> SearchHit:
    pk, node_id, session_id, role, name, content, enabled, created_at, _ = row
    text, matches = snippet(content, words)
    return SearchHit(
        node_id,
        session_id,
        role,
        name,
        text,
        matches,
        pk in trunk,
        bool(enabled),
        q.timestamp(created_at),
    )
