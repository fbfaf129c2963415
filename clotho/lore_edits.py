"""The lore manager's changes to a session's lorebooks: an entry changed, added or
deleted, a whole book switched off or on, or removed.

A book stays the World Info document it came as (:mod:`clotho.lore`): a change writes
only the fields it names into the entry's JSON, so the fields Clotho does not know, and
those the file left out, come back on export as they came. The entry as changed is
validated by the model the importer uses (:func:`planner.lorebook.parse_entry`), and a
condition on the world state by its parser, before anything is written; every change
is one transaction of the caller's (``tx``), so a refused one changes nothing. A turn
after it plays the book as changed: the engine is built again when the session's
documents change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clotho.lore import LOREBOOK, LOREBOOK_OFF
from mnemosyne import jsontext
from mnemosyne.errors import NotFoundError

if TYPE_CHECKING:
    from mnemosyne import SessionTransaction, Store
    from planner.lorebook import Entry, Lorebook

__all__ = [
    "BookView",
    "EntryFields",
    "add_entry",
    "book_view",
    "books_listed",
    "change_entry",
    "delete_entry",
    "entry_fields",
    "remove_book",
    "switch_book",
]

Count = Annotated[int, Field(ge=0, le=1_000_000)]


class EntryFields(BaseModel):
    """The fields of a World Info entry that players edit, by their snake_case names
    (SillyTavern's file names them ``key``, ``keysecondary``, ``selectiveLogic``...).
    A change gives only the fields it changes; ``null`` is allowed where the entry has
    no value (no timed effect, the campaign's setting, no condition)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"keys": ["dragon", "wyrm"], "sticky": 2}]},
    )

    comment: Annotated[str, Field(max_length=2000)] | None = Field(
        default=None, description="The entry's title (SillyTavern's 'Title/Memo')."
    )
    keys: Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=500)] | None = (
        Field(default=None, description="Primary keys (any fires it); `/regex/flags` allowed.")
    )
    secondary_keys: (
        Annotated[list[Annotated[str, Field(max_length=2000)]], Field(max_length=500)] | None
    ) = Field(default=None, description="Secondary keys, read with `selective_logic`.")
    selective: bool | None = Field(default=None, description="Whether secondary keys count.")
    selective_logic: Annotated[int, Field(ge=0, le=3)] | None = Field(
        default=None, description="0 AND ANY, 1 NOT ALL, 2 NOT ANY, 3 AND ALL."
    )
    content: Annotated[str, Field(max_length=1_000_000)] | None = None
    constant: bool | None = Field(default=None, description="Always fires.")
    enabled: bool | None = Field(default=None, description="`false`: the entry never fires.")
    vectorized: bool | None = Field(default=None, description="Found by meaning too.")
    position: Annotated[int, Field(ge=0, le=7)] | None = Field(
        default=None,
        description="0 before the character, 1 after it, 4 in the history at `depth`, "
        "7 its outlet (2, 3, 5, 6: after the character in Clotho's prompt).",
    )
    depth: Count | None = Field(default=None, description="Position 4: messages from the end.")
    role: Annotated[int, Field(ge=0, le=2)] | None = Field(
        default=None, description="Position 4: 0 system, 1 user, 2 assistant."
    )
    order: Annotated[int, Field(ge=-1_000_000, le=1_000_000)] | None = Field(
        default=None, description="Insertion order: higher fires first and goes nearer the end."
    )
    probability: Annotated[float, Field(ge=0, le=100)] | None = None
    use_probability: bool | None = None
    sticky: Count | None = Field(default=None, description="Stays for N messages once fired.")
    cooldown: Count | None = Field(default=None, description="Cannot fire for N messages after.")
    delay: Count | None = Field(default=None, description="Not before the chat has N messages.")
    group: Annotated[str, Field(max_length=2000)] | None = Field(
        default=None, description="Inclusion groups, comma-separated."
    )
    scan_depth: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        default=None, description="Messages scanned; null: the campaign's `scan_depth`."
    )
    case_sensitive: bool | None = Field(default=None, description="null: the campaign's.")
    match_whole_words: bool | None = Field(default=None, description="null: the campaign's.")
    exclude_recursion: bool | None = None
    prevent_recursion: bool | None = None
    ignore_budget: bool | None = None
    outlet_name: Annotated[str, Field(max_length=200)] | None = None
    condition: Annotated[str, Field(max_length=2000)] | None = Field(
        default=None,
        description="Clotho's condition on the world state (`hp < 10`); null or empty: none.",
    )

    @model_validator(mode="after")
    def _no_null_where_a_value_is_needed(self) -> EntryFields:
        wrong = sorted(
            name
            for name in self.model_fields_set
            if getattr(self, name) is None and name not in _NULLABLE
        )
        if wrong:
            raise ValueError(f"{', '.join(wrong)}: a value is needed, not null")
        return self


