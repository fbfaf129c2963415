"""A session's cast: the characters who share its story, who is in the scene, and the
changes of scene.

- **The members** are the session's character cards (documents of kind
  :data:`clotho.lore.CARD`, one per character, named by it), in the order they were
  added: the first is the session's character, who speaks when no one else is named. A
  character written in place is kept as a small card (:func:`written_card`), so every
  member is read one way. A member's picture is an avatar document of its name; its
  card's book, and the World Info book its card links, are its own lore
  (:attr:`Member.books`), which plays while it is present.
- **How they play** is the session's settings (:class:`clotho.sessionconfig.CastSettings`):
  the speaker order, who is muted, talkativeness set apart from the card's.
- **Who is present** is world state (``present``, :mod:`mnemosyne.state.presence`), so
  it rolls back with the story: :func:`scene_change` commits a node saying who left or
  joined (``Bram leaves the scene.``), carrying the change, undoable as one step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from clotho.errors import ClothoError
from clotho.lore import AVATAR, CARD, LOREBOOK, keep_book, keep_list_hints
from mnemosyne import jsontext

if TYPE_CHECKING:
    from clotho.sessionconfig import CastSettings, SpeakerOrder
    from mnemosyne import Document, Node, Session, SessionTransaction, Store
    from orchestrator import Character
    from planner.cards import Card

__all__ = [
    "EXTENSION",
    "SCENE",
    "Cast",
    "CastError",
    "Member",
    "UnknownMemberError",
    "add_member",
    "campaign_character",
    "cast_view",
    "remove_member",
    "scene_change",
    "session_cast",
    "update_cast",
    "update_member",
    "written_card",
]

#: The key of a scene change's node metadata: ``{"leaves": name}`` or ``{"joins": name}``.
SCENE = "scene"
#: The key of a card's ``extensions`` where Clotho marks a character written in place.
EXTENSION = "clotho"
#: Talkativeness where neither the card nor the settings give one (SillyTavern's).
DEFAULT_TALKATIVENESS = 0.5

SceneMove = Literal["leaves", "joins"]


class CastError(ClothoError, ValueError):
    """The cast cannot do what was asked (an unknown member, a name taken, someone
    leaving who is not there); the message names who and why."""

    code = "cast"


class UnknownMemberError(CastError, LookupError):
    """No member of the cast is named so (the message names the cast)."""

    code = "unknown_member"


@dataclass(frozen=True)
class Member:
    """One character of the cast."""

    name: str
    card: Card
    talkativeness: float
    """0 to 1: how readily it speaks unnamed (the settings', else the card's, else 0.5)."""
    muted: bool
    """A muted member never speaks; it may still be present and witness."""
    books: tuple[str, ...]
    """The session's lorebooks that are its own, by name: its card's book, and the World
    Info book its card links (``extensions.world``, SillyTavern's character lore) when
    the session has it."""

    @property
    def written(self) -> bool:
        """It was written in place (:func:`written_card`), not brought as a card."""
        mark = self.card.extensions.get(EXTENSION)
        return isinstance(mark, dict) and mark.get("written_in_place") is True

    def character(self) -> Character:
        """The member as the turn loop sees it."""
        import dataclasses

        from clotho.lore import card_character

        return dataclasses.replace(
            card_character(self.card),
            talkativeness=self.talkativeness,
            muted=self.muted,
            books=self.books,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "talkativeness": self.talkativeness,
            "muted": self.muted,
            "books": list(self.books),
            "description": self.card.description,
            "source": "written" if self.written else "card",
        }


@dataclass(frozen=True)
class Cast:
    """A session's cast as it stands (the members) and how it plays (the settings)."""

    members: tuple[Member, ...]
    settings: CastSettings

    @property
    def names(self) -> list[str]:
        return [member.name for member in self.members]

    def find(self, name: str) -> Member:
        """The member named ``name`` (its exact name, else the only one whose name
        matches it ignoring case).

        Raises:
            UnknownMemberError: no member is named so.
        """
        for member in self.members:
            if member.name == name:
                return member
        folded = [member for member in self.members if member.name.casefold() == name.casefold()]
        if len(folded) == 1:
            return folded[0]
        known = ", ".join(self.names) or "no one yet"
        raise UnknownMemberError(f"no member of the cast is named {name!r} (the cast: {known})")

    def present(self, stored: list[str] | None) -> list[str]:
        """Who of the cast is in the scene, given the state's ``present`` (``None``:
        everyone), in the cast's order."""
        if stored is None:
            return self.names
        here = set(stored)
        return [name for name in self.names if name in here]


def _talkativeness(card: Card) -> float:
    """The card's talkativeness (SillyTavern keeps it as text, ``"0.5"``), else 0.5."""
    value: Any = card.extensions.get("talkativeness", card.raw.get("talkativeness"))
    try:
        number = float(value)
    except (TypeError, ValueError):
        return DEFAULT_TALKATIVENESS
    return min(max(number, 0.0), 1.0) if number == number else DEFAULT_TALKATIVENESS


def _cards(documents: list[Any]) -> list[Card]:
    from planner.cards import parse_card

    return [
        parse_card(jsontext.loads(document.content, jsontext.DOCUMENT), document.name)
        for document in documents
    ]


def session_cast(store: Store, session_id: str) -> Cast:
    """The session's cast: its cards in the order they were added, with its settings.

    Raises:
        SessionSettingsError: the stored settings cannot be read.
        CardError: a stored card cannot be read.
    """
    from clotho.sessionconfig import session_settings

    settings = session_settings(store.session(session_id).metadata).cast_settings
    cards = _cards(store.documents(session_id, CARD))
    owning = any(card.book or card.world for card in cards)
    books = store.documents(session_id, LOREBOOK) if owning else []
    return _cast(cards, settings, books)


def _cast(cards: list[Card], settings: CastSettings, books: list[Document] | None = None) -> Cast:
    """The members of ``cards``; ``books``: the session's lorebook documents, where
    each member's own books are looked for (without them: its card's book, by name)."""
    muted = set(settings.muted)
    members = []
    for card in cards:
        if books is None:
            own = [card.book.name] if card.book is not None else []
        else:
            linked = card.world if card.world in {d.name for d in books} else None
            own = [name for name in (_own_book(card, books), linked) if name]
        members.append(
            Member(
                name=card.name,
                card=card,
                talkativeness=settings.talkativeness.get(card.name, _talkativeness(card)),
                muted=card.name in muted,
                books=tuple(dict.fromkeys(own)),
            )
        )
    return Cast(tuple(members), settings)


def _own_book(card: Card, documents: list[Document]) -> str | None:
    """The name of the session's book that is the card's own: the book of its name, or
    the one holding the same lore where :func:`clotho.lore.keep_book` kept it apart
    (``"Name (2)"``: another book had its name) or kept it once (the same lore was
    there already, under another name); ``None``: none is (taken out of the session).
    Books are read only when the name alone cannot tell."""
    if card.book is None:
        return None
    name = card.book.name
    names = [document.name for document in documents]
    numbered = [other for other in names if other.startswith(f"{name} (")]
    if name in names and not numbered:
        return name
    from planner.lorebook import load_world_info

    candidates = [d for d in documents if d.name == name or d.name in numbered] or documents
    for document in candidates:
        if load_world_info(document.content, document.name).same_lore(card.book):
            return document.name
    return name if name in names else None


def written_card(
    name: str, description: str = "", personality: str = "", scenario: str = ""
) -> Card:
    """A character written in place, as a card (Character Card V2) holding its fields.

    Raises:
        CardError: a field is wrong (an empty name, too long a text).
    """
    from planner.cards import parse_card

    data = {
        "name": name,
        "description": description,
        "personality": personality,
        "scenario": scenario,
        "first_mes": "",
        "mes_example": "",
        "extensions": {EXTENSION: {"written_in_place": True}},
    }
    return parse_card({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}, name)


def add_member(
    store: Store,
    session_id: str,
    card: Card,
    *,
    avatar: bytes | None = None,
    expected_version: int | None = None,
) -> tuple[Member, Session]:
    """Add a character to the cast: its card, its book (kept once, as
    :func:`clotho.lore.keep_book` keeps one), its picture (``avatar``: the card's PNG). One
    transaction. While someone has come or gone (``present`` is a list), a new member
    is not in the scene until it joins (:func:`scene_change`); while everyone is, it is.

    The first member of a session with no card: when the session's campaign has a
    character of its own (``[character]``, which played it until now), that character is
    written in first and stays the session's character; else the card becomes it, and an
    empty story starts with its greeting (:func:`clotho.lore.greet`).

    Raises:
        CastError: a member of that name is in the cast already.
        ConflictError: the session is not at ``expected_version``.
    """
    from clotho.lore import card_documents, greet
    from clotho.stories import avatar_document

    character = campaign_character(store, session_id)
    with store.transaction(session_id, expected_version=expected_version) as tx:
        cards = tx.documents(CARD)
        taken = next((d.name for d in cards if d.name.casefold() == card.name.casefold()), None)
        if taken is not None:
            raise CastError(f"{taken} is in the cast already (remove it first to replace its card)")
        first = not cards
        if first and character is not None and character.name.casefold() != card.name.casefold():
            # the campaign's character played the session: it stays, the first member
            tx.put_document(*card_documents(character)[0])
            first = False
        for kind, name, content in card_documents(card):
            if kind != LOREBOOK:
                tx.put_document(kind, name, content)
        if card.book is not None:
            keep_book(tx, card.book)
        picture = avatar_document(avatar, card.name) if avatar else None
        if picture is not None:
            tx.put_document(*picture)
        if first:
            greet(tx, card)  # an empty story starts with its character's greeting
        keep_list_hints(tx)
    return session_cast(store, session_id).find(card.name), tx.session


def remove_member(
    store: Store, session_id: str, name: str, *, expected_version: int | None = None
) -> Session:
    """Take a character out of the cast: its card and picture go; its book stays with
    the session's lore (the lore manager switches it off), its messages stay in the
    story. One transaction.

    Raises:
        CastError: no member is named so.
        ConflictError: the session is not at ``expected_version``.
    """
    with store.transaction(session_id, expected_version=expected_version) as tx:
        member = _cast(_cards(tx.documents(CARD)), _settings(tx)).find(name)
        tx.remove_document(CARD, member.name)
        if any(document.name == member.name for document in tx.documents(AVATAR)):
            tx.remove_document(AVATAR, member.name)
        keep_list_hints(tx, removed=member.name)
    return tx.session


def campaign_character(store: Store, session_id: str) -> Card | None:
    """The character a session's campaign plays it with while it has no card (its
    ``[character]`` table, named as :func:`clotho.sessions.session_names` names it), as a
    card written in place; ``None`` when the campaign has none (or is gone)."""
    from clotho.formats.campaign import CampaignError, CharacterTable
    from clotho.sessions import session_campaign, session_names

    try:
        campaign = session_campaign(store, session_id)
    except CampaignError:
        return None
    if campaign is None or campaign.character == CharacterTable():
        return None
    table = campaign.character
    name = session_names(store, session_id, campaign).character
    return written_card(name, table.description, table.personality, table.scenario)


def cast_view(store: Store, session: Session) -> dict[str, Any]:
    """The cast as a reader sees it at the session's HEAD: ``order``, ``recap_missed``,
    ``present`` (the
    state's: ``None`` while everyone is) and ``members``, each :meth:`Member.as_dict`
    with ``present``, ``avatar`` (it has a picture) and ``first`` (the session's
    character). What the API answers; ``clotho cast --json`` prints its members."""
    cast = session_cast(store, session.id)
    stored = store.state(session.id, session.head_id).present if session.head_id else None
    here = set(cast.present(stored))
    pictures = {document.name for document in store.documents(session.id, AVATAR)}
    members = [
        {
            **member.as_dict(),
            "present": member.name in here,
            "avatar": member.name in pictures,
            "first": index == 0,
        }
        for index, member in enumerate(cast.members)
    ]
    return {
        "order": cast.settings.order,
        "recap_missed": cast.settings.recap_missed,
        "present": stored,
        "members": members,
    }


def update_member(
    store: Store,
    session_id: str,
    name: str,
    *,
    muted: bool | None = None,
    talkativeness: float | None = None,
    expected_version: int | None = None,
) -> tuple[Member, Session]:
    """Mute a member or let it speak, set its talkativeness: the session's cast settings
    (``None``: as it is). One write, at ``expected_version`` (else at the version read,
    so a write meanwhile is a conflict, not lost); none when nothing changes (the
    session as it was). Returns the member after.

    Raises:
        UnknownMemberError: no member is named so.
        ConflictError: the session is not at ``expected_version``.
    """
    from clotho.sessionconfig import CastSettings

    session = store.session(session_id)
    _check_version(session, expected_version)
    cast = session_cast(store, session_id)
    member = cast.find(name)
    settings = cast.settings
    muting = settings.muted
    if muted is not None and muted != member.muted:
        others = [other for other in settings.muted if other != member.name]
        muting = [*others, member.name] if muted else others
    spoken = dict(settings.talkativeness)
    if talkativeness is not None:
        spoken[member.name] = talkativeness
    changed = CastSettings.model_validate(
        {**settings.model_dump(), "muted": muting, "talkativeness": spoken}
    )
    if changed == settings:
        return member, session
    session = _settings_written(store, session, changed)
    return session_cast(store, session_id).find(member.name), session


def update_cast(
    store: Store,
    session_id: str,
    *,
    order: SpeakerOrder | None = None,
    recap_missed: bool | None = None,
    expected_version: int | None = None,
) -> Session:
    """Set how the cast plays: the speaker order, whether a member back from away is
    told what it missed (``None``: as it is). One write; none when nothing changes.

    Raises:
        ConflictError: the session is not at ``expected_version``.
    """
    from clotho.sessionconfig import CastSettings, session_settings

    session = store.session(session_id)
    _check_version(session, expected_version)
    settings = session_settings(session.metadata).cast_settings
    update: dict[str, Any] = {}
    if order is not None:
        update["order"] = order
    if recap_missed is not None:
        update["recap_missed"] = recap_missed
    changed = CastSettings.model_validate({**settings.model_dump(), **update})
    if changed == settings:
        return session
    return _settings_written(store, session, changed)


def _check_version(session: Session, expected_version: int | None) -> None:
    from mnemosyne import ConflictError

    if expected_version is not None and expected_version != session.version:
        raise ConflictError(session.id, expected_version, session.version)


def _settings_written(store: Store, session: Session, cast: CastSettings) -> Session:
    """The session with its cast settings replaced: one write, at the version ``session``
    was read at."""
    from clotho.sessionconfig import SessionSettings, updated_metadata

    metadata = updated_metadata(session.metadata, SessionSettings(cast=cast))
    return store.update_session(session.id, metadata=metadata, expected_version=session.version)


def _settings(tx: SessionTransaction) -> CastSettings:
    from clotho.sessionconfig import session_settings

    return session_settings(tx.session.metadata).cast_settings


def scene_change(
    store: Store,
    session_id: str,
    name: str,
    move: SceneMove,
    *,
    expected_version: int | None = None,
) -> tuple[Node, Session]:
    """A member leaves or joins the scene: a narration node under HEAD (``Bram leaves
    the scene.``, role ``system``), its delta changing ``present``, its metadata saying
    who moved (:data:`SCENE`); HEAD moves to it. One transaction, one undoable step
    (undo takes the node back, and the cast with it).

    The first one to leave while everyone is present sets ``present`` to those who stay.

    Raises:
        CastError: no member is named so; who leaves is not in the scene; who joins is.
        ConflictError: the session is not at ``expected_version``.
    """
    with store.transaction(session_id, expected_version=expected_version) as tx:
        cast = _cast(_cards(tx.documents(CARD)), _settings(tx))
        member = cast.find(name)
        stored = tx.state().present if tx.head_id is not None else None
        here = cast.present(stored)
        if move == "leaves":
            if member.name not in here:
                raise CastError(f"{member.name} is not in the scene ({_who(here)})")
            if stored is None:
                rest = [other for other in here if other != member.name]
                op: dict[str, Any] = {"op": "set", "path": "present", "value": rest}
            else:
                op = {"op": "remove", "path": "present", "value": member.name}
            text = f"{member.name} leaves the scene."
        else:
            if member.name in here:
                raise CastError(f"{member.name} is in the scene already ({_who(here)})")
            op = {"op": "append", "path": "present", "value": member.name}
            text = f"{member.name} joins the scene."
        with tx.journaled("leave" if move == "leaves" else "join"):
            node = tx.append("system", text, metadata={SCENE: {move: member.name}}, delta=[op])
    return node, tx.session


def _who(here: list[str]) -> str:
    return "present: " + ", ".join(here) if here else "no one is present"
