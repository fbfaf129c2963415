"""A SillyTavern user's own JSON files: ``settings.json`` (the personas, the World Info
books linked to characters and to every chat) and ``groups/*.json`` (a group chat's
group), read as far as ``clotho import sillytavern`` needs them (:mod:`clotho.stfolder`),
within :data:`mnemosyne.jsontext.DOCUMENT`'s limits; any other field is left alone.

Who the player is, by SillyTavern's rule (``public/scripts/personas.js``): the persona
locked to the chat (``chat_metadata.persona``), else a persona connected to the
character or the group, else the default persona, else the persona of the avatar in
use, else the user's name. The books a chat plays with (``world-info.js``): the
character's (``extensions.world`` on its card, and ``charLore``'s extra books for its
card file), the chat's own (``chat_metadata.world_info``), and the global selection.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from clotho.errors import ClothoError
from mnemosyne import jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.validation import problem_line

__all__ = [
    "ACTIVATION_STRATEGIES",
    "MAX_GROUP_MEMBERS",
    "Group",
    "Persona",
    "Personas",
    "SillyTavernFileError",
    "UserSettings",
    "linked_books",
    "read_group",
    "read_settings",
]

M = TypeVar("M", bound=BaseModel)


class SillyTavernFileError(ClothoError, ValueError):
    """A ``settings.json`` or group file that cannot be read (the file and field named)."""

    code = "invalid_sillytavern_file"


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Connection(_Model):
    type: str = ""
    id: str = ""
    """A character's card file (``Mira.png``) or a group's id."""


class _PersonaDescription(_Model):
    description: str = ""
    connections: list[_Connection] = Field(default_factory=list)


class _PowerUser(_Model):
    personas: dict[str, str] = Field(default_factory=dict)
    """Avatar file -> the persona's name."""
    persona_descriptions: dict[str, _PersonaDescription] = Field(default_factory=dict)
    default_persona: str | None = None


class _CharacterLore(_Model):
    name: str
    """The character's card file without its suffix."""
    extraBooks: list[str] = Field(default_factory=list)


class _WorldInfoSelection(_Model):
    globalSelect: list[str] = Field(default_factory=list)
    charLore: list[_CharacterLore] = Field(default_factory=list)


class _WorldInfoSettings(_Model):
    world_info: _WorldInfoSelection = Field(default_factory=_WorldInfoSelection)


class UserSettings(_Model):
    """What is read of ``settings.json``."""

    username: str | None = None
    user_avatar: str | None = None
    power_user: _PowerUser = Field(default_factory=_PowerUser)
    world_info_settings: _WorldInfoSettings = Field(default_factory=_WorldInfoSettings)


