"""Lorebooks: SillyTavern World Info, entry by entry, kept losslessly.

A lorebook is read from a World Info JSON file (``{"entries": {"<uid>": {...}}}``) or
from the ``character_book`` inside a character card (see :mod:`planner.cards`). Each
entry is validated into an :class:`Entry` whose attributes are the snake_case names of
SillyTavern's fields (``keysecondary`` -> ``secondary_keys``...); the document itself is
kept (:attr:`Lorebook.raw`), so fields we do not know, and fields a file leaves out,
come back exactly as they were when the book is exported.

A character book is converted as SillyTavern converts it on import
(:func:`convert_character_book`: ``insertion_order`` -> ``order``, ``extensions.<snake_case>``
-> the World Info field...), the entry's ``extensions`` carried through whole.
:func:`world_info_document` / :func:`dump_world_info` give any book back as World Info JSON,
:func:`character_book_document` as a card's ``character_book``.

Defaults are SillyTavern's (``newWorldInfoEntryDefinition`` in world-info.js);
``None`` on a tri-state field (``case_sensitive``, ``match_whole_words``,
``scan_depth``, ``use_group_scoring``) means "use the book's / campaign's setting".
Clotho's own additions live in the entry's ``extensions["clotho"]`` (today: a
world-state ``condition``), so the file still opens in SillyTavern.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mnemosyne import jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.jsontext import preview
from mnemosyne.validation import problem_line

from .errors import LorebookError

__all__ = [
    "CharacterFilter",
    "Entry",
    "Lorebook",
    "SelectiveLogic",
    "character_book_document",
    "convert_character_book",
    "dump_world_info",
    "load_world_info",
    "new_world_info_entry",
    "parse_character_book",
    "parse_entry",
    "parse_world_info",
    "world_info_document",
]


class SelectiveLogic:
    """SillyTavern's ``selectiveLogic`` values."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")


class CharacterFilter(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    is_exclude: bool = Field(False, alias="isExclude")
    names: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)


