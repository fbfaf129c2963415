"""A session's lore: its lorebooks and character card (kept in the store), its planner.

Lorebooks are kept as World Info JSON documents with the session (a card's embedded
book converted the way SillyTavern converts it, the original kept inside), so every
process plays a session with the same lore whatever happens to the files; the card
is kept as the JSON it carried. A campaign's books and card are copied into each new
session; ``clotho import lorebook|card`` adds them to the current one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clotho.errors import UsageError
from mnemosyne import jsontext

if TYPE_CHECKING:
    from clotho.formats.campaign import Campaign
    from clotho.settings import Settings
    from mnemosyne import Node, Session, SessionTransaction, Store
    from orchestrator import Character
    from planner import PlanCall, Planner
    from planner.cards import Card
    from planner.filekinds import FileKind
    from planner.lorebook import Lorebook
    from planner.vectors import LoreIndex

__all__ = [
    "AVATAR",
    "AVATAR_KEY",
    "CARD",
    "LOREBOOK",
    "LOREBOOK_OFF",
    "KeptBook",
    "campaign_documents",
    "card_character",
    "card_documents",
    "greet",
    "import_card",
    "import_lorebook",
    "keep_book",
    "keep_list_hints",
    "lore_index",
    "lorebooks_document",
    "read_card",
    "read_upload",
    "session_books",
    "session_card",
    "session_planner",
]

LOREBOOK = "lorebook"
#: A book switched off in the lore manager: a document of this kind named as the book
#: (its content ``{}``); the book stays with the session, untouched, and does not play.
LOREBOOK_OFF = "lorebook_off"
CARD = "card"
AVATAR = "avatar"
"""The kind of the document holding a character's picture (its card's), named by the
character: a member of the session's cast (:mod:`clotho.cast`)."""
AVATAR_KEY = "avatar"
"""The session metadata's key saying it has one (``true``), so that a list of sessions
can say so without reading each one's documents."""
#: Larger files are refused before they are read (a card PNG is well under this); the
#: largest tree file or chat :mod:`mnemosyne.jsontext` reads.
MAX_FILE_BYTES = jsontext.MAX_FILE_BYTES

log = logging.getLogger(__name__)


def read_upload(path: Path) -> bytes:
    """A file's bytes, or an error naming it."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: {size} bytes, more than the {MAX_FILE_BYTES} allowed")
        return path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot be read ({error.strerror or error})") from None


def _book_document(book: Lorebook) -> str:
    from planner.lorebook import dump_world_info

    return dump_world_info(book)


def card_documents(card: Card) -> list[tuple[str, str, str]]:
    """What a session keeps of a card: the card's JSON and its own book (a lorebook)."""
    documents = [(CARD, card.name, json.dumps(card.raw, ensure_ascii=False))]
    if card.book is not None:
        documents.append((LOREBOOK, card.book.name, _book_document(card.book)))
    return documents


@dataclass(frozen=True)
class KeptBook:
    """What became of a lorebook brought into a session (:func:`keep_book`)."""

    book: Lorebook
    """The book as the session keeps it (named apart if its name was taken)."""
    asked: str
    """The name it came with."""
    same_as: str | None = None
    """The session's book that already holds the same lore: nothing was stored."""
    same_switched_off: bool = False
    """That book is switched off (:data:`LOREBOOK_OFF`): the lore does not play."""

    @property
    def renamed(self) -> bool:
        """Another book had its name: it is kept under :attr:`book`'s name."""
        return self.same_as is None and self.book.name != self.asked

    def note(self) -> str:
        """A line for people: what was kept, if it is not what they would expect."""
        if self.same_as is not None:
            again = "the same book" if self.same_as == self.asked else f"the book {self.same_as!r}"
            off = " (switched off: switch it on to play it)" if self.same_switched_off else ""
            return (
                f"{self.asked!r} holds the same lore as {again} already in the session: "
                f"kept once{off}"
            )
        if self.renamed:
            return f"a different book is already named {self.asked!r}: kept as {self.book.name!r}"
        return ""