#: The fields whose ``null`` means something (no timed effect, the campaign's setting).
_NULLABLE = frozenset(
    {"sticky", "cooldown", "delay", "scan_depth", "case_sensitive", "match_whole_words"}
    | {"condition", "role"}
)


@dataclass(frozen=True)
class BookView:
    """A book of the session as the lore manager shows it."""

    book: Lorebook
    enabled: bool


def entry_fields(entry: Entry) -> dict[str, Any]:
    """An entry's :class:`EntryFields`, every one, with its uid."""
    values: dict[str, Any] = {"uid": entry.uid}
    for name in EntryFields.model_fields:
        if name == "enabled":
            values[name] = not entry.disable
        else:
            values[name] = getattr(entry, name)
    return values


def _document(tx: SessionTransaction, name: str) -> dict[str, Any]:
    """The book's World Info document, parsed (a copy to change)."""
    for document in tx.documents(LOREBOOK):
        if document.name == name:
            parsed = jsontext.loads(document.content, jsontext.DOCUMENT)
            if isinstance(parsed, dict):
                return parsed
    raise NotFoundError(f"this session has no lorebook named {name!r}")


def book_view(store: Store, session_id: str, name: str) -> BookView:
    """A book of the session, and whether it plays.

    Raises:
        NotFoundError: the session has no book of that name.
    """
    from planner.lorebook import load_world_info

    for document in store.documents(session_id, LOREBOOK):
        if document.name == name:
            off = {d.name for d in store.documents(session_id, LOREBOOK_OFF)}
            return BookView(load_world_info(document.content, name), name not in off)
    raise NotFoundError(f"this session has no lorebook named {name!r}")


def books_listed(store: Store, session_id: str) -> list[BookView]:
    """Every book of the session, switched off or not, in the order they were added
    (read at one moment)."""
    from planner.lorebook import load_world_info

    documents = store.documents(session_id)
    off = {d.name for d in documents if d.kind == LOREBOOK_OFF}
    return [
        BookView(load_world_info(d.content, d.name), d.name not in off)
        for d in documents
        if d.kind == LOREBOOK
    ]


def _uid_of(key: str | int, raw: Any) -> int | None:
    if isinstance(raw, Mapping) and isinstance(raw.get("uid"), int):
        return int(raw["uid"])
    try:
        return int(key)
    except ValueError:
        return None


def _slot(entries: Any, uid: int, book: str) -> str | int:
    """Where entry ``uid`` is in ``entries`` (its key, or its index in a list)."""
    items = entries.items() if isinstance(entries, dict) else enumerate(entries)
    for key, raw in items:
        if _uid_of(key, raw) == uid:
            return key
    raise NotFoundError(f"the lorebook {book!r} has no entry {uid}")


def _check(raw: dict[str, Any], book: str, uid: int) -> Entry:
    """The entry as changed, validated by the importer's model (and its condition)."""
    from planner.conditions import parse_condition
    from planner.lorebook import parse_entry

    entry = parse_entry(raw, f"{book}: entries.{uid}")
    if entry.condition is not None:
        parse_condition(entry.condition)
    return entry


def _written(raw: dict[str, Any], fields: EntryFields) -> dict[str, Any]:
    """``raw`` with the fields given written in, by the names the file uses."""
    from planner.lorebook import Entry

    out = copy.deepcopy(raw)
    for name in fields.model_fields_set:
        value = getattr(fields, name)
        if name == "enabled":
            out["disable"] = not value
        elif name == "condition":
            _write_condition(out, value)
        else:
            out[Entry.model_fields[name].alias or name] = value
    return out


