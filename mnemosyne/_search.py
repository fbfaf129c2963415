"""Full-text search over every node of every branch (:meth:`mnemosyne.Store.search`).

The query is a user's text, never search syntax: it is split on white space into
words, and a node matches when its content holds every word (case-insensitively).

- SQLite: the FTS5 table ``nodes_fts`` (migration 0008), external content over
  ``nodes.content`` with the ``trigram`` tokenizer. It is brought up to date lazily
  (migration 0009): no trigger indexes an insert; ``search_index.indexed_pk`` says
  how far it has got (every node with a key at or under it is indexed), and a search
  first indexes the nodes above it (:func:`catch_up`), in short write transactions
  of :data:`CATCH_UP_BATCH` nodes, each re-reading the watermark (two processes
  searching at once index once). Triggers keep the rows at or under the watermark
  (inserts there, by a redo or a key used again, updates, deletes); above it they do
  nothing. Each word of three characters or more is quoted as a phrase (``"``
  doubled), so ``*``, ``NEAR``, ``-``, ``AND``, quotes are text. A trigram matches
  substrings (``grep``'s sense), CJK included, folding case; a shorter word has no
  trigram: it is matched by ``LIKE`` (ASCII) or on the casefolded content (any other
  letter: ``LIKE`` folds only ASCII), over the index's hits for the longer words, or
  over the nodes (a scan) when every word is short.
- PostgreSQL: ``to_tsvector('simple', content) @@`` the words' lexemes (the GIN index
  of migration 0008) finds the nodes holding the words as whole words, then ``ILIKE``
  keeps those holding each word as typed (punctuation included). The lexemes are the
  ``simple`` parser's (``ts_debug``), of a hyphenated word its parts only: ``foo-bar``
  as a whole is not a lexeme of ``foo-bar-baz`` (:func:`_tsquery`). A
  query with CJK text (which the ``simple`` parser does not split into words), or of
  punctuation alone, is answered by ``ILIKE`` over the nodes instead (a scan).

Hits are newest first (creation order, ``pk`` descending), not ranked by relevance.
Trashed sessions and nodes in a trashed subtree are never found (left out in the
query); disabled nodes and pruned fragments are, marked. The filters
(:class:`SearchFilters`): a role, the trunk (the path root -> HEAD of each session),
the subtree under a node, a time span of creation. Whether a hit is on its
session's trunk is read from the store's path cache (a search of every session only
looks there: a path it walks is not kept, and pushes out none being played).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import Connection

from . import _dialect as dialect
from . import _queries as q
from .errors import InvalidOperationError
from .models import Role

__all__ = [
    "CATCH_UP_BATCH",
    "MAX_LIMIT",
    "MAX_QUERY_LENGTH",
    "SearchFilters",
    "SearchHit",
    "SearchQuery",
    "catch_up",
    "is_age",
    "is_search_object",
    "parse_moment",
    "parse_query",
    "register_sqlite_functions",
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
#: Nodes indexed per write transaction when a search catches the index up.
CATCH_UP_BATCH = 2000
_AGE = re.compile(r"(\d{1,6})([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

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

    @property
    def indexed_words(self) -> tuple[str, ...]:
        """The words the trigram index can find (three characters or more)."""
        return tuple(word for word in self.words if len(word) >= _TRIGRAM)

    @property
    def short_words(self) -> tuple[str, ...]:
        return tuple(word for word in self.words if len(word) < _TRIGRAM)


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Which nodes a search looks at, beyond the words (every one must hold)."""

    session_pk: int | None = None
    role: str | None = None
    trunk_keys: frozenset[int] | None = None
    """Only these nodes: the paths root -> HEAD of the sessions searched (read by the
    store, from its path cache as far as it holds them: faster than walking them in
    the query)."""
    under_pk: int | None = None
    """Only this node and the nodes below it (of ``session_pk``)."""
    since: datetime | None = None
    """Only nodes created at or after this moment."""
    until: datetime | None = None
    """Only nodes created before this moment."""