def keep_book(tx: SessionTransaction, book: Lorebook, *, replace: bool = False) -> KeptBook:
    """Store a lorebook with the session, once: a book with the same lore as one the
    session has (:meth:`planner.lorebook.Lorebook.same_lore`: the same file twice, or a
    card's own book and the file it came from) is not stored again, else every entry
    would reach the prompt twice; a different book whose name is taken is kept as
    ``"Name (2)"`` (``replace``: it replaces the book of that name instead)."""
    from planner.lorebook import load_world_info

    stored = {d.name: load_world_info(d.content, d.name) for d in tx.documents(LOREBOOK)}
    if replace and book.name in stored:
        tx.put_document(LOREBOOK, book.name, _book_document(book))
        return KeptBook(book, book.name)
    off = {d.name for d in tx.documents(LOREBOOK_OFF)}
    for name, other in stored.items():
        if other.same_lore(book):
            return KeptBook(other, book.name, same_as=name, same_switched_off=name in off)
    kept = book
    if book.name in stored:
        number = 2
        while f"{book.name} ({number})" in stored:
            number += 1
        kept = dataclasses.replace(book, name=f"{book.name} ({number})")
    tx.put_document(LOREBOOK, kept.name, _book_document(kept))
    return KeptBook(kept, book.name)


_KINDS = {"card": "a character card", "lorebook": "a World Info lorebook"}


def _misfiled(data: bytes, name: str, wanted: FileKind) -> str | None:
    """What to say when a file refused as ``wanted`` is the other kind of lore file (a
    card given as a lorebook, or the reverse); ``None`` when it is neither."""
    from planner.filekinds import file_kind

    kind = file_kind(data)
    if kind is None or kind == wanted:
        return None
    return (
        f"{name}: this is {_KINDS[kind]}, not {_KINDS[wanted].replace('World Info ', '')}: "
        f"import it with `clotho import {kind} FILE`"
    )


def read_card(data: bytes, filename: str) -> tuple[Card, bytes | None]:
    """The character card a file holds (PNG or JSON, V1/V2/V3), and its picture (the
    PNG's bytes; ``None`` for JSON): how every way a card comes in reads it.

    Raises:
        CardError: the file is not a card (a lorebook's message says how to import it as
            one), or a field of it is wrong (named).
    """
    from planner.cards import load_card
    from planner.errors import CardError

    try:
        card = load_card(data, filename)
    except CardError as error:
        hint = _misfiled(data, filename, "card")
        if hint is not None:
            raise CardError(hint) from error
        raise
    return card, data if data.startswith(b"\x89PNG") else None


def import_lorebook(
    store: Store,
    session_id: str,
    data: bytes,
    name: str,
    *,
    replace: bool = False,
    expected_version: int | None = None,
) -> tuple[KeptBook, Session]:
    """Keep a World Info file (its bytes) with a session as the book ``name``, once
    (:func:`keep_book`: the same lore twice is kept once, a different book of a taken
    name is named apart, or replaces it with ``replace``). Returns what was kept and the
    session after.

    Raises:
        LorebookError: the file is not a valid World Info book (the field is named), or
            it is a character card (the message says to import it as one).
        ConflictError: the session is not at ``expected_version`` (nothing changes).
    """
    from planner.errors import LorebookError
    from planner.lorebook import load_world_info

    try:
        book = load_world_info(data, name)
    except LorebookError as error:
        hint = _misfiled(data, name, "lorebook")
        if hint is not None:
            raise LorebookError(hint) from error
        raise
    with store.transaction(session_id, expected_version=expected_version) as tx:
        kept = keep_book(tx, book, replace=replace)
    return kept, tx.session


def import_card(
    store: Store,
    session_id: str,
    data: bytes,
    filename: str,
    *,
    expected_version: int | None = None,
) -> tuple[Card, list[Node], Session]:
    """Make a character card the session's character (its book becomes a lorebook).

    A session with no messages yet starts with the card's greeting, its alternate
    greetings as the greeting's alternatives (swipes), as SillyTavern starts a chat
    (:func:`greet`). One transaction: a card that cannot be read
    changes nothing. (A new session from a card: :func:`clotho.sessions.card_session`.)

    The card's book is kept once (:func:`keep_book`): the same lore already in the
    session (its World Info file imported first) is not added again, and a warning says
    so; a book of the card's book's name is replaced by it.

    Raises:
        CardError: the file is not a card (a lorebook's message says to import it as
            one), or a field of it is wrong (named); the session has a cast of several
            (:mod:`clotho.cast` adds and removes its members).
        ConflictError: the session is not at ``expected_version`` (nothing changes).
    """
    from planner.errors import CardError

    card, _ = read_card(data, filename)
    with store.transaction(session_id, expected_version=expected_version) as tx:
        cards = tx.documents(CARD)
        if len(cards) > 1:
            raise CardError(
                f"this session has a cast of {len(cards)} ({', '.join(d.name for d in cards)}): "
                "`clotho cast add` adds a character, `clotho cast remove` takes one out"
            )
        for document in cards:
            if document.name != card.name:
                tx.remove_document(CARD, document.name)
                if any(picture.name == document.name for picture in tx.documents(AVATAR)):
                    tx.remove_document(AVATAR, document.name)  # its picture, not the new one's
        for kind, name, content in card_documents(card):
            if kind == CARD:
                tx.put_document(kind, name, content)
        kept = keep_book(tx, card.book, replace=True) if card.book is not None else None
        added = greet(tx, card)
        keep_list_hints(tx)
    if kept is not None and kept.same_as is not None:
        log.warning("the card's book %s", kept.note())
    return card, added, tx.session


