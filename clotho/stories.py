"""A new story from a character card: the page's New (``POST /api/stories``).

One transaction makes the whole session: the card (kept as ``import card`` keeps it,
its own book a lorebook), the card's picture as the session's avatar (named by the
character, the first member of the cast: :mod:`clotho.cast`), the lorebooks
chosen (each lore once, :func:`clotho.lore.keep_book`), the player's persona (the
session's ``settings.persona``), a ready campaign's world-state schema, and the card's
greeting as the first reply with its alternate greetings as swipes
(:func:`clotho.sessions.card_session`). A card or a book that cannot be read makes
nothing.

The card and the books come as files (their bytes) or as ones already kept with another
session (the picker of cards and books already in the database).
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Literal

from clotho.errors import ClothoError
from clotho.formats.names import NAMES
from clotho.lore import AVATAR, AVATAR_KEY, CARD, LOREBOOK, card_documents, session_card
from clotho.sessionconfig import Persona, SessionSettings, updated_metadata
from clotho.sessions import card_session
from mnemosyne import StateSchema, UnknownSessionError, jsontext, schema_from_mapping

if TYPE_CHECKING:
    from clotho.formats.story import Book, StoryFormat
    from mnemosyne import Document, Node, Session, Store
    from planner.cards import Card
    from planner.lorebook import Lorebook

__all__ = [
    "MAX_AVATAR_BYTES",
    "READY_CAMPAIGNS",
    "Avatar",
    "ReadyCampaign",
    "StoryError",
    "avatar_document",
    "cast_picture",
    "new_story",
    "ready_schema",
    "session_avatar",
    "session_book",
    "stored_book",
    "stored_card",
]

MAX_AVATAR_BYTES = 2 * 1024 * 1024
"""The largest picture kept as an avatar (the PNG without its text chunks); a card with
a larger one is made a story without an avatar."""

ReadyCampaign = Literal["rpg", "none"]
READY_CAMPAIGNS: dict[str, str | None] = {"rpg": "rpg.toml", "none": None}
"""The ready campaigns: their state schema's file in :mod:`clotho.campaigns` (``none``:
the permissive schema, where any variable may be set)."""

_PNG = b"\x89PNG\r\n\x1a\n"
# What a picture needs of a PNG: the card's text chunks (tEXt, zTXt, iTXt: the card's
# JSON, often larger than the picture) are left out.
_PICTURE_CHUNKS = frozenset(
    {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT"}
)


class StoryError(ClothoError, ValueError):
    """A new story cannot be made from what was given (a card or a book of another
    session that is not there); the message names it."""

    code = "invalid_story"


def ready_schema(campaign: ReadyCampaign) -> StateSchema | None:
    """The world-state schema of a ready campaign (``None``: the permissive one)."""
    file = READY_CAMPAIGNS[campaign]
    if file is None:
        return None
    text = resources.files("clotho.campaigns").joinpath(file).read_text(encoding="utf-8")
    return schema_from_mapping(tomllib.loads(text), source=f"clotho/campaigns/{file}")


@dataclass(frozen=True)
class Avatar:
    """A session's picture."""

    png: bytes


def picture_of(png: bytes) -> bytes | None:
    """A card PNG's picture: the PNG without its text chunks; ``None`` when it is not a
    whole PNG or the picture is larger than :data:`MAX_AVATAR_BYTES`."""
    if not png.startswith(_PNG):
        return None
    kept = [_PNG]
    offset = len(_PNG)
    while offset + 12 <= len(png):
        (length,) = struct.unpack_from(">I", png, offset)
        end = offset + 12 + length
        if end > len(png):
            return None
        kind = png[offset + 4 : offset + 8]
        if kind in _PICTURE_CHUNKS:
            kept.append(png[offset:end])
        if kind == b"IEND":
            picture = b"".join(kept)
            return picture if len(picture) <= MAX_AVATAR_BYTES else None
        offset = end
    return None


def avatar_document(png: bytes, name: str) -> tuple[str, str, str] | None:
    """The document keeping a card's picture with a session (``None``: no picture)."""
    picture = picture_of(png)
    if picture is None:
        return None
    content = {"media_type": "image/png", "data": base64.b64encode(picture).decode("ascii")}
    return AVATAR, name, json.dumps(content)


