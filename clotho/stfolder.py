"""A whole SillyTavern user folder in one go (``clotho import sillytavern DIR``).

A user folder (``data/default-user``, or ``data/`` holding one user) is laid out as
SillyTavern's ``src/constants.js`` says: ``characters/`` (cards, PNG or JSON),
``chats/<card file's name>/*.jsonl`` (each character's chats), ``groups/*.json`` and
``group chats/*.jsonl``, ``worlds/*.json`` (World Info books), ``settings.json``
(personas, books linked to characters: :mod:`clotho.formats.stuser`).

The import is a :class:`Plan` first (:func:`plan_folder`): every file read within the
limits its own reader keeps (:func:`clotho.lore.read_upload`,
:func:`planner.cards.load_card`, :func:`planner.lorebook.load_world_info`,
:func:`clotho.formats.stchat.parse_chat`, :mod:`clotho.formats.stuser`), a file that
cannot be used skipped with its reason, never stopping the rest. It plans one session
per chat (its character's card kept with it; a chat whose card is missing comes in
without one, and says so), one per group chat, and one per character with no chat
(starting with its greeting); World Info books go into the sessions of the characters
that link them, the others are listed as available; the player is the chat's persona
(a ``persona`` document). A card's picture (a PNG card's) is its avatar. Then
:func:`write_plan` writes each session in one transaction of its own.

A group chat plays with its group as the session's cast (:mod:`clotho.cast`): each
member's card in the group's order (a member whose card is missing is written in place
under its name, and the plan says so), its picture, its own book; its messages are
named by the member who spoke them (their ``original_avatar``, so a character renamed
since still speaks as its member); the group's muted members (``disabled_members``)
are muted and its ``activation_strategy`` is the speaker order (natural as natural,
manual as manual; list and pooled, which give every member its turn, as round robin).
The group itself (name, members) is kept too, a ``group`` document.

Each session remembers the file it came from and its SHA-256 (a ``source``
document), so a second run finds what is already there and imports only what is new
or changed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from clotho.errors import ClothoError
from clotho.formats.names import NAMES
from clotho.formats.stchat import import_chat, parse_chat
from clotho.formats.stuser import (
    ACTIVATION_STRATEGIES,
    Group,
    Persona,
    Personas,
    UserSettings,
    linked_books,
    read_group,
    read_settings,
)
from clotho.lore import LOREBOOK, card_documents, read_upload
from clotho.sessions import card_session, persona_document
from mnemosyne import MnemosyneError
from planner.errors import PlannerError

if TYPE_CHECKING:
    from clotho.sessionconfig import CastSettings, SpeakerOrder
    from mnemosyne import Session, SessionTransaction, Store
    from planner.cards import Card
    from planner.lorebook import Lorebook

__all__ = [
    "GROUP",
    "SOURCE",
    "FolderError",
    "Plan",
    "PlannedSession",
    "Skipped",
    "plan_folder",
    "user_folder",
    "write_plan",
]

SOURCE = "source"
"""The kind of the document naming the file a session was imported from."""
SOURCE_NAME = "sillytavern"
GROUP = "group"
"""The kind of the document holding a group chat's group (name, members)."""
USER_ENTRIES = ("characters", "chats", "groups", "group chats", "worlds", "settings.json")
"""What a user folder holds (SillyTavern makes them all; two of them mark one)."""
CARD_SUFFIXES = (".png", ".json")
MAX_MEMBER_NAME = 200
"""The longest name a cast's settings keep (a longer one is not muted)."""
#: How SillyTavern's group activation strategies play (:mod:`clotho.cast`'s orders).
GROUP_ORDERS: dict[str, SpeakerOrder] = {
    "natural": "natural",
    "list": "round_robin",
    "manual": "manual",
    "pooled": "round_robin",
}

T = TypeVar("T")
Kind = Literal["chat", "group", "character"]
Status = Literal["new", "changed", "already there", "imported", "failed"]


class FolderError(ClothoError, ValueError):
    """The folder is not a SillyTavern user folder (or holds several users)."""

    code = "invalid_folder"