def greet(tx: SessionTransaction, card: Card | None = None) -> list[Node]:
    """An empty session's first message: the card's greeting, its alternate greetings as
    its alternatives (swipes), HEAD on the greeting; the one place a session starts
    from a card. ``card`` defaults to the session's own (its character's card: the
    cast's first). A session that has messages, or a card with no greeting, is left as
    it is (returns ``[]``)."""
    if tx.head_id is not None:
        return []
    if card is None:
        from planner.cards import parse_card

        found = tx.documents(CARD)
        if not found:
            return []
        card = parse_card(jsontext.loads(found[0].content, jsontext.DOCUMENT), found[0].name)
    greetings = [text for text in (card.first_mes, *card.alternate_greetings) if text.strip()]
    if not greetings:
        return []
    first = tx.append("assistant", greetings[0], name=card.name)
    added = [first, *(tx.add_sibling(first.id, text, name=card.name) for text in greetings[1:])]
    tx.checkout(first.id)
    return added


def keep_list_hints(tx: SessionTransaction, removed: str | None = None) -> None:
    """Keep what a list of sessions reads of the session without its documents (its
    metadata: the character's name, whether it has a picture) true to its character,
    the cast's first member, in the transaction that changed its cards. With no card
    left, a name hint of the card just ``removed`` goes (a chat imported without a card
    keeps the name it gave), and so does the picture flag once no picture is left."""
    from clotho.formats.names import NAMES

    cards = tx.documents(CARD)
    pictures = {document.name for document in tx.documents(AVATAR)}
    metadata = tx.metadata
    given = metadata.get(NAMES)
    names = dict(given) if isinstance(given, dict) else {}
    if cards:
        names["character"] = cards[0].name
        has_picture = cards[0].name in pictures
    else:
        if removed is not None and names.get("character") == removed:
            del names["character"]
        has_picture = bool(pictures) and metadata.get(AVATAR_KEY) is True
    if names:
        metadata[NAMES] = names
    else:
        metadata.pop(NAMES, None)
    if has_picture:
        metadata[AVATAR_KEY] = True
    else:
        metadata.pop(AVATAR_KEY, None)
    if metadata != tx.metadata:
        tx.set_metadata(metadata)


def campaign_documents(campaign: Campaign) -> list[tuple[str, str, str]]:
    """The documents a new session of this campaign starts with (its card, its books),
    each lore once: a book with the same lore as the card's or an earlier one is left out
    (a warning says so), a book whose name is taken is named apart (``Name (2)``).

    Raises:
        CardError, LorebookError: a file named by ``[lore]`` is not valid.
        UsageError: it cannot be read.
    """
    from planner.cards import load_card
    from planner.lorebook import load_world_info

    documents: list[tuple[str, str, str]] = []
    books: list[Lorebook] = []
    if campaign.card_file is not None:
        card_path = campaign.card_file
        card = load_card(read_upload(card_path), card_path.name)
        documents.extend(card_documents(card))
        books.extend([card.book] if card.book is not None else [])
    for path in campaign.book_files:
        book = load_world_info(read_upload(path), path.stem)
        same = next((other.name for other in books if other.same_lore(book)), None)
        if same is not None:
            log.warning(
                "%s: %s holds the same lore as the book %r: kept once",
                campaign.folder / "campaign.toml",
                path.name,
                same,
            )
            continue
        taken = {other.name for other in books}
        number = 2
        while book.name in taken:
            book = dataclasses.replace(book, name=f"{path.stem} ({number})")
            number += 1
        books.append(book)
        documents.append((LOREBOOK, book.name, _book_document(book)))
    return documents