class Entry(BaseModel):
    """One World Info entry (the typed view of its JSON; unknown fields in ``model_extra``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    uid: int
    keys: list[str] = Field(default_factory=list, alias="key")
    secondary_keys: list[str] = Field(default_factory=list, alias="keysecondary")
    comment: str = ""
    content: str = ""
    constant: bool = False
    vectorized: bool = False
    selective: bool = True
    selective_logic: int = Field(SelectiveLogic.AND_ANY, alias="selectiveLogic", ge=0, le=3)
    order: int = 100
    position: int = 0
    """0 before the character, 1 after it, 2/3 author's note top/bottom, 4 at ``depth``,
    5/6 before/after example messages, 7 outlet."""
    disable: bool = False
    exclude_recursion: bool = Field(False, alias="excludeRecursion")
    prevent_recursion: bool = Field(False, alias="preventRecursion")
    delay_until_recursion: int = Field(0, alias="delayUntilRecursion")
    """0 = no; ``true`` in a file = level 1; N = only from recursion level N."""
    probability: float | None = 100
    use_probability: bool = Field(True, alias="useProbability")
    depth: int = 4
    group: str = ""
    group_override: bool = Field(False, alias="groupOverride")
    group_weight: float = Field(100, alias="groupWeight")
    scan_depth: int | None = Field(None, alias="scanDepth")
    case_sensitive: bool | None = Field(None, alias="caseSensitive")
    match_whole_words: bool | None = Field(None, alias="matchWholeWords")
    use_group_scoring: bool | None = Field(None, alias="useGroupScoring")
    automation_id: str = Field("", alias="automationId")
    role: int | None = 0
    """For position 4: 0 system, 1 user, 2 assistant."""
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    display_index: int | None = Field(None, alias="displayIndex")
    character_filter: CharacterFilter = Field(
        default_factory=CharacterFilter, alias="characterFilter"
    )
    ignore_budget: bool = Field(False, alias="ignoreBudget")
    match_persona_description: bool = Field(False, alias="matchPersonaDescription")
    match_character_description: bool = Field(False, alias="matchCharacterDescription")
    match_character_personality: bool = Field(False, alias="matchCharacterPersonality")
    match_character_depth_prompt: bool = Field(False, alias="matchCharacterDepthPrompt")
    match_scenario: bool = Field(False, alias="matchScenario")
    match_creator_notes: bool = Field(False, alias="matchCreatorNotes")
    outlet_name: str = Field("", alias="outletName")
    triggers: list[str] = Field(default_factory=list)
    extensions: dict[str, Any] = Field(default_factory=dict)

    @field_validator("delay_until_recursion", mode="before")
    @classmethod
    def _level(cls, value: Any) -> Any:
        if value is True:
            return 1
        if value is False or value is None:
            return 0
        return value

    @field_validator(
        "selective_logic",
        "order",
        "position",
        "depth",
        "group_weight",
        "use_probability",
        "selective",
        "constant",
        "disable",
        "exclude_recursion",
        "prevent_recursion",
        "group_override",
        "ignore_budget",
        "vectorized",
        mode="before",
    )
    @classmethod
    def _null_is_default(cls, value: Any, info: Any) -> Any:
        # SillyTavern writes null for fields a user cleared; it then behaves as the default.
        if value is None:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value

    @field_validator("keys", "secondary_keys", "triggers", mode="before")
    @classmethod
    def _key_list(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):  # some tools write one key as a comma-separated string
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @property
    def condition(self) -> str | None:
        """The world-state condition (Clotho's extension), if the entry has one."""
        clotho = self.extensions.get("clotho")
        if isinstance(clotho, Mapping):
            condition = clotho.get("condition")
            if isinstance(condition, str) and condition.strip():
                return condition
        return None

    @property
    def groups(self) -> list[str]:
        """The inclusion groups (``group`` split on commas, as SillyTavern does)."""
        return [part.strip() for part in self.group.split(",") if part.strip()]


@dataclass(frozen=True)
class Lorebook:
    """A named lorebook: its entries in file order, and the document they came from."""

    name: str
    entries: tuple[Entry, ...]
    raw: dict[str, Any] = field(repr=False)
    """The document as read (a World Info file, or a card's ``character_book``)."""
    kind: str = "world_info"
    """``world_info`` (a World Info JSON file) or ``character_book`` (inside a card)."""

    def entry(self, uid: int) -> Entry:
        """The entry with this ``uid``.

        Raises:
            KeyError: no entry has it.
        """
        for entry in self.entries:
            if entry.uid == uid:
                return entry
        raise KeyError(uid)

    def same_lore(self, other: Lorebook) -> bool:
        """Whether two books hold the same lore: the same entries by what makes them fire
        and what they put in the prompt (keys, secondary keys and their logic, content,
        constant, enabled), whatever their names, uids, order of entries and bookkeeping
        fields. A card's own book and the World Info file it was made from are the same
        lore; imported twice, every entry would reach the prompt twice."""
        return sorted(map(_lore_of, self.entries)) == sorted(map(_lore_of, other.entries))


def _lore_of(entry: Entry) -> tuple[Any, ...]:
    secondary = tuple(entry.secondary_keys) if entry.selective else ()
    logic = entry.selective_logic if secondary else None
    return (tuple(entry.keys), secondary, logic, entry.content, entry.constant, entry.disable)


def _problem(error: ValidationError, where: str, rename: Mapping[str, str] | None = None) -> str:
    """One line for an entry's problems, each named by its path from ``where``
    (``entries.3.order``; ``rename`` gives the first key's name in the file)."""

    def place(loc: Sequence[int | str]) -> str:
        parts = [str(part) for part in loc]
        if rename and parts:
            parts[0] = rename.get(parts[0], parts[0])
        return ".".join([where, *parts])

    return problem_line(error, place=place, model=Entry)


def parse_entry(raw: Any, where: str) -> Entry:
    """Validate one World Info entry; ``where`` names it in errors (``entries.3``)."""
    if not isinstance(raw, Mapping):
        raise LorebookError(f"{where}: an entry must be a JSON object, not {type(raw).__name__}")
    try:
        return Entry.model_validate(dict(raw))
    except ValidationError as error:
        raise LorebookError(_problem(error, where)) from None


#: Characters of an entry's key shown in a message (keys are uids: a few digits).
_KEY_SHOWN = 40


def parse_world_info(document: Any, name: str) -> Lorebook:
    """A World Info document (already parsed JSON) as a :class:`Lorebook`.

    Raises:
        LorebookError: the document is not a World Info book; the message names the
            field (``entries.3.key: Input should be a valid list``).
    """
    if not isinstance(document, Mapping):
        raise LorebookError(f"{name}: a World Info file is a JSON object with 'entries'")
    entries = document.get("entries")
    if isinstance(entries, list):  # older exports keep entries as a list
        items = [(str(index), raw) for index, raw in enumerate(entries)]
    elif isinstance(entries, Mapping):
        items = list(entries.items())
    else:
        raise LorebookError(
            f"{name}: entries: expected an object of entries by uid, got {preview(entries)}"
        )
    parsed = []
    seen: dict[int, str] = {}
    for key, raw in items:
        label = key if len(key) <= _KEY_SHOWN else f"{key[:_KEY_SHOWN]}…"
        if isinstance(raw, Mapping) and "uid" not in raw:
            try:
                raw = {**raw, "uid": int(key)}
            except ValueError:
                raise LorebookError(
                    f"{name}: entries.{label}: no uid, and the key is no number"
                ) from None
        entry = parse_entry(raw, f"{name}: entries.{label}")
        if entry.uid in seen:
            raise LorebookError(
                f"{name}: entries.{label}: uid {entry.uid} is also entries.{seen[entry.uid]}"
            )
        seen[entry.uid] = label
        parsed.append(entry)
    # A snapshot: the book is exported from it, so later changes to ``document`` must not leak in.
    return Lorebook(name, tuple(parsed), copy.deepcopy(dict(document)))


def load_world_info(data: bytes | str, name: str) -> Lorebook:
    """Read a World Info JSON file's contents (``name`` names the book, and it in errors).

    The text is read within :data:`mnemosyne.jsontext.DOCUMENT`'s limits (size, nesting,
    number and text lengths, no ``NaN``): the book is also what a session keeps.

    Raises:
        LorebookError: not JSON, past a limit (its cause the
            :class:`~mnemosyne.errors.JsonTextError`), or not a World Info book.
    """
    try:
        document = jsontext.loads(data, jsontext.DOCUMENT)
    except JsonTextError as error:
        raise LorebookError(f"{name}: {error}") from error
    return parse_world_info(document, name)


# --- Character books (a card's ``data.character_book``) <-> World Info ----------------------

# SillyTavern 1.15's ``createDefaultWorldInfoEntry()``: an entry converted from a character
# book starts from these, in this order (the order of the keys in the exported JSON).
_ST_ENTRY_TEMPLATE: dict[str, Any] = {
    "key": [],
    "keysecondary": [],
    "comment": "",
    "content": "",
    "constant": False,
    "vectorized": False,
    "selective": True,
    "selectiveLogic": SelectiveLogic.AND_ANY,
    "addMemo": False,
    "order": 100,
    "position": 0,
    "disable": False,
    "ignoreBudget": False,
    "excludeRecursion": False,
    "preventRecursion": False,
    "matchPersonaDescription": False,
    "matchCharacterDescription": False,
    "matchCharacterPersonality": False,
    "matchCharacterDepthPrompt": False,
    "matchScenario": False,
    "matchCreatorNotes": False,
    "delayUntilRecursion": 0,
    "probability": 100,
    "useProbability": True,
    "depth": 4,
    "outletName": "",
    "group": "",
    "groupOverride": False,
    "groupWeight": 100,
    "scanDepth": None,
    "caseSensitive": None,
    "matchWholeWords": None,
    "useGroupScoring": None,
    "automationId": "",
    "role": 0,
    "sticky": None,
    "cooldown": None,
    "delay": None,
    "triggers": [],
}


def new_world_info_entry(uid: int) -> dict[str, Any]:
    """A new World Info entry as SillyTavern 1.15 makes one (``createWorldInfoEntry``):
    ``uid`` first, then every field at its default, in SillyTavern's order."""
    return {"uid": uid, **copy.deepcopy(_ST_ENTRY_TEMPLATE)}


# World Info field <- ``extensions.<key>`` of a character book entry, with the value used when
# the extension is absent or null (``convertCharacterBook``; ``useProbability`` and
# ``selectiveLogic`` really are camelCase there).
_FROM_EXTENSIONS: tuple[tuple[str, str, Any], ...] = (
    ("excludeRecursion", "exclude_recursion", False),
    ("preventRecursion", "prevent_recursion", False),
    ("delayUntilRecursion", "delay_until_recursion", False),
    ("probability", "probability", 100),
    ("useProbability", "useProbability", True),
    ("depth", "depth", 4),
    ("selectiveLogic", "selectiveLogic", SelectiveLogic.AND_ANY),
    ("outletName", "outlet_name", ""),
    ("group", "group", ""),
    ("groupOverride", "group_override", False),
    ("groupWeight", "group_weight", 100),
    ("scanDepth", "scan_depth", None),
    ("caseSensitive", "case_sensitive", None),
    ("matchWholeWords", "match_whole_words", None),
    ("useGroupScoring", "use_group_scoring", None),
    ("automationId", "automation_id", ""),
    ("role", "role", 0),
    ("vectorized", "vectorized", False),
    ("sticky", "sticky", None),
    ("cooldown", "cooldown", None),
    ("delay", "delay", None),
    ("matchPersonaDescription", "match_persona_description", False),
    ("matchCharacterDescription", "match_character_description", False),
    ("matchCharacterPersonality", "match_character_personality", False),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", False),
    ("matchScenario", "match_scenario", False),
    ("matchCreatorNotes", "match_creator_notes", False),
    ("ignoreBudget", "ignore_budget", False),
)

# Where a converted World Info field came from in the character book entry (for errors).
_BOOK_PATH = {
    "uid": "id",
    "key": "keys",
    "keysecondary": "secondary_keys",
    "order": "insertion_order",
    "disable": "enabled",
    "position": "extensions.position",
    "displayIndex": "extensions.display_index",
    "triggers": "extensions.triggers",
    **{field: f"extensions.{key}" for field, key, _ in _FROM_EXTENSIONS},
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _check_text(value: Any, path: str, error: type[Exception] = LorebookError) -> str:
    """``value`` as a string (null = ""), or ``error`` naming ``path``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise error(f"{path}: expected a string, got {_json_type(value)} ({preview(value)})")
    return value


def _check_strings(value: Any, path: str, error: type[Exception] = LorebookError) -> list[str]:
    """A list of strings (null = [], a string = its comma-separated parts), or ``error``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise error(
            f"{path}: expected a list of strings, got {_json_type(value)} ({preview(value)})"
        )
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise error(
                f"{path}.{index}: expected a string, got {_json_type(item)} ({preview(item)})"
            )
    return list(value)


def _check_object(value: Any, path: str, error: type[Exception] = LorebookError) -> dict[str, Any]:
    """A JSON object as a dict (null = {}), or ``error`` naming ``path``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"{path}: expected an object, got {_json_type(value)} ({preview(value)})")
    return dict(value)


def _book_entries(book: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(book, Mapping):
        raise LorebookError(f"{where}: expected an object, got {_json_type(book)}")
    entries = book.get("entries")
    if entries is None:
        return []
    if not isinstance(entries, list):
        raise LorebookError(f"{where}.entries: expected a list, got {_json_type(entries)}")
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise LorebookError(
                f"{where}.entries.{index}: expected an object, got {_json_type(entry)}"
            )
    return entries


def _book_uids(entries: list[Mapping[str, Any]], where: str) -> list[int]:
    """Each entry's uid: its ``id``, else its index; a uid already taken becomes the next free one.

    SillyTavern uses ``entry.id ?? index`` and keys the result by it, so a collision there
    silently drops an entry; here every entry is kept.
    """
    explicit = []
    for index, entry in enumerate(entries):
        uid = entry.get("id")
        if uid is not None and (isinstance(uid, bool) or not isinstance(uid, int)):
            raise LorebookError(
                f"{where}.entries.{index}.id: expected an integer, "
                f"got {_json_type(uid)} ({preview(uid)})"
            )
        explicit.append(uid)
    used = {uid for uid in explicit if uid is not None}
    uids = []
    taken: set[int] = set()
    for index, uid in enumerate(explicit):
        if uid is None or uid in taken:
            uid = index
            while uid in used or uid in taken:
                uid += 1
        taken.add(uid)
        uids.append(uid)
    return uids


def _converted_entry(entry: Mapping[str, Any], index: int, uid: int, where: str) -> dict[str, Any]:
    """One character book entry as SillyTavern's World Info entry (``convertCharacterBook``)."""
    path = f"{where}.entries.{index}"
    extensions = _check_object(entry.get("extensions"), f"{path}.extensions")
    enabled = entry.get("enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise LorebookError(
            f"{path}.enabled: expected true or false, "
            f"got {_json_type(enabled)} ({preview(enabled)})"
        )
    position = extensions.get("position")
    if position is None:
        position = 0 if entry.get("position") == "before_char" else 1
    display_index = extensions.get("display_index")
    converted = copy.deepcopy(_ST_ENTRY_TEMPLATE)
    converted.update(
        uid=uid,
        key=_check_strings(entry.get("keys"), f"{path}.keys"),
        keysecondary=_check_strings(entry.get("secondary_keys"), f"{path}.secondary_keys"),
        comment=entry.get("comment") or "",
        content=entry.get("content") if entry.get("content") is not None else "",
        constant=entry.get("constant") or False,
        selective=entry.get("selective") or False,
        order=entry.get("insertion_order") if entry.get("insertion_order") is not None else 100,
        position=position,
        disable=not enabled,  # as SillyTavern: an entry without "enabled" is disabled
        addMemo=bool(entry.get("comment")),
        displayIndex=index if display_index is None else display_index,
        triggers=extensions.get("triggers") or [],
        extensions=extensions,
    )
    for field_name, key, default in _FROM_EXTENSIONS:
        value = extensions.get(key)
        converted[field_name] = default if value is None else value
    return copy.deepcopy(converted)


def _converted(book: Any, where: str) -> list[tuple[int, dict[str, Any]]]:
    entries = _book_entries(book, where)
    uids = _book_uids(entries, where)
    return [
        (index, _converted_entry(entry, index, uid, where))
        for index, (entry, uid) in enumerate(zip(entries, uids, strict=True))
    ]


def convert_character_book(book: Any, where: str = "character_book") -> dict[str, Any]:
    """A card's character book as a World Info document, as SillyTavern converts it on import.

    Args:
        book: the ``character_book`` object (parsed JSON).
        where: how errors name the book (``data.character_book`` inside a card).

    Returns:
        ``{"entries": {"<uid>": {...}}, "originalData": <a copy of book>}``: each entry has
        every World Info field, ``extensions.<snake_case>`` mapped back to its field, and the
        entry's ``extensions`` kept whole (Clotho's ``extensions.clotho`` included).

    Raises:
        LorebookError: the book's shape is wrong; the message names the field
            (``data.character_book.entries.2.keys: expected a list of strings, got a number``).
    """
    entries = {str(converted["uid"]): converted for _, converted in _converted(book, where)}
    return {"entries": entries, "originalData": copy.deepcopy(dict(book))}


def parse_character_book(book: Any, name: str, where: str = "character_book") -> Lorebook:
    """A card's character book as a :class:`Lorebook` of World Info entries.

    Args:
        book: the ``character_book`` object (parsed JSON).
        name: the book's name (a card uses the book's ``name``, else "<character>'s Lorebook").
        where: how errors name the book.

    Returns:
        A book of kind ``character_book`` whose ``raw`` is a copy of ``book`` as read.

    Raises:
        LorebookError: a field has the wrong shape or type; the message names its path in
            the character book (``data.character_book.entries.0.extensions.probability: ...``).
    """
    entries = []
    for index, converted in _converted(book, where):
        try:
            entries.append(Entry.model_validate(converted))
        except ValidationError as error:
            raise LorebookError(_problem(error, f"{where}.entries.{index}", _BOOK_PATH)) from None
    return Lorebook(name, tuple(entries), copy.deepcopy(dict(book)), kind="character_book")


def world_info_document(book: Lorebook) -> dict[str, Any]:
    """The World Info JSON document for a book (a fresh copy, safe to change).

    Args:
        book: a book read from a World Info file or from a card.

    Returns:
        For a World Info book, exactly the document read (unknown fields, absent fields and
        key order as they were); for a character book, SillyTavern's conversion of it
        (:func:`convert_character_book`), with the character book under ``originalData``.
    """
    if book.kind == "character_book":
        return convert_character_book(book.raw)
    if book.kind != "world_info":
        raise LorebookError(f"{book.name}: unknown kind of lorebook {book.kind!r}")
    return copy.deepcopy(book.raw)


def dump_world_info(book: Lorebook) -> str:
    """The book as the text of a World Info ``.json`` file.

    Written as SillyTavern writes it (``JSON.stringify(data, null, 4)``: 4-space indent,
    non-ASCII as is) plus a final newline, so SillyTavern's own files come back byte for byte.
    """
    return json.dumps(world_info_document(book), ensure_ascii=False, indent=4) + "\n"


def _number(value: Any) -> Any:
    # Entry keeps probability and group weight as floats; 100.0 is written 100, as ST does.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def character_book_document(book: Lorebook) -> dict[str, Any]:
    """The book as a card's ``character_book`` (for writing it into a card).

    A book read from a card comes back exactly as read. A World Info book is converted as
    SillyTavern does when it embeds a world in a card (``convertWorldInfoToCharacterBook``),
    from the entries' effective values, with the 1.15 fields too (``triggers``,
    ``ignore_budget``, ``match_*``, ``outlet_name``); each entry's own ``extensions``
    (``extensions.clotho``...) are kept under the ST fields.
    """
    if book.kind == "character_book":
        return copy.deepcopy(book.raw)
    entries = []
    for entry in book.entries:
        fields = entry.model_dump(by_alias=True, mode="json")
        extensions = copy.deepcopy(entry.extensions)
        extensions["position"] = entry.position
        extensions["display_index"] = entry.display_index
        extensions["triggers"] = list(entry.triggers)
        extensions.update({key: _number(fields[name]) for name, key, _ in _FROM_EXTENSIONS})
        entries.append(
            {
                "id": entry.uid,
                "keys": list(entry.keys),
                "secondary_keys": list(entry.secondary_keys),
                "comment": entry.comment,
                "content": entry.content,
                "constant": entry.constant,
                "selective": entry.selective,
                "insertion_order": entry.order,
                "enabled": not entry.disable,
                "position": "before_char" if entry.position == 0 else "after_char",
                "use_regex": True,
                "extensions": extensions,
            }
        )
    return {"entries": entries, "name": book.name}