@dataclass(frozen=True)
class Skipped:
    file: str
    """The file, relative to the user folder."""
    reason: str


@dataclass
class PlannedSession:
    """One session the folder makes."""

    kind: Kind
    source: str
    """The file it comes from (the chat, or the card of a character with no chat),
    relative to the user folder."""
    digest: str
    """The SHA-256 of that file as planned."""
    title: str
    card: Card | None = None
    """A chat's or a character's card (a group's are its :attr:`cast`)."""
    books: list[Lorebook] = field(default_factory=list)
    """The World Info books linked to it."""
    persona: Persona | None = None
    persona_linked: bool = False
    """The persona is locked to the chat or connected to its character (not the default
    one): it names the player even where the chat's messages name another."""
    chat: Path | None = None
    """The chat file (``None``: a character's session from its card)."""
    group: Group | None = None
    members: list[str] = field(default_factory=list)
    """A group chat's members, by name (a missing card: its file's name)."""
    cast: list[Card] = field(default_factory=list)
    """The cards it keeps, in order: its character's, or each member's of a group (a
    missing one written in place)."""
    pictures: dict[str, Path] = field(default_factory=dict)
    """A member's PNG card, by the member's name (its picture becomes its avatar)."""
    speakers: dict[str, str] = field(default_factory=dict)
    """A group member's card file (as its messages name it) -> its name in the cast."""
    cast_settings: CastSettings | None = None
    """How a group's cast plays (its muted members, its speaker order)."""
    notes: list[str] = field(default_factory=list)
    status: Status = "new"
    session_id: str | None = None
    """The session that holds it (already, or once written)."""

    def lorebooks(self) -> list[Lorebook]:
        """The books the session plays with: each card's own book, then the linked
        ones; a card's own book is left out when the book the card links
        (``extensions.world``) is among the linked: SillyTavern plays the linked book,
        and the card's copy is what the card carried when it was made (a book of the
        same name is kept once, the linked one). Two members' different books of one
        name are kept apart (``Name (2)``); the same lore twice, once."""
        linked = {book.name for book in self.books}
        own: dict[str, Lorebook] = {}
        for card in self.cast:
            book = card.book
            if book is None or book.name in linked or card.world in linked:
                continue
            if any(other.same_lore(book) for other in own.values()):
                continue  # kept once, as clotho.lore.keep_book keeps a book
            name, number = book.name, 2
            while name in own or name in linked:  # another member's book of its name
                name, number = f"{book.name} ({number})", number + 1
            own[name] = book if name == book.name else dataclasses.replace(book, name=name)
        return [*own.values(), *self.books]

    def documents(self) -> list[tuple[str, str, str]]:
        """What the session keeps besides its messages, one of each kind and name. A
        member's picture is read from its card here; one that cannot be read is left
        out."""
        from planner.lorebook import dump_world_info

        found: list[tuple[str, str, str]] = []
        for card in self.cast:
            found.extend(d for d in card_documents(card) if d[0] != LOREBOOK)
        found.extend((LOREBOOK, book.name, dump_world_info(book)) for book in self.lorebooks())
        found.extend(self.avatars())
        if self.group is not None:
            group = {"id": self.group.id, "name": self.group.name, "members": self.members}
            found.append((GROUP, self.group.name, json.dumps(group, ensure_ascii=False)))
        if self.persona is not None:
            found.append(persona_document(self.persona.name, self.persona.description))
        source = {"file": self.source, "sha256": self.digest}
        found.append((SOURCE, SOURCE_NAME, json.dumps(source)))
        return list({(kind, name): (kind, name, text) for kind, name, text in found}.values())

    def avatars(self) -> list[tuple[str, str, str]]:
        """Its members' pictures (avatar documents), each member's by its name."""
        from clotho.stories import avatar_document

        found = []
        for name, path in self.pictures.items():
            try:
                picture = avatar_document(read_upload(path), name)
            except ClothoError:
                continue  # gone since the plan: the session comes in without it
            if picture is not None:
                found.append(picture)
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "source": self.source,
            "title": self.title,
            "character": self.card.name if self.card is not None else None,
            "members": self.members,
            "books": [book.name for book in self.lorebooks()],
            "persona": self.persona.name if self.persona is not None else None,
            "notes": self.notes,
            "status": self.status,
            "session_id": self.session_id,
        }