def session_books(store: Store, session_id: str) -> list[Lorebook]:
    """The session's lorebooks that play (not switched off, :data:`LOREBOOK_OFF`), in the
    order they were added."""
    from planner.lorebook import load_world_info

    off = {d.name for d in store.documents(session_id, LOREBOOK_OFF)}
    return [
        load_world_info(document.content, document.name)
        for document in store.documents(session_id, LOREBOOK)
        if document.name not in off
    ]


def session_card(store: Store, session_id: str) -> Card | None:
    """The session's character card, if it has one: its cast's first member's
    (:mod:`clotho.cast`)."""
    from planner.cards import parse_card

    found = store.documents(session_id, CARD)
    if not found:
        return None
    return parse_card(jsontext.loads(found[0].content, jsontext.DOCUMENT), found[0].name)


def card_character(card: Card) -> Character:
    """The turn's character from a card."""
    from orchestrator import Character

    depth_prompt = card.extensions.get("depth_prompt")
    note = depth_prompt.get("prompt", "") if isinstance(depth_prompt, dict) else ""
    return Character(
        name=card.name,
        description=card.description,
        personality=card.personality,
        scenario=card.scenario,
        examples=card.mes_example,
        creator_notes=card.creator_notes,
        depth_prompt=note if isinstance(note, str) else "",
        tags=tuple(card.tags),
    )


def session_planner(
    store: Store,
    session_id: str,
    settings: Settings,
    campaign: Campaign | None,
    plan_call: PlanCall | None = None,
) -> Planner:
    """The planner of a session: World Info over its books, with the vector index
    unless switched off (``CLOTHO_VECTORS=false`` or ``[lore.vectors] enabled = false``),
    planning with ``plan_call`` if given (else by rules).

    Raises:
        PlannerError: a stored book no longer parses.
    """
    from planner import RuleBasedPlanner
    from planner.lore import LorePlanner, VectorSettings

    books = session_books(store, session_id)
    if not books:
        return RuleBasedPlanner()
    scan = campaign.lore.scan if campaign else None
    vectors = campaign.lore.vectors if campaign else VectorSettings()
    index = lore_index(settings, books) if vectors.enabled and settings.vectors else None
    return LorePlanner(books, scan, index=index, vectors=vectors, plan_call=plan_call)


def lore_index(settings: Settings, books: list[Lorebook]) -> LoreIndex | None:
    """The vector index with ``books`` synced into it (only changed entries are
    embedded again), or ``None`` if it cannot be used (the local embedding model not
    installed, the Chroma server down): lore is then found by keywords only, and a
    warning says why (logged by ``clotho.lore``: the command line shows it on stderr, a
    server in its log)."""
    from planner import RetrievalError
    from planner.vectors import LoreIndex

    embedder = None
    if settings.embedding_model:
        from planner.vectors import LiteLLMEmbeddings

        embedder = LiteLLMEmbeddings(
            settings.embedding_model,
            api_base=settings.embedding_api_base or settings.api_base,
            api_key=settings.api_key,
            api_key_env="CLOTHO_API_KEY" if settings.api_key else None,
        )
    try:
        if settings.chroma_url:
            index = LoreIndex(url=settings.chroma_url, embedder=embedder)
        else:
            index = LoreIndex(path=settings.data_dir / "lore-index", embedder=embedder)
        for book in books:
            index.sync(book)
    except RetrievalError as error:
        # a topic: the playing commands say it once per cause (clotho.cli.logs.said_once)
        log.warning("lore is found by keywords only: %s", error, extra={"once": "lore_keywords"})
        return None
    return index


def lorebooks_document(books: list[Lorebook]) -> list[dict[str, Any]]:
    """The books and their entries as `clotho lore list --json` and the API show them."""
    return [
        {
            "book": book.name,
            "entries": [
                {
                    "uid": entry.uid,
                    "comment": entry.comment,
                    "keys": entry.keys,
                    "enabled": not entry.disable,
                    "constant": entry.constant,
                    "condition": entry.condition,
                }
                for entry in book.entries
            ],
        }
        for book in books
    ]