def session_avatar(store: Store, session_id: str, member: str | None = None) -> Avatar | None:
    """The session's picture, if it has one: its character's (the cast's first member,
    :mod:`clotho.cast`; a session with no card, the first it keeps); with ``member``,
    that member's picture. A member without one has none (not another's)."""
    found = {document.name: document for document in store.documents(session_id, AVATAR)}
    if member is None:
        members = store.documents(session_id, CARD)
        member = members[0].name if members else next(iter(found), None)
    document = found.get(member) if member is not None else None
    return None if document is None else _avatar(document)


def _avatar(document: Document) -> Avatar | None:
    """The picture an AVATAR document keeps (``None``: unreadable)."""
    try:
        data = base64.b64decode(json.loads(document.content)["data"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None
    return Avatar(data)


def cast_picture(store: Store, session_id: str) -> Callable[[str], bytes | None]:
    """Each cast member's picture by its name (a PNG, ``None``: it has none), for the
    story as a book (:func:`clotho.formats.story.story_book`'s ``picture``); the
    pictures are read once, here."""
    found = {document.name: document for document in store.documents(session_id, AVATAR)}

    def picture(name: str) -> bytes | None:
        document = found.get(name)
        avatar = None if document is None else _avatar(document)
        return avatar.png if avatar else None

    return picture


def session_book(
    store: Store,
    session_id: str,
    head: str | None,
    format: StoryFormat,
    *,
    state_every: int = 0,
    state_at: Sequence[str] = (),
    pictures: bool = False,
) -> Book:
    """The story as a book (:func:`clotho.formats.story.story_book`) for ``clotho export
    story`` and the API: the session's names, and with ``pictures`` the cast's in an
    HTML page (a Markdown book shows none: they are not read for it)."""
    from clotho.formats.story import story_book
    from clotho.sessions import session_names

    return story_book(
        store,
        session_id,
        head,
        names=session_names(store, session_id),
        state_every=state_every,
        state_at=state_at,
        picture=cast_picture(store, session_id) if pictures and format == "html" else None,
    )


def _kept_by(store: Store, session_ref: str) -> str:
    try:
        return store.session(session_ref).id
    except UnknownSessionError:
        raise StoryError(f"no session {session_ref!r} keeps it") from None


def stored_card(
    store: Store, session_ref: str, name: str | None = None
) -> tuple[Card, bytes | None]:
    """The card kept with a session (its id or a unique prefix), and its picture (to make
    another story of it): the card of the member ``name`` of its cast, else its
    character's (the first member's).

    Raises:
        StoryError: there is no such session, or it has no card (of that name).
    """
    from planner.cards import parse_card

    session_id = _kept_by(store, session_ref)
    if name is None:
        card = session_card(store, session_id)
        if card is None:
            raise StoryError(f"session {session_id} has no character card")
    else:
        found = [d for d in store.documents(session_id, CARD) if d.name == name]
        if not found:
            raise StoryError(f"session {session_id} has no character card named {name!r}")
        card = parse_card(jsontext.loads(found[0].content, jsontext.DOCUMENT), name)
    avatar = session_avatar(store, session_id, card.name if name is not None else None)
    return card, avatar.png if avatar else None


def stored_book(store: Store, session_ref: str, name: str) -> Lorebook:
    """A lorebook kept with a session (its id or a unique prefix), by name.

    Raises:
        StoryError: there is no such session, or it has no book of that name.
    """
    from planner.lorebook import load_world_info

    session_id = _kept_by(store, session_ref)
    for document in store.documents(session_id, LOREBOOK):
        if document.name == name:
            return load_world_info(document.content, document.name)
    raise StoryError(f"session {session_id} has no lorebook named {name!r}")


def new_story(
    store: Store,
    card: Card,
    *,
    picture: bytes | None = None,
    books: Sequence[Lorebook] = (),
    persona: Persona | None = None,
    campaign: ReadyCampaign = "rpg",
    title: str | None = None,
) -> tuple[Session, list[Node]]:
    """A new session whose character is ``card``, in one transaction: see the module.
    ``picture``: the card's PNG (its picture becomes the avatar).

    Returns:
        The session and its greeting nodes (the first, then its alternatives).
    """
    documents = card_documents(card)
    avatar = avatar_document(picture, card.name) if picture else None
    if avatar is not None:
        documents.append(avatar)
    metadata: dict[str, object] = {NAMES: {"character": card.name}}
    if avatar is not None:
        metadata[AVATAR_KEY] = True
    if persona is not None:
        metadata = updated_metadata(metadata, SessionSettings(persona=persona))
    return card_session(
        store,
        card,
        title=title,
        documents=documents,
        metadata=metadata,
        schema=ready_schema(campaign),
        books=books,
    )