@dataclass
class Plan:
    """What a user folder holds, and what importing it does."""

    folder: Path
    sessions: list[PlannedSession] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    available_books: list[str] = field(default_factory=list)
    """World Info books no session links (``clotho import lorebook`` adds one)."""
    personas: list[Persona] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.folder),
            "sessions": [planned.as_dict() for planned in self.sessions],
            "skipped": [{"file": s.file, "reason": s.reason} for s in self.skipped],
            "available_books": self.available_books,
            "personas": [
                {"name": p.name, "description": p.description, "avatar": p.avatar}
                for p in self.personas
            ],
        }


def user_folder(path: Path) -> Path:
    """The SillyTavern user folder at ``path``: ``path`` itself, or the one user folder
    inside it (``data/`` holding ``default-user``, or SillyTavern's own folder).

    Raises:
        FolderError: not a folder, no user folder in it, or several (named).
    """
    if not path.is_dir():
        raise FolderError(f"{path}: no such folder")
    for candidates in ([path], _subfolders(path), _subfolders(path / "data")):
        users = [folder for folder in candidates if _is_user_folder(folder)]
        if len(users) == 1:
            return users[0]
        if users:
            names = ", ".join(str(user) for user in users)
            raise FolderError(f"{path}: several SillyTavern users ({names}): name one of them")
    raise FolderError(
        f"{path}: not a SillyTavern user folder (it holds fewer than two of "
        f"{', '.join(USER_ENTRIES)}, and so does every folder inside it; SillyTavern "
        "keeps them in data/default-user)"
    )


def _subfolders(path: Path) -> list[Path]:
    try:
        return sorted(child for child in path.iterdir() if child.is_dir())
    except OSError:
        return []


def _is_user_folder(path: Path) -> bool:
    return sum((path / entry).exists() for entry in USER_ENTRIES) >= 2