def _write_condition(raw: dict[str, Any], condition: str | None) -> None:
    extensions = raw.get("extensions")
    extensions = dict(extensions) if isinstance(extensions, Mapping) else {}
    clotho = extensions.get("clotho")
    clotho = dict(clotho) if isinstance(clotho, Mapping) else {}
    if condition is not None and condition.strip():
        clotho["condition"] = condition.strip()
    else:
        clotho.pop("condition", None)
    if clotho:
        extensions["clotho"] = clotho
    else:
        extensions.pop("clotho", None)
    raw["extensions"] = extensions


def _store(tx: SessionTransaction, name: str, document: dict[str, Any]) -> Lorebook:
    """Keep the changed document, after reading it back as a whole book."""
    from planner.lorebook import dump_world_info, parse_world_info

    book = parse_world_info(document, name)
    tx.put_document(LOREBOOK, name, dump_world_info(book))
    return book


def change_entry(
    tx: SessionTransaction, name: str, uid: int, fields: EntryFields
) -> tuple[Entry, bool]:
    """Write ``fields`` into entry ``uid`` of book ``name``; the entry as it is now, and
    whether its JSON changed (if not, nothing is written: the version stays).

    Raises:
        NotFoundError: no such book or entry.
        LorebookError: the entry as changed is not valid (the field is named).
        ConditionError: the condition does not parse.
    """
    document = _document(tx, name)
    entries = document.get("entries")
    key = _slot(entries, uid, name)
    changed = _written(dict(entries[key]), fields)  # type: ignore[index]
    entry = _check({**changed, "uid": uid}, name, uid)  # a uid its key gives stays so
    if changed == entries[key]:  # type: ignore[index]
        return entry, False
    entries[key] = changed  # type: ignore[index]
    _store(tx, name, document)
    return entry, True


def add_entry(tx: SessionTransaction, name: str, fields: EntryFields) -> Entry:
    """A new entry in book ``name`` (SillyTavern's new entry, with ``fields`` written
    in), its uid the next free one.

    Raises:
        NotFoundError: no such book.
        LorebookError, ConditionError: as :func:`change_entry`.
    """
    from planner.lorebook import new_world_info_entry

    document = _document(tx, name)
    entries = document.get("entries")
    items = entries.items() if isinstance(entries, dict) else enumerate(entries or [])
    taken: list[int] = []  # every uid and every numeric key (a file may key an entry apart)
    for key, raw in items:
        taken.extend(n for n in (_uid_of(key, raw), _uid_of(key, None)) if n is not None)
    uid = max(taken, default=-1) + 1
    raw = _written(new_world_info_entry(uid), fields)
    raw["displayIndex"] = uid
    entry = _check(raw, name, uid)
    if isinstance(entries, list):
        entries.append(raw)
    else:
        document["entries"] = {**(entries or {}), str(uid): raw}
    _store(tx, name, document)
    return entry


def delete_entry(tx: SessionTransaction, name: str, uid: int) -> None:
    """Delete entry ``uid`` of book ``name`` (the others keep their uids).

    Raises:
        NotFoundError: no such book or entry.
    """
    document = _document(tx, name)
    entries = document.get("entries")
    key = _slot(entries, uid, name)
    if isinstance(entries, list):
        for index, raw in enumerate(entries):  # their uids were their places: keep them
            if isinstance(raw, dict) and "uid" not in raw:
                raw["uid"] = index
    del entries[key]  # type: ignore[union-attr]
    _store(tx, name, document)


def switch_book(tx: SessionTransaction, name: str, enabled: bool) -> bool:
    """Switch book ``name`` on or off (off: it stays, and does not play); whether it
    changed.

    Raises:
        NotFoundError: no such book.
    """
    _document(tx, name)
    off = {document.name for document in tx.documents(LOREBOOK_OFF)}
    if enabled and name in off:
        tx.remove_document(LOREBOOK_OFF, name)
        return True
    if not enabled and name not in off:
        tx.put_document(LOREBOOK_OFF, name, "{}")
        return True
    return False


def remove_book(tx: SessionTransaction, name: str) -> int:
    """Remove book ``name`` from the session; how many entries it had.

    Raises:
        NotFoundError: no such book.
    """
    document = _document(tx, name)
    tx.remove_document(LOREBOOK, name)
    if any(d.name == name for d in tx.documents(LOREBOOK_OFF)):
        tx.remove_document(LOREBOOK_OFF, name)
    entries = document.get("entries")
    return len(entries) if isinstance(entries, dict | list) else 0
