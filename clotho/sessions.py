"""Creating sessions: from nothing, from a campaign folder, from a character card (the
CLI, the API and the SillyTavern folder import).

A session whose character is a card starts as SillyTavern starts a chat: with the
card's greeting, its alternate greetings as the greeting's alternatives (swipes).
:func:`clotho.lore.greet` is the one place that does it, whichever way the card came in (a
campaign's ``[lore] card``, ``clotho import card`` on an empty session or on a new
database, a SillyTavern character with no chat).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clotho.formats.campaign import load_campaign
from clotho.lore import campaign_documents, card_documents, greet, keep_book

if TYPE_CHECKING:
    from clotho.formats.campaign import Campaign
    from clotho.formats.names import SessionNames
    from mnemosyne import Node, Session, SessionTransaction, StateSchema, Store
    from planner.cards import Card
    from planner.lorebook import Lorebook

__all__ = [
    "PERSONA",
    "card_session",
    "new_session",
    "persona_document",
    "session_campaign",
    "session_names",
]

PERSONA = "persona"
"""The kind of the document that names the player of a session (a SillyTavern persona:
``{"name", "description"}``)."""


def _greet_with_stored_card(tx: SessionTransaction) -> None:
    greet(tx)


def new_session(store: Store, *, title: str | None = None, campaign: Path | None = None) -> Session:
    """A new session. With a campaign folder, it takes the campaign's world-state schema,
    its card and its lorebooks (kept with the session) and, unless ``title`` is given,
    its title; with a card, it starts with the card's greeting.

    Raises:
        CampaignError: the folder is not a valid campaign (the message names it).
        CardError, LorebookError, UsageError: a file it names cannot be used.
    """
    schema = campaign_path = None
    documents: list[tuple[str, str, str]] = []
    if campaign is not None:
        loaded = load_campaign(campaign)
        schema, campaign_path = loaded.schema, str(loaded.folder)
        title = title or loaded.title
        documents = campaign_documents(loaded)
    return store.create_session(
        title=title,
        campaign=campaign_path,
        schema=schema,
        documents=documents,
        fill=_greet_with_stored_card if documents else None,
    )


def card_session(
    store: Store,
    card: Card,
    *,
    title: str | None = None,
    documents: Sequence[tuple[str, str, str]] | None = None,
    metadata: Mapping[str, Any] | None = None,
    schema: StateSchema | None = None,
    books: Sequence[Lorebook] = (),
) -> tuple[Session, list[Node]]:
    """A new session whose character is ``card``, named after it unless ``title`` is
    given, starting with its greeting: one transaction. ``documents`` replaces what is
    kept with it (default: the card and its own book, as ``import card`` keeps them);
    ``metadata`` is the session's, ``schema`` its world-state schema (default: the
    permissive one); ``books`` are lorebooks kept with it too, each lore once
    (:func:`clotho.lore.keep_book`).

    Returns:
        The session and its greeting nodes (the first one, then its alternatives).
    """
    greeted: list[Node] = []

    def fill(tx: SessionTransaction) -> None:
        for book in books:
            keep_book(tx, book)
        greeted.extend(greet(tx, card))

    session = store.create_session(
        title=title or card.name,
        documents=card_documents(card) if documents is None else documents,
        metadata=metadata,
        schema=schema,
        fill=fill,
    )
    return session, greeted


def persona_document(name: str, description: str = "") -> tuple[str, str, str]:
    """The document naming a session's player (kind :data:`PERSONA`)."""
    content: dict[str, Any] = {"name": name, "description": description}
    return PERSONA, name, json.dumps(content, ensure_ascii=False)


def session_campaign(store: Store, session_id: str) -> Campaign | None:
    """The campaign a session was created from (``None`` if it has none).

    Raises:
        CampaignError: its folder is gone or no longer valid (the message names it).
    """
    folder = store.session(session_id).campaign
    return load_campaign(Path(folder)) if folder else None


def session_names(
    store: Store,
    session_id: str,
    campaign: Campaign | None = None,
    card: Card | None = None,
) -> SessionNames:
    """Who the player and the character of a session are (the rule:
    :mod:`clotho.formats.names`), from its campaign, card and metadata; ``campaign`` and
    ``card`` when the caller has them already (else read here: a campaign whose folder
    is gone names no one)."""
    from clotho.formats.campaign import CampaignError
    from clotho.formats.names import SessionNames
    from clotho.lore import session_card

    if campaign is None:
        try:
            campaign = session_campaign(store, session_id)
        except CampaignError:
            campaign = None
    if card is None:
        card = session_card(store, session_id)
    metadata = store.session(session_id).metadata
    return SessionNames.resolve(campaign, card.name if card else None, metadata)