class _Reader:
    """Reads the folder's files, each within its reader's limits; a file that cannot be
    used is noted as skipped with its reason."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.skipped: list[Skipped] = []

    def name(self, path: Path) -> str:
        return path.relative_to(self.folder).as_posix()

    def files(self, directory: str, suffixes: Sequence[str]) -> list[Path]:
        found = self.folder / directory
        if not found.is_dir():
            return []
        return sorted(
            path for path in found.iterdir() if path.is_file() and path.suffix.lower() in suffixes
        )

    def read(self, path: Path, parse: Callable[[bytes, str], T]) -> tuple[T, str] | None:
        """``parse(the file's bytes, its name)`` and the file's SHA-256, or ``None``
        with the file noted as skipped."""
        name = self.name(path)
        try:
            data = read_upload(path)
            return parse(data, name), hashlib.sha256(data).hexdigest()
        except (ClothoError, PlannerError, MnemosyneError) as error:
            # the reason without the file's name (or the book's: a world's stem) first
            reason = str(error).removeprefix(f"{name}: ").removeprefix(f"{path.stem}: ")
            self.skipped.append(Skipped(name, reason))
        return None

    def skip(self, path: Path, reason: str) -> None:
        self.skipped.append(Skipped(self.name(path), reason))


@dataclass(frozen=True)
class _Character:
    card: Card
    path: Path
    """Its file in ``characters/`` (its name is SillyTavern's "avatar")."""
    digest: str

    @property
    def file(self) -> str:
        return self.path.name

    def picture(self) -> dict[str, Path]:
        """Its card's PNG (by its name), where its picture is."""
        return {self.card.name: self.path} if self.path.suffix.lower() == ".png" else {}


class _Planner:
    """Builds a :class:`Plan`, file by file."""

    def __init__(self, folder: Path) -> None:
        self.reader = _Reader(folder)
        self.plan = Plan(folder)
        self.settings = UserSettings()
        if (folder / "settings.json").is_file():
            read = self.reader.read(folder / "settings.json", read_settings)
            self.settings = read[0] if read else self.settings
        self.personas = Personas(self.settings)
        self.plan.personas = list(self.personas.known.values())
        self.books: dict[str, Lorebook] = {}
        for path in self.reader.files("worlds", (".json",)):
            book = self.reader.read(path, _world)
            if book is not None:
                self.books[book[0].name] = book[0]
        self.used: set[str] = set()
        self.characters = self._characters()

    def _characters(self) -> dict[str, _Character]:
        """The cards of ``characters/``, by their file's name without its suffix (the
        name of their chats' folder)."""
        from planner.cards import load_card

        found: dict[str, _Character] = {}
        for path in self.reader.files("characters", CARD_SUFFIXES):
            read = self.reader.read(path, load_card)
            if read is None:
                continue
            if path.stem in found:
                self.reader.skip(path, f"a second card named {path.stem} (the first is kept)")
                continue
            found[path.stem] = _Character(read[0], path, read[1])
        return found

    def add(
        self,
        planned: PlannedSession,
        characters: list[tuple[Card | None, str]],
        chat_metadata: dict[str, Any],
        connection: tuple[str, str],
    ) -> None:
        """``planned`` with its books and its player."""
        links = [(card.world if card else None, stem) for card, stem in characters]
        for name in linked_books(self.settings, links, chat_metadata):
            if name in self.books:
                self.used.add(name)
                planned.books.append(self.books[name])
            else:
                planned.notes.append(f"it links the World Info book {name!r}, not in worlds/")
        planned.persona = self.personas.of(chat_metadata, connection)
        planned.persona_linked = self.personas.linked(chat_metadata, connection) is not None
        self.plan.sessions.append(planned)

    def chats(self) -> set[str]:
        """A session per chat of ``chats/``; returns the characters that have one."""
        chatted: set[str] = set()
        for chat_folder in _subfolders(self.reader.folder / "chats"):
            stem = chat_folder.name
            found = self.characters.get(stem)
            card = found.card if found else None
            for path in self.reader.files(f"chats/{stem}", (".jsonl",)):
                read = self.reader.read(path, parse_chat)
                if read is None:
                    continue
                chatted.add(stem)
                name = self.reader.name(path)
                planned = PlannedSession("chat", name, read[1], path.stem, card, chat=path)
                if found is not None:
                    planned.cast, planned.pictures = [found.card], found.picture()
                if card is None:
                    planned.notes.append(
                        f"its character's card (characters/{stem}.png) is missing: "
                        "imported without one"
                    )
                metadata = _chat_metadata(read[0][0])
                self.add(planned, [(card, stem)], metadata, ("character", stem))
        return chatted

    def groups(self) -> None:
        """A session per group chat of ``group chats/``, its group from ``groups/``."""
        groups: dict[str, Group] = {}
        for path in self.reader.files("groups", (".json",)):
            read = self.reader.read(path, read_group)
            if read is not None:
                for chat in read[0].chat_ids():
                    groups.setdefault(chat, read[0])
        for path in self.reader.files("group chats", (".jsonl",)):
            group = groups.get(path.stem)
            if group is None:
                self.reader.skip(path, "no group in groups/ lists this chat")
                continue
            read_chat = self.reader.read(path, parse_chat)
            if read_chat is None:
                continue
            name = self.reader.name(path)
            title = f"{group.name}: {path.stem}"
            planned = PlannedSession("group", name, read_chat[1], title, chat=path, group=group)
            members = self.cast(planned, group)
            self.add(planned, members, group.metadata_of(path.stem), ("group", group.id))

    def member(self, entry: str) -> _Character | None:
        """A group's member: its card file (``Bram.png``), or its character's name (as a
        group saved before 2023 names it)."""
        stem = _member_stem(entry)
        found = self.characters.get(stem)
        if found is None:
            named = [c for c in self.characters.values() if c.card.name == entry]
            found = named[0] if len(named) == 1 else None
        return found

    def cast(self, planned: PlannedSession, group: Group) -> list[tuple[Card | None, str]]:
        """A group's cast into ``planned`` (its members' cards and pictures, who speaks
        as whom, its settings); returns each member's card (``None``: missing) and card
        file's stem, as :meth:`add` takes them."""
        from clotho.cast import written_card
        from clotho.sessionconfig import CastSettings

        members: list[tuple[Card | None, str]] = []
        by_file: dict[str, str] = {}
        for entry in dict.fromkeys(group.members):
            found = self.member(entry)
            stem = found.path.stem if found else _member_stem(entry)
            members.append((found.card if found else None, stem))
            card = found.card if found else written_card(stem)
            if found is None:
                planned.notes.append(
                    f"member {entry}: its card is not in characters/: written in place "
                    f"as {stem!r}, with no description"
                )
            if card.name in {kept.name for kept in planned.cast}:
                planned.notes.append(
                    f"member {entry}: another member is named {card.name!r}: its card is "
                    "left out, and its messages are that member's"
                )
            else:
                planned.cast.append(card)
                planned.pictures.update(found.picture() if found else {})
            by_file[entry] = card.name
            if found is not None:
                by_file[found.file] = card.name
            planned.members.append(card.name)
        planned.members = list(dict.fromkeys(planned.members))
        planned.speakers = by_file
        planned.cast_settings = CastSettings(
            order=self.order(planned, group.activation_strategy),
            muted=list(
                dict.fromkeys(
                    by_file[entry]
                    for entry in group.disabled_members or ()
                    if entry in by_file and len(by_file[entry]) <= MAX_MEMBER_NAME
                )
            ),
        )
        muted = planned.cast_settings.muted
        if planned.cast and set(muted) >= {card.name for card in planned.cast}:
            planned.notes.append(
                "every member is muted, and a muted member never speaks here (SillyTavern "
                "lets one be made to): unmute one to play (clotho cast unmute NAME)"
            )
        if group.allow_self_responses:
            planned.notes.append(
                "the group lets a member answer itself: here, with no message of the "
                "player's, the last speaker is not picked again unless no one else can speak"
            )
        if group.generation_mode:  # 1, 2: append
            planned.notes.append(
                "the group joins its members' cards into one prompt (append mode): "
                "here each reply is played from its speaker's card"
            )
        return members

    @staticmethod
    def order(planned: PlannedSession, strategy: int | None) -> SpeakerOrder:
        """Clotho's speaker order for a group's ``activation_strategy``."""
        strategy = strategy or 0
        if strategy not in ACTIVATION_STRATEGIES:
            planned.notes.append(
                f"its activation strategy {strategy} is not one SillyTavern has: natural order"
            )
            return "natural"
        known = ACTIVATION_STRATEGIES[strategy]
        order = GROUP_ORDERS[known]
        if known in ("list", "pooled"):
            planned.notes.append(
                f"its {known} order (every member answering in turn) plays as round robin "
                "(one member a message, each after the last who spoke)"
            )
        return order

    def lone_characters(self, chatted: set[str]) -> None:
        """A session from the card of each character with no chat."""
        for stem, found in self.characters.items():
            if stem not in chatted:
                source = f"characters/{found.file}"
                planned = PlannedSession(
                    "character", source, found.digest, found.card.name, found.card
                )
                planned.cast, planned.pictures = [found.card], found.picture()
                self.add(planned, [(found.card, stem)], {}, ("character", stem))


def _member_stem(entry: str) -> str:
    """A group member's card file without its suffix (``Bram.png``: ``Bram``); a name as
    a group saved before 2023 gives it, as it is (``Mr. Smith``)."""
    path = Path(entry)
    return path.stem if path.suffix.lower() in CARD_SUFFIXES else entry


def _world(data: bytes, name: str) -> Lorebook:
    """A book of ``worlds/``, named by its file as SillyTavern names it."""
    from planner.lorebook import load_world_info

    return load_world_info(data, Path(name).stem)


def _chat_metadata(header: dict[str, Any] | None) -> dict[str, Any]:
    metadata = (header or {}).get("chat_metadata")
    return metadata if isinstance(metadata, dict) else {}


def plan_folder(path: Path, store: Store | None = None) -> Plan:
    """What importing the SillyTavern user folder at ``path`` would do. With ``store``,
    each planned session says whether the store holds it already (``status``).

    Raises:
        FolderError: ``path`` is not a SillyTavern user folder (:func:`user_folder`).
    """
    planner = _Planner(user_folder(path))
    chatted = planner.chats()
    planner.groups()
    planner.lone_characters(chatted)
    plan = planner.plan
    plan.available_books = sorted(set(planner.books) - planner.used)
    plan.skipped = planner.reader.skipped
    if store is not None:
        _mark_existing(store, plan)
    return plan


def _sources(store: Store) -> dict[tuple[str, str], str]:
    """What was imported from SillyTavern folders: (file, sha256) -> session id."""
    found: dict[tuple[str, str], str] = {}
    for session in store.sessions():
        for document in store.documents(session.id, SOURCE):
            source = json.loads(document.content)
            if document.name == SOURCE_NAME and isinstance(source, dict):
                found[(str(source.get("file")), str(source.get("sha256")))] = session.id
    return found


def _mark_existing(store: Store, plan: Plan) -> None:
    sources = _sources(store)
    files = {file for file, _ in sources}
    for planned in plan.sessions:
        existing = sources.get((planned.source, planned.digest))
        if existing is not None:
            planned.status, planned.session_id = "already there", existing
        elif planned.source in files:
            planned.status = "changed"
            planned.notes.append("changed since it was imported: imported again, a new session")


def write_plan(store: Store, plan: Plan) -> None:
    """Import each planned session not already there, each on its own; one that fails
    is marked ``failed`` with its reason (in its notes) and the others go on. Each
    planned session's ``status`` and ``session_id`` say what happened."""
    for planned in plan.sessions:
        if planned.status == "already there":
            continue
        try:
            session = _write(store, planned)
        except (ClothoError, PlannerError, MnemosyneError) as error:
            planned.status = "failed"
            planned.notes.append(str(error))
            continue
        planned.status, planned.session_id = "imported", session.id


def _write(store: Store, planned: PlannedSession) -> Session:
    """The planned session, in one transaction."""
    from clotho.lore import AVATAR, AVATAR_KEY
    from clotho.sessionconfig import SessionSettings, updated_metadata

    documents = planned.documents()
    metadata: dict[str, Any] = {}
    pictured = {name for kind, name, _ in documents if kind == AVATAR}
    if planned.cast[0].name in pictured if planned.cast else pictured:
        metadata[AVATAR_KEY] = True  # the list's picture: its character's (the first)
    if planned.cast_settings is not None:
        metadata = updated_metadata(metadata, SessionSettings(cast=planned.cast_settings))
    if planned.chat is None:
        assert planned.card is not None  # a character's own session
        player = {"player": planned.persona.name} if planned.persona else {}
        session, _ = card_session(
            store,
            planned.card,
            title=planned.title,
            documents=documents,
            metadata={**metadata, NAMES: {**player, "character": planned.card.name}},
        )
        return session
    data = read_upload(planned.chat)
    if hashlib.sha256(data).hexdigest() != planned.digest:
        raise FolderError(f"{planned.source}: changed since it was read: run the import again")
    names: dict[str, str] = {}
    if planned.persona is not None and planned.persona_linked:
        names["player"] = planned.persona.name
    if planned.cast:
        names["character"] = planned.cast[0].name  # a group's: its first member

    def keep_documents(tx: SessionTransaction) -> None:
        for kind, name, content in documents:
            tx.put_document(kind, name, content)

    return import_chat(
        store,
        data,
        planned.source,
        title=planned.title,
        names=names,
        cast=planned.speakers,
        metadata=metadata,
        also=keep_documents,
    )