def parse_query(text: str) -> SearchQuery:
    """The words of a user's query.

    Raises:
        InvalidOperationError: no words, longer than :data:`MAX_QUERY_LENGTH`, a NUL
            character, or text that is not UTF-8 (a lone surrogate).
    """
    if not isinstance(text, str):
        raise InvalidOperationError(f"a search query is text, not {type(text).__name__}")
    if len(text) > MAX_QUERY_LENGTH:
        raise InvalidOperationError(
            f"a search query is at most {MAX_QUERY_LENGTH} characters (this one has {len(text)})"
        )
    if "\x00" in text:
        raise InvalidOperationError("a search query holds no NUL character")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate: a byte argv could not decode
        raise InvalidOperationError(
            f"a search query is UTF-8 text: {text[error.start : error.end]!r} is not"
        ) from None
    words = tuple(dict.fromkeys(text.split()))
    if not words:
        raise InvalidOperationError("a search query needs at least one word")
    return SearchQuery(text, words, has_cjk=bool(_CJK.search(text)))


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidOperationError(f"a search limit is from 1 to {MAX_LIMIT}, not {limit!r}")
    return limit


def is_age(text: str) -> bool:
    """Whether a moment's text is an age (``2d``: relative to now, so a search with it
    changes as time passes, not only with the session)."""
    return _AGE.fullmatch(text.strip()) is not None


def parse_moment(
    text: str, *, end: bool = False, now: datetime | None = None, what: str | None = None
) -> datetime:
    """A moment a search's ``since`` or ``until`` names: an ISO date (``2026-11-20``:
    its start, or with ``end`` its end, i.e. the next day's start), an ISO date and
    time (UTC unless it names a zone), or an age before ``now``: ``30m``, ``12h``,
    ``2d``, ``1w``.

    Raises:
        InvalidOperationError: none of those, or one outside the years 1 to 9999 (in
            UTC); the message names the text, after ``what`` (the parameter) if given.
    """
    lead = "" if what is None else f"{what}: "
    if not isinstance(text, str):
        raise InvalidOperationError(f"{lead}a moment is text, not {type(text).__name__}")
    value = text.strip()
    try:
        age = _AGE.fullmatch(value)
        if age is not None:
            unit = {_AGE_UNITS[age.group(2)]: int(age.group(1))}
            return (now or datetime.now(UTC)) - timedelta(**unit)
        if len(value) == len("2026-11-20"):
            moment = datetime.combine(date.fromisoformat(value), time(), tzinfo=UTC)
            return moment + timedelta(days=1) if end else moment
        moment = datetime.fromisoformat(value)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except ValueError:
        raise InvalidOperationError(
            f"{lead}{text!r} is not a moment: give an ISO date (2026-11-20), a date and time"
            " (2026-11-20T18:30, UTC unless a zone is named) or an age (30m, 12h, 2d, 1w)"
        ) from None
    except OverflowError:
        raise InvalidOperationError(
            f"{lead}{text!r} is out of range: a moment is between the years 1 and 9999 (UTC)"
        ) from None