def _id_text(value: Any) -> Any:
    """An id as text: SillyTavern wrote a group's ids as numbers in 2023 (``Date.now()``)."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


GroupId = Annotated[str, BeforeValidator(_id_text)]


def _number_or_none(value: Any) -> Any:
    """A group's strategy or mode as SillyTavern reads it (``Number(value)``): ``false``
    (as real groups hold it) is 0, a number text its number, anything else none."""
    if isinstance(value, bool | int) or value is None:
        return int(value) if value is not None else None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


GroupNumber = Annotated[int | None, BeforeValidator(_number_or_none)]


#: SillyTavern's ``group_activation_strategy`` (``public/scripts/group-chats.js``): who
#: answers the player in a group: 0 natural (names mentioned, then talkativeness), 1 list
#: (every member in the group's order), 2 manual (no one until the player picks), 3 pooled
#: (at random, one who has not spoken since the player's last message).
ACTIVATION_STRATEGIES = {0: "natural", 1: "list", 2: "manual", 3: "pooled"}
#: The most members a group is read with (a cast's settings name at most as many).
MAX_GROUP_MEMBERS = 200
MemberFile = Annotated[str, Field(min_length=1, max_length=1_000)]


class Group(_Model):
    """What is read of a ``groups/*.json`` file."""

    id: GroupId
    name: Annotated[str, Field(max_length=1_000)]
    members: Annotated[list[MemberFile], Field(max_length=MAX_GROUP_MEMBERS)] = Field(
        default_factory=list
    )
    """The members' card files (``Seraphina.png``; a group saved before 2023 names them
    by the character's name)."""
    disabled_members: Annotated[list[MemberFile] | None, Field(max_length=MAX_GROUP_MEMBERS)] = None
    """The members muted in the group (their card files): they never speak unasked."""
    activation_strategy: GroupNumber = None
    """Who answers the player (:data:`ACTIVATION_STRATEGIES`; ``None``: natural; real
    groups hold ``false`` for natural)."""
    generation_mode: GroupNumber = None
    """0 swap (each reply from its speaker's card; ``None`` too), 1 and 2 append (the
    members' cards joined into one prompt)."""
    allow_self_responses: bool | None = None
    """Whether a member may speak twice in a row with no message of the player's."""
    chats: list[GroupId] = Field(default_factory=list)
    """Its chats' ids (``group chats/<id>.jsonl``)."""
    chat_id: GroupId | None = None
    chat_metadata: dict[str, Any] = Field(default_factory=dict)
    """The metadata of the chat ``chat_id`` (a group chat has no header line)."""
    past_metadata: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The metadata of the group's other chats, by id."""

    def chat_ids(self) -> list[str]:
        return self.chats or [self.chat_id or self.id]

    def metadata_of(self, chat: str) -> dict[str, Any]:
        """The metadata of the group's chat ``chat`` (its id)."""
        return self.chat_metadata if chat == self.chat_id else self.past_metadata.get(chat, {})


def _read(model: type[M], data: bytes, name: str) -> M:
    try:
        return model.model_validate(jsontext.loads(data, jsontext.DOCUMENT))
    except JsonTextError as error:
        raise SillyTavernFileError(f"{name}: {error}") from error
    except ValidationError as error:
        raise SillyTavernFileError(problem_line(error, name, model=model)) from None


def read_settings(data: bytes, name: str = "settings.json") -> UserSettings:
    """``settings.json``'s personas and book links.

    Raises:
        SillyTavernFileError: not JSON, past a limit, or a field of the wrong type (named).
    """
    return _read(UserSettings, data, name)


def read_group(data: bytes, name: str = "group") -> Group:
    """A group file (``groups/<id>.json``).

    Raises:
        SillyTavernFileError: not JSON, past a limit, or a field of the wrong type (named).
    """
    return _read(Group, data, name)


@dataclass(frozen=True)
class Persona:
    """The player as SillyTavern names them."""

    name: str
    description: str = ""
    avatar: str | None = None
    """Its avatar file (what SillyTavern keys a persona by); ``None``: the user's name."""


class Personas:
    """The user's personas, and the one that plays a chat (the module's rule)."""

    def __init__(self, settings: UserSettings) -> None:
        self.settings = settings
        described = settings.power_user.persona_descriptions
        self.known = {
            avatar: Persona(name, described.get(avatar, _PersonaDescription()).description, avatar)
            for avatar, name in settings.power_user.personas.items()
            if name.strip()
        }

    def of(self, chat_metadata: dict[str, Any], connection: tuple[str, str]) -> Persona | None:
        """The player of a chat with this metadata, of ``connection``: ``("character",
        card file without suffix)`` or ``("group", group id)``. ``None``: no settings
        name anyone."""
        linked = self.linked(chat_metadata, connection)
        if linked is not None:
            return linked
        for chosen in (self.settings.power_user.default_persona, self.settings.user_avatar):
            if chosen and chosen in self.known:
                return self.known[chosen]
        return Persona(self.settings.username) if self.settings.username else None

    def linked(self, chat_metadata: dict[str, Any], connection: tuple[str, str]) -> Persona | None:
        """The persona locked to the chat, else the one connected to the character or
        group (``None``: neither; the default one is not linked)."""
        locked = chat_metadata.get("persona")
        if isinstance(locked, str) and locked in self.known:
            return self.known[locked]
        for avatar, described in self.settings.power_user.persona_descriptions.items():
            for link in described.connections:
                target = PurePosixPath(link.id).stem if link.type == "character" else link.id
                if (link.type, target) == connection and avatar in self.known:
                    return self.known[avatar]
        return None


def linked_books(
    settings: UserSettings,
    characters: Iterable[tuple[str | None, str]],
    chat_metadata: dict[str, Any],
) -> list[str]:
    """The names of the books a chat plays with, each once, in SillyTavern's order
    (character, chat, global). ``characters``: each character's linked book (its
    card's ``extensions.world``, or ``None``) and card file without its suffix."""
    selection = settings.world_info_settings.world_info
    extra = {lore.name: lore.extraBooks for lore in selection.charLore}
    names: list[str] = []
    for world, stem in characters:
        if world:
            names.append(world)
        names.extend(extra.get(stem, []))
    chat_book = chat_metadata.get("world_info")
    if isinstance(chat_book, str) and chat_book:
        names.append(chat_book)
    names.extend(selection.globalSelect)
    return list(dict.fromkeys(names))
