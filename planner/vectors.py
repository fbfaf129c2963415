"""Lore found by meaning: one Chroma collection per lorebook, kept in step with the book.

:class:`LoreIndex` embeds each enabled entry of a book (its comment, its keys and its
content, see :func:`entry_text`) into the book's collection, and finds the entries
nearest to a few texts (the planner's queries) across books::

    index = LoreIndex(data_dir / "lore-index")          # embedded Chroma on disk
    index.sync(book)                                      # only new/changed entries are embedded
    hits = index.query([book], ["what howls in the woods?"], n=5, max_distance=0.6)

Storage is an embedded persistent Chroma (``path``) or a Chroma server (``url``), always
with Chroma's telemetry off. A collection is named after its book (:func:`collection_name`:
a slug of the name plus a short hash, within Chroma's naming rules) and records the
embedding function (registered with Chroma, see :mod:`planner._embeddings`), so any Chroma
client reopens it and embeds with the same model. Each entry is stored under the id
``"<book>:<uid>"`` with metadata ``book``, ``uid`` and ``hash`` (of the embedded text):
:meth:`LoreIndex.sync` re-embeds only entries whose text changed and deletes entries
the book no longer has (or that are now disabled). A collection built by another model
is rebuilt.

Distances are cosine distances (0 = same direction, 2 = opposite);
``similarity = 1 - distance``. The default embedder is the local WordLlama model
(:class:`LocalEmbeddings`, installed with Clotho); it cuts a text at 512 tokens, so an
entry's comment and keys, which come first, always count.

Every failure of Chroma or of the embedding model raises
:class:`~planner.errors.RetrievalError` naming the collection or the model.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import chromadb
import httpx
from chromadb.api import ClientAPI
from chromadb.api.models.Collection import Collection
from chromadb.api.types import Documents, EmbeddingFunction, Where
from chromadb.config import Settings
from chromadb.errors import ChromaError, NotFoundError

from ._embeddings import LOCAL_MODEL, LiteLLMEmbeddings, LocalEmbeddings, local_model_path
from .errors import RetrievalError
from .lorebook import Entry, Lorebook

__all__ = [
    "LOCAL_MODEL",
    "LiteLLMEmbeddings",
    "LocalEmbeddings",
    "LoreIndex",
    "SyncReport",
    "VectorHit",
    "collection_name",
    "entry_id",
    "entry_text",
    "local_model_path",
    "text_hash",
]

_BATCH = 256
"""Entries embedded and written per Chroma call during a sync."""


_LATIN = str.maketrans(
    {
        "Æ": "AE",
        "æ": "ae",
        "Ø": "O",
        "ø": "o",
        "Œ": "OE",
        "œ": "oe",
        "ß": "ss",
        "Þ": "Th",
        "þ": "th",
        "Ð": "D",
        "ð": "d",
        "Đ": "D",
        "đ": "d",
        "Ł": "L",
        "ł": "l",
    }
)
"""Latin letters that Unicode does not decompose into ASCII ones."""


def collection_name(book_name: str) -> str:
    """The Chroma collection that holds a book: ``lore-<slug>-<hash>``.

    The slug is the name in lower-case ASCII letters, digits and dashes (at most 40), the
    hash the first 10 hex digits of the name's SHA-256, so two names with the same slug
    get two collections. The result (at most 56 characters, starting and ending with a
    letter or digit, no ``..``) is valid under both of Chroma's rules (3-63 characters
    for the Python API, 3-512 for the Rust one).

    Args:
        book_name: The lorebook's name, any text.

    Returns:
        The collection name.
    """
    folded = book_name.translate(_LATIN).lower()
    ascii_name = unicodedata.normalize("NFKD", folded).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name).strip("-")[:40].strip("-")
    digest = hashlib.sha256(book_name.encode("utf-8")).hexdigest()[:10]
    return f"lore-{slug}-{digest}" if slug else f"lore-{digest}"


def entry_id(book_name: str, uid: int) -> str:
    """The id of an entry in its collection: ``"<book>:<uid>"``."""
    return f"{book_name}:{uid}"


_REGEX_KEY = re.compile(r"^/.+/[a-z]*$", re.DOTALL)


def entry_text(entry: Entry) -> str:
    """The text embedded for an entry: its comment, its keys, then its content.

    Keys written as regular expressions (``/shadow(fang)?s/i``) are left out: they are
    patterns, not words.

    Args:
        entry: The lore entry.

    Returns:
        The lines that are not empty, joined by newlines (``""`` if all are).
    """
    keys = [key.strip() for key in entry.keys if key.strip() and not _REGEX_KEY.match(key.strip())]
    parts = [entry.comment.strip(), ", ".join(keys), entry.content.strip()]
    return "\n".join(part for part in parts if part)


def text_hash(text: str) -> str:
    """The SHA-256 (hex) of an embedded text, stored to tell a changed entry."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class VectorHit:
    """One entry found by meaning.

    Attributes:
        id: ``"<book>:<uid>"``.
        book: The lorebook's name.
        uid: The entry's uid in that book.
        distance: Cosine distance to the nearest query (0 best, 2 worst).
        query: The query text that came nearest.
    """

    id: str
    book: str
    uid: int
    distance: float
    query: str

    @property
    def similarity(self) -> float:
        """Cosine similarity, ``1 - distance`` (1 best)."""
        return 1.0 - self.distance

    def as_dict(self) -> dict[str, Any]:
        """The hit as plain data (for traces)."""
        return {
            "id": self.id,
            "book": self.book,
            "uid": self.uid,
            "distance": round(self.distance, 4),
            "similarity": round(self.similarity, 4),
            "query": self.query,
        }