def _like_pattern(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _fts_phrase(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def _casefold(text: str | None) -> str | None:
    return None if text is None else text.casefold()


def register_sqlite_functions(dbapi_connection: Any) -> None:
    """Give a new SQLite connection the search's SQL function ``clotho_casefold(text)``
    (Python's ``str.casefold``: SQLite's ``lower`` folds ASCII only); called once per
    connection, by the engine's ``connect`` event."""
    dbapi_connection.create_function("clotho_casefold", 1, _casefold, deterministic=True)


def _short_word_sql(word: str, p: str) -> tuple[str, str]:
    """SQLite's condition for a word under three characters, and its parameter:
    ``LIKE`` (which folds ASCII letters only) for an ASCII word, else the word found
    in the casefolded content."""
    if word.isascii():
        return f"n.content LIKE {p} ESCAPE '\\'", _like_pattern(word)
    return f"instr(clotho_casefold(n.content), {p}) > 0", word.casefold()


#: The PostgreSQL parser's tokens for a hyphenated word as a whole (``foo-bar``), which
#: a longer one (``foo-bar-baz``) does not hold; their parts are tokens too.
_COMPOUNDS = ("asciihword", "hword", "numhword")


def _tsquery(conn: Connection, words: Sequence[str]) -> str | None:
    """PostgreSQL: the tsquery (as text) that every node holding ``words`` as whole
    words matches, for the GIN index to narrow the search: the lexemes of the words
    as the ``simple`` configuration parses them, but of a hyphenated word its parts
    only (``foo-bar`` is in ``foo-bar-baz`` as ``foo`` and ``bar``, not as itself).
    ``None`` when they have no lexeme (punctuation alone)."""
    if not any(_WORDLIKE.search(word) for word in words):
        return None
    p = dialect.param(conn)
    rows = _fetch(conn, f"SELECT alias, lexemes FROM ts_debug('simple', {p})", [" ".join(words)])
    lexemes = dict.fromkeys(
        lexeme for alias, found in rows if alias not in _COMPOUNDS for lexeme in found or ()
    )
    if not lexemes:
        return None
    quoted = ("'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'" for lexeme in lexemes)
    return " & ".join(quoted)


def _stored_time(conn: Connection, moment: datetime) -> Any:
    """A moment as the database compares it with ``created_at`` (SQLite: its text)."""
    if conn.dialect.name == "sqlite":  # the year in four digits, as stored (not strftime's)
        return moment.astimezone(UTC).replace(tzinfo=None).isoformat(" ", "microseconds")
    return moment


_COLUMNS = "n.pk, n.id, s.id, n.role, n.name, n.content, n.enabled, n.created_at, n.session_pk"

# The nodes of trashed subtrees. CROSS JOIN: SQLite then reads the sessions first and
# each one's detached tops by ix_nodes_children (else it scans every node); the walk
# down uses that index too.
_TRASHED = """trashed(session_pk, pk) AS (
    SELECT n.session_pk, n.pk FROM sessions s CROSS JOIN nodes n
    WHERE n.session_pk = s.pk AND n.parent_pk IS NULL AND n.detached = 'trash'
    AND s.trashed_at IS NULL{scope}
    UNION ALL
    SELECT c.session_pk, c.pk FROM trashed JOIN nodes c
    ON c.session_pk = trashed.session_pk AND c.parent_pk = trashed.pk
)"""
# A node and every node below it.
_BELOW = """below(pk) AS (
    SELECT n.pk FROM nodes n WHERE n.pk = {p}
    UNION ALL
    SELECT c.pk FROM below JOIN nodes c ON c.session_pk = {p} AND c.parent_pk = below.pk
)"""


def matching_rows(
    conn: Connection, query: SearchQuery, filters: SearchFilters, *, limit: int
) -> list[tuple[Any, ...]]:
    """Rows ``(pk, id, session id, role, name, content, enabled, created_at,
    session_pk)`` of nodes of live sessions, out of the trash, matching ``query`` and
    ``filters``, newest first."""
    p = dialect.param(conn)
    sqlite = conn.dialect.name == "sqlite"
    scope = f" AND s.pk = {p}" if filters.session_pk is not None else ""
    scoped = [filters.session_pk] if filters.session_pk is not None else []
    ctes = [_TRASHED.format(scope=scope)]
    params: list[Any] = [*scoped]
    where = ["s.trashed_at IS NULL", "n.pk NOT IN (SELECT pk FROM trashed)"]
    if filters.under_pk is not None:
        ctes.append(_BELOW.format(p=p))
        params += [filters.under_pk, filters.session_pk]
        where.append("n.pk IN (SELECT pk FROM below)")
    indexed = query.indexed_words
    if sqlite and indexed:
        source = "nodes_fts f JOIN nodes n ON n.pk = f.rowid"
        where.append(f"nodes_fts MATCH {p}")
        params.append(" ".join(_fts_phrase(word) for word in indexed))
        order = "f.rowid DESC"
    else:
        source = "nodes n"
        order = "n.pk DESC"
    if sqlite:
        for word in query.short_words:
            condition, param = _short_word_sql(word, p)
            where.append(condition)
            params.append(param)
    else:
        terms = None if query.has_cjk else _tsquery(conn, query.words)
        if terms is not None:
            # the index finds the words; the ILIKEs below keep the query's punctuation
            where.append(f"to_tsvector('simple', n.content) @@ CAST({p} AS tsquery)")
            params.append(terms)
        where.extend(f"n.content ILIKE {p} ESCAPE '\\'" for _ in query.words)
        params.extend(_like_pattern(word) for word in query.words)
    if filters.session_pk is not None:
        where.append(f"n.session_pk = {p}")
        params.append(filters.session_pk)
    if filters.trunk_keys is not None:
        if sqlite:
            where.append(f"n.pk IN (SELECT value FROM json_each({p}))")
            params.append(json.dumps(list(filters.trunk_keys)))
        else:
            where.append(f"n.pk = ANY({p})")
            params.append(list(filters.trunk_keys))
    if filters.role is not None:
        where.append(f"n.role = {p}")
        params.append(filters.role)
    if filters.since is not None:
        where.append(f"n.created_at >= {p}")
        params.append(_stored_time(conn, filters.since))
    if filters.until is not None:
        where.append(f"n.created_at < {p}")
        params.append(_stored_time(conn, filters.until))
    sql = (
        f"WITH RECURSIVE {', '.join(ctes)}"
        f" SELECT {_COLUMNS} FROM {source} JOIN sessions s ON s.pk = n.session_pk"
        f" WHERE {' AND '.join(where)} ORDER BY {order} LIMIT {int(limit)}"
    )
    return _fetch(conn, sql, params)


# -- the lazy index (SQLite) ---------------------------------------------------------


def _unindexed(conn: Connection) -> bool:
    [(indexed, largest)] = _fetch(
        conn, "SELECT (SELECT indexed_pk FROM search_index), (SELECT max(pk) FROM nodes)", []
    )
    return indexed is not None and (largest or 0) > indexed


def _index_batch(conn: Connection) -> tuple[int, bool]:
    """In a write transaction: index the next :data:`CATCH_UP_BATCH` nodes above the
    watermark and move it past them; how many, and whether more wait."""
    [(indexed, largest)] = _fetch(
        conn, "SELECT (SELECT indexed_pk FROM search_index), (SELECT max(pk) FROM nodes)", []
    )
    if indexed is None or (largest or 0) <= indexed:
        return 0, False  # another search got here first
    [(upto, count)] = _fetch(
        conn,
        "SELECT max(pk), count(*) FROM (SELECT pk FROM nodes WHERE pk > ? ORDER BY pk LIMIT ?)",
        [indexed, CATCH_UP_BATCH],
    )
    cursor = conn.connection.cursor()
    try:
        cursor.execute(
            "INSERT INTO nodes_fts(rowid, content)"
            " SELECT pk, content FROM nodes WHERE pk > ? AND pk <= ?",
            (indexed, upto),
        )
        cursor.execute("UPDATE search_index SET indexed_pk = ?", (upto,))
    finally:
        cursor.close()
    return count, upto < largest


def catch_up(
    read: Callable[[], AbstractContextManager[Connection]],
    write: Callable[[], AbstractContextManager[Connection]],
) -> int:
    """Index the nodes written since the last search (SQLite: the caller asks only
    there; on PostgreSQL ``search_index`` is empty and this does nothing): a read sees
    whether any wait, then write transactions of :data:`CATCH_UP_BATCH` nodes each
    (short: writers get in between). How many were indexed (here; another process
    may have done some)."""
    with read() as conn:
        if not _unindexed(conn):
            return 0
    done, more = 0, True
    while more:
        with write() as conn:
            count, more = _index_batch(conn)
        done += count
    return done


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