@dataclass(frozen=True)
class SyncReport:
    """What :meth:`LoreIndex.sync` did to a book's collection.

    Attributes:
        book: The lorebook's name.
        collection: Its Chroma collection.
        added: Entries embedded for the first time.
        updated: Entries whose text changed, embedded again.
        unchanged: Entries already there with the same text (not embedded).
        removed: Entries deleted (gone from the book, disabled, or now empty).
        skipped: Entries of the book not indexed (disabled, or with no text).
        rebuilt: The collection had been built by another embedding model and was dropped.
    """

    book: str
    collection: str
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    rebuilt: bool = False

    @property
    def embedded(self) -> int:
        """Entries embedded by this sync (added + updated)."""
        return self.added + self.updated


class LoreIndex:
    """The lore of several books in Chroma, one collection per book, searched by meaning.

    Nothing is opened or loaded until the first :meth:`sync` or :meth:`query`: Chroma's
    client then, the embedding model at the first embedding (once per process).
    Not safe to share between threads.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        url: str | None = None,
        headers: dict[str, str] | None = None,
        embedder: EmbeddingFunction[Documents] | None = None,
    ) -> None:
        """Name where the index lives and how it embeds; nothing is opened yet.

        Args:
            path: The folder of an embedded persistent Chroma (created if missing).
            url: A Chroma server instead (``http://127.0.0.1:8000``; port 8000 when the
                URL has none, 443 for ``https``).
            headers: HTTP headers for the server (an auth token...).
            embedder: The embedding function; default :class:`LocalEmbeddings`. Any Chroma
                embedding function registered with Chroma works; one with an ``identity``
                attribute (as both of Clotho's have) lets a change of model be noticed.

        Raises:
            RetrievalError: neither or both of ``path`` and ``url`` are given, or the
                URL is not one.
        """
        if (path is None) == (url is None):
            raise RetrievalError("a lore index needs either a folder (path) or a Chroma server URL")
        self.path = Path(path) if path is not None else None
        self.url = url
        self._headers = dict(headers or {})
        if url is not None:
            self._server = _parse_url(url)
        self.embedder: EmbeddingFunction[Documents] = embedder or LocalEmbeddings()
        self._chroma: ClientAPI | None = None
        self._collections: dict[str, Collection] = {}

    @property
    def where(self) -> str:
        """Where the index lives (the folder or the server URL), for messages."""
        return str(self.path) if self.path is not None else str(self.url)

    @property
    def identity(self) -> str:
        """The embedding model's identity, recorded in each collection's metadata."""
        identity = getattr(self.embedder, "identity", None)
        if isinstance(identity, str):
            return identity
        return f"{self.embedder.name()}:{sorted(self.embedder.get_config().items())}"

    def _client(self) -> ClientAPI:
        if self._chroma is None:
            settings = Settings(anonymized_telemetry=False)
            with self._errors(f"Chroma at {self.where}"):
                if self.path is not None:
                    self.path.mkdir(parents=True, exist_ok=True)
                    self._chroma = chromadb.PersistentClient(path=str(self.path), settings=settings)
                else:
                    host, port, ssl = self._server
                    self._chroma = chromadb.HttpClient(
                        host=host, port=port, ssl=ssl, headers=self._headers, settings=settings
                    )
        return self._chroma

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except RetrievalError:
            raise
        except (
            ChromaError,
            ValueError,
            TypeError,
            KeyError,
            httpx.HTTPError,
            sqlite3.Error,
            OSError,
        ) as error:
            raise RetrievalError(f"{what}: {type(error).__name__}: {error}") from error

    def _what(self, book_name: str) -> str:
        return (
            f"Chroma collection {collection_name(book_name)} (book {book_name!r}) at {self.where}"
        )

    def _open(self, book_name: str, *, create: bool) -> tuple[Collection | None, bool]:
        """The book's collection, and whether an old one (of another model) was dropped.

        With ``create`` a missing collection is made, one built by another model is
        replaced; without, a missing one is ``None`` and another model's is an error.
        """
        name = collection_name(book_name)
        cached = self._collections.get(name)
        if cached is not None:
            return cached, False
        client = self._client()
        what = self._what(book_name)
        rebuilt = False
        with self._errors(what):
            try:
                existing = client.get_collection(name, embedding_function=None)
            except NotFoundError:
                existing = None
            if existing is None and not create:
                return None, False
            if existing is not None and (existing.metadata or {}).get("embedder") != self.identity:
                recorded = (existing.metadata or {}).get("embedder")
                if not create:
                    raise RetrievalError(
                        f"{what}: indexed with {recorded}, not {self.identity}; sync the book again"
                    )
                client.delete_collection(name)
                rebuilt = True
            collection = client.get_or_create_collection(
                name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={"book": book_name, "embedder": self.identity},
                # chromadb asks for an EmbeddingFunction[Documents | Images], which no
                # text embedder is (its own default needs the same ignore there)
                embedding_function=self.embedder,  # type: ignore[arg-type]
            )
        self._collections[name] = collection
        return collection, rebuilt

    def sync(self, book: Lorebook) -> SyncReport:
        """Bring a book's collection in step with the book.

        Enabled entries with some text are upserted (embedded only if their text is new or
        changed: the stored ``hash`` is compared first, so syncing an unchanged book costs
        one read of the collection's metadata); entries no longer in the book, or now
        disabled or empty, are deleted.

        Args:
            book: The lorebook.

        Returns:
            What was added, updated, left alone and removed.

        Raises:
            RetrievalError: Chroma or the embedding model failed (the message names the
                collection or the model); entries written before the failure stay.
        """
        collection, rebuilt = self._open(book.name, create=True)
        assert collection is not None
        what = self._what(book.name)
        wanted: dict[str, tuple[Entry, str, str]] = {}
        skipped = 0
        for entry in book.entries:
            text = entry_text(entry)
            if entry.disable or not text:
                skipped += 1
                continue
            wanted[entry_id(book.name, entry.uid)] = (entry, text, text_hash(text))
        with self._errors(what):
            stored = collection.get(include=["metadatas"])
        stored_hash = {
            id_: (metadata or {}).get("hash")
            for id_, metadata in zip(stored["ids"], stored["metadatas"] or [], strict=False)
        }
        changed = [id_ for id_, (_, _, digest) in wanted.items() if stored_hash.get(id_) != digest]
        gone = [id_ for id_ in stored_hash if id_ not in wanted]
        for start in range(0, len(changed), _BATCH):
            ids = changed[start : start + _BATCH]
            documents = [wanted[id_][1] for id_ in ids]
            with self._errors(f"embedding model {self.identity}"):
                vectors = self.embedder(documents)
            with self._errors(what):
                collection.upsert(
                    ids=ids,
                    embeddings=vectors,
                    documents=documents,
                    metadatas=[
                        {"book": book.name, "uid": wanted[id_][0].uid, "hash": wanted[id_][2]}
                        for id_ in ids
                    ],
                )
        for start in range(0, len(gone), _BATCH):
            with self._errors(what):
                collection.delete(ids=gone[start : start + _BATCH])
        added = sum(1 for id_ in changed if id_ not in stored_hash)
        return SyncReport(
            book=book.name,
            collection=collection.name,
            added=added,
            updated=len(changed) - added,
            unchanged=len(wanted) - len(changed),
            removed=len(gone),
            skipped=skipped,
            rebuilt=rebuilt,
        )

    def drop(self, book_name: str) -> bool:
        """Delete a book's collection.

        Args:
            book_name: The lorebook's name.

        Returns:
            Whether there was one.

        Raises:
            RetrievalError: Chroma failed.
        """
        name = collection_name(book_name)
        self._collections.pop(name, None)
        client = self._client()
        with self._errors(self._what(book_name)):
            try:
                client.delete_collection(name)
            except NotFoundError:
                return False
        return True

    def count(self, book_name: str) -> int:
        """How many entries of a book are indexed (0 if the book is not).

        Raises:
            RetrievalError: Chroma failed.
        """
        collection, _ = self._open(book_name, create=False)
        if collection is None:
            return 0
        with self._errors(self._what(book_name)):
            return collection.count()

    def query(
        self,
        books: Iterable[Lorebook | str],
        texts: str | Sequence[str],
        n: int = 5,
        max_distance: float | None = None,
        only: Mapping[str, Set[int] | Sequence[int]] | None = None,
    ) -> list[VectorHit]:
        """The entries nearest to ``texts`` in ``books``, best first.

        The texts are embedded once; each book's collection returns its ``n`` nearest
        entries for each text; the hits are merged, one per entry (its nearest text),
        filtered by ``max_distance``, sorted by distance (then book, uid) and cut to ``n``.

        Args:
            books: Lorebooks, or their names; each must have been synced.
            texts: What to look for (one text or several; empty ones are ignored).
            n: How many entries to return at most.
            max_distance: Keep only hits at most this cosine distance away (``0.6`` is
                a similarity of 0.4); ``None`` keeps all.
            only: Book name -> the uids of its entries that may be found (the others
                are not looked at); ``None``: every indexed entry. A book not named
                here is not searched.

        Returns:
            The hits, best first (empty if there is nothing to look for).

        Raises:
            RetrievalError: a book is not indexed (or was indexed with another model),
                Chroma failed, or the embedding model did (the message names it).
        """
        queries = [texts] if isinstance(texts, str) else list(texts)
        queries = [text for text in queries if text.strip()]
        names = list(
            dict.fromkeys(book.name if isinstance(book, Lorebook) else book for book in books)
        )
        if not queries or not names or n <= 0:
            return []
        collections = []
        for name in names:
            collection, _ = self._open(name, create=False)
            if collection is None:
                raise RetrievalError(f"{self._what(name)}: the book is not indexed; sync it first")
            collections.append(collection)
        with self._errors(f"embedding model {self.identity}"):
            vectors = self.embedder.embed_query(queries)
        best: dict[str, VectorHit] = {}
        for name, collection in zip(names, collections, strict=True):
            where: Where | None = None
            uids: list[str | int | float | bool] = []
            if only is not None:
                uids = sorted(set(only.get(name, ())))
                if not uids:
                    continue
                where = cast("Where", {"uid": {"$in": uids}})
            with self._errors(self._what(name)):
                size = collection.count()
                if size == 0:
                    continue
                result = collection.query(
                    query_embeddings=vectors,
                    n_results=min(n, size, len(uids) if where is not None else size),
                    where=where,
                    include=["metadatas", "distances"],
                )
            for position, text in enumerate(queries):
                ids = result["ids"][position]
                metadatas = (result["metadatas"] or [])[position]
                distances = (result["distances"] or [])[position]
                for id_, metadata, distance in zip(ids, metadatas, distances, strict=True):
                    if max_distance is not None and distance > max_distance:
                        continue
                    previous = best.get(id_)
                    if previous is None or distance < previous.distance:
                        best[id_] = VectorHit(
                            id=id_,
                            book=str((metadata or {}).get("book", name)),
                            uid=_uid(metadata, id_),
                            distance=float(distance),
                            query=text,
                        )
        ranked = sorted(best.values(), key=lambda hit: (hit.distance, hit.book, hit.uid))
        return ranked[:n]


def _uid(metadata: Mapping[str, object] | None, id_: str) -> int:
    """An indexed entry's uid: kept in its metadata (``uid``), else the tail of its id
    (``book:uid``)."""
    value = (metadata or {}).get("uid")
    return int(value) if isinstance(value, int | str) else int(id_.rpartition(":")[2])


def _parse_url(url: str) -> tuple[str, int, bool]:
    """``(host, port, ssl)`` of a Chroma server URL."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    try:
        port = parts.port
    except ValueError as error:
        raise RetrievalError(f"Chroma server URL {url!r}: {error}") from error
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RetrievalError(f"Chroma server URL {url!r}: expected http(s)://host[:port]")
    if parts.path not in ("", "/"):
        raise RetrievalError(f"Chroma server URL {url!r}: a path is not supported")
    ssl = parts.scheme == "https"
    return parts.hostname, port or (443 if ssl else 8000), ssl
