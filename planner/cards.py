"""Character cards: SillyTavern's PNG and JSON cards (V1, V2 and V3), read into a :class:`Card`.

A PNG card carries its JSON in a text chunk: ``ccv3`` (a V3 card) or ``chara`` (V2, or V1),
base64 of UTF-8 (``src/character-card-parser.js``). When both are present ``ccv3`` wins, as
in SillyTavern and the V3 spec. The chunks are walked here with the standard library; every
chunk's CRC is checked and the file must reach its ``IEND`` chunk, as SillyTavern's reader
(png-chunks-extract) requires: a card from a corrupted or cut-off file is refused, not half
read. ``tEXt`` is what SillyTavern writes; ``zTXt`` and ``iTXt`` chunks are read too.

A JSON card is told from a PNG by its content. The card's ``data.character_book``, if any,
becomes a :class:`~planner.lorebook.Lorebook` of World Info entries
(:func:`~planner.lorebook.parse_character_book`).

A card is a file from anyone: its JSON is read within :data:`mnemosyne.jsontext.DOCUMENT`'s
limits, a compressed text chunk is inflated only up to what a card's text can be (a
``zTXt`` chunk of a few hundred KB can inflate to gigabytes), and a PNG of more chunks
than images have is refused before they are walked.
"""

from __future__ import annotations

import base64
import binascii
import copy
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from mnemosyne import jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.jsontext import preview

from .errors import CardError, LorebookError
from .lorebook import (
    Lorebook,
    _check_object,
    _check_strings,
    _check_text,
    _json_type,
    parse_character_book,
)

__all__ = ["PNG_SIGNATURE", "Card", "load_card", "parse_card", "png_card_text"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_CHUNK_TEXT = jsontext.MAX_DOCUMENT_BYTES * 3 // 2
"""Bytes of the card's text chunk, inflated: the base64 of the largest card JSON
(4/3 of :data:`mnemosyne.jsontext.MAX_DOCUMENT_BYTES`), with room for the line breaks
some writers put in base64. A compressed chunk is inflated no further."""
MAX_CHUNKS = 100_000
"""Chunks of one PNG. Encoders split the image data into chunks of 8 KB or more, so a
PNG of the largest upload has fewer than ten thousand; each chunk costs a CRC check and
a step of the walk."""
SHOWN_KEYWORDS = 10
"""Text chunks named in the message of a PNG with no card chunk (the rest counted)."""
_SPECS = {"chara_card_v2": "v2", "chara_card_v3": "v3"}
_TEXT_FIELDS = (
    "description",
    "personality",
    "scenario",
    "first_mes",
    "mes_example",
    "creator_notes",
    "system_prompt",
    "post_history_instructions",
    "creator",
)
# SillyTavern's readFromV2: a field missing from ``data`` is taken from the V1 top level.
_V1_FALLBACK = frozenset(
    ("name", "description", "personality", "scenario", "first_mes", "mes_example", "tags")
)


@dataclass(frozen=True)
class Card:
    """A character card: its fields, its embedded lorebook, and the JSON it was read from."""

    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    mes_example: str = ""
    creator_notes: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    alternate_greetings: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    creator: str = ""
    character_version: str = ""
    extensions: dict[str, Any] = field(default_factory=dict)
    book: Lorebook | None = None
    """The embedded ``data.character_book`` as World Info entries (kind ``character_book``)."""
    spec: str = "v2"
    """``v1``, ``v2`` or ``v3``."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    """The whole card JSON as read."""

    @property
    def world(self) -> str | None:
        """The World Info book SillyTavern links to the character (``extensions.world``)."""
        world = self.extensions.get("world")
        return world if isinstance(world, str) and world else None


def _chunks(data: bytes, name: str) -> Iterator[tuple[bytes, int, memoryview]]:
    """Each chunk's (type, offset, data) up to ``IEND``; a cut or corrupted chunk is a CardError."""
    view = memoryview(data)
    offset = len(PNG_SIGNATURE)
    for _ in range(MAX_CHUNKS):
        if len(data) - offset < 8:
            if offset == len(data):
                raise CardError(
                    f"{name}: truncated PNG: it ends at byte {offset} with no IEND chunk"
                )
            raise CardError(
                f"{name}: truncated PNG: the chunk header at byte {offset} is cut short "
                f"({len(data) - offset} of 8 bytes)"
            )
        length, kind = struct.unpack_from(">I4s", data, offset)
        label = kind.decode("latin-1")
        end = offset + 12 + length
        if end > len(data):
            raise CardError(
                f"{name}: truncated PNG: chunk {label!r} at byte {offset} declares {length} "
                f"bytes of data, but the file ends {len(data) - offset - 8} bytes into it"
            )
        (crc,) = struct.unpack_from(">I", data, end - 4)
        if zlib.crc32(view[offset + 4 : end - 4]) != crc:
            raise CardError(
                f"{name}: corrupted PNG: chunk {label!r} at byte {offset} fails its CRC check"
            )
        yield kind, offset, view[offset + 8 : end - 4]
        if kind == b"IEND":
            return
        offset = end
    raise CardError(f"{name}: more than {MAX_CHUNKS:,} chunks in the PNG (the limit)")


def _inflate(data: bytes, where: str) -> bytes:
    """A zlib stream inflated to at most :data:`MAX_CHUNK_TEXT` bytes (then refused)."""
    inflater = zlib.decompressobj()
    text = inflater.decompress(data, MAX_CHUNK_TEXT + 1)
    if len(text) > MAX_CHUNK_TEXT:
        raise CardError(
            f"{where}: the chunk inflates past {MAX_CHUNK_TEXT:,} bytes, more than a card's "
            "text can be (the limit)"
        )
    if not inflater.eof:
        raise CardError(f"{where}: the chunk cannot be decoded (its compressed text is cut short)")
    return text


def _chunk_text(kind: bytes, payload: bytes, where: str) -> str:
    """The text of a ``tEXt``/``zTXt``/``iTXt`` chunk (after its keyword and NUL)."""
    if len(payload) > MAX_CHUNK_TEXT:
        raise CardError(
            f"{where}: {len(payload):,} bytes, more than a card's text can be "
            f"({MAX_CHUNK_TEXT:,}, the limit)"
        )
    try:
        if kind == b"tEXt":
            return payload.decode("latin-1")
        if kind == b"zTXt":
            return _inflate(payload[1:], where).decode("latin-1")
        flag, _method = payload[0], payload[1]
        _language, _, rest = payload[2:].partition(b"\0")
        _translated, _, text = rest.partition(b"\0")
        return (_inflate(text, where) if flag else text).decode("utf-8")
    except (zlib.error, IndexError, UnicodeDecodeError) as error:
        raise CardError(f"{where}: the chunk cannot be decoded ({error})") from None


def png_card_text(data: bytes, name: str = "card") -> str:
    """The card JSON text held in a PNG (``ccv3`` preferred to ``chara``), not yet parsed.

    Args:
        data: the PNG file's bytes.
        name: names the file in errors.

    Raises:
        CardError: not a PNG, a truncated or corrupted PNG (the chunk and its byte offset
            named), no ``chara``/``ccv3`` text chunk, bad base64, or text that is not UTF-8.
    """
    if not data.startswith(PNG_SIGNATURE):
        raise CardError(f"{name}: not a PNG (no PNG signature)")
    found: list[str] = []
    cards: dict[str, tuple[bytes, int, bytes]] = {}
    for kind, offset, payload in _chunks(data, name):
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        keyword, _, rest = bytes(payload).partition(b"\0")
        found.append(keyword.decode("latin-1"))
        cards.setdefault(keyword.lower().decode("latin-1"), (kind, offset, rest))
    chosen = next((keyword for keyword in ("ccv3", "chara") if keyword in cards), None)
    if chosen is None:
        seen = ", ".join(repr(keyword[:40]) for keyword in found[:SHOWN_KEYWORDS]) or "none"
        if len(found) > SHOWN_KEYWORDS:
            seen += f" and {len(found) - SHOWN_KEYWORDS:,} more"
        raise CardError(f"{name}: no 'chara' or 'ccv3' text chunk in the PNG (text chunks: {seen})")
    kind, offset, card_payload = cards[chosen]
    where = f"{name}: {chosen!r} {kind.decode()} chunk at byte {offset}"
    text = "".join(_chunk_text(kind, card_payload, where).split())
    text = text.translate(str.maketrans("-_", "+/")) + "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise CardError(f"{where}: not valid base64 ({error})") from None
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CardError(f"{where}: the base64 does not decode to UTF-8 text ({error})") from None


def _version_text(value: Any, path: str) -> str:
    # Cards in the wild write the version as a number (1, 1.2); kept as its text.
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return _check_text(value, path, CardError)


def _character_book(value: Any, character: str, path: str) -> Lorebook | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise CardError(f"{path}: expected an object, got {_json_type(value)}")
    name = _check_text(value.get("name"), f"{path}.name", CardError) or f"{character}'s Lorebook"
    return parse_character_book(value, name, path)


def _v1(document: Mapping[str, Any]) -> dict[str, Any]:
    notes = document.get("creatorcomment")
    notes_path = "creatorcomment"
    if notes is None:
        notes, notes_path = document.get("creator_notes"), "creator_notes"
    fields = {
        key: _check_text(document.get(key), key, CardError)
        for key in ("description", "personality", "scenario", "first_mes", "mes_example", "creator")
    }
    return {
        **fields,
        "name": _check_text(document.get("name"), "name", CardError),
        "creator_notes": _check_text(notes, notes_path, CardError),
        "tags": tuple(_check_strings(document.get("tags"), "tags", CardError)),
        "spec": "v1",
    }


def _v2(document: Mapping[str, Any], spec: str) -> dict[str, Any]:
    data = document.get("data")
    if not isinstance(data, Mapping):
        raise CardError(
            f"data: expected an object (a {spec} card keeps its fields there), "
            f"got {_json_type(data)}"
        )

    def get(key: str) -> tuple[Any, str]:
        if key not in data and key in _V1_FALLBACK and key in document:
            return document[key], key
        return data.get(key), f"data.{key}"

    fields: dict[str, Any] = {key: _check_text(*get(key), CardError) for key in _TEXT_FIELDS}
    fields["name"] = _check_text(*get("name"), CardError)
    fields["character_version"] = _version_text(*get("character_version"))
    fields["tags"] = tuple(_check_strings(*get("tags"), CardError))
    fields["alternate_greetings"] = tuple(_check_strings(*get("alternate_greetings"), CardError))
    fields["extensions"] = _check_object(*get("extensions"), CardError)
    try:
        fields["book"] = _character_book(
            data.get("character_book"), fields["name"], "data.character_book"
        )
    except LorebookError as error:
        raise CardError(str(error)) from error
    fields["spec"] = _SPECS[spec]
    return fields


def parse_card(document: Any, name: str = "card") -> Card:
    """A card from its JSON (already parsed): V3 or V2 (by ``spec``), or a bare V1 card.

    Args:
        document: the card JSON object.
        name: names the file in errors.

    Raises:
        CardError: not a card, or a field of the wrong type; the message names the field's
            path (``data.character_book.entries.2.keys: expected a list of strings, ...``).
    """
    if not isinstance(document, Mapping):
        raise CardError(
            f"{name}: not a character card: expected a JSON object, got {_json_type(document)}"
        )
    document = copy.deepcopy(dict(document))  # the card's own copy: ``raw`` and its parts
    spec = document.get("spec")
    try:
        if spec is None:
            if "name" not in document:
                hint = (
                    " (it looks like a World Info file: read it with load_world_info)"
                    if "entries" in document
                    else ""
                )
                raise CardError(f"not a character card: no 'spec' (V2/V3) and no 'name' (V1){hint}")
            fields = _v1(document)
        elif not isinstance(spec, str) or spec not in _SPECS:
            raise CardError(
                f"spec: unknown card spec {preview(spec)} "
                "(expected 'chara_card_v2' or 'chara_card_v3')"
            )
        else:
            fields = _v2(document, spec)
    except CardError as error:
        raise CardError(f"{name}: {error}") from error.__cause__
    if not fields["name"]:
        where = "name" if fields["spec"] == "v1" else "data.name"
        raise CardError(f"{name}: {where}: the character has no name")
    return Card(**fields, raw=document)


def load_card(data: bytes | str, name: str = "card") -> Card:
    """Read a character card file: a PNG card or a JSON card, told apart by content.

    Args:
        data: the file's contents (``str`` is taken as JSON text).
        name: names the file in errors (and nothing else).

    Returns:
        The card; ``card.book`` holds its character book, if it has one.

    Raises:
        CardError: the message says what is wrong and where (the chunk and byte offset in
            a PNG, the field path in the JSON).
    """
    if isinstance(data, bytes) and data.startswith(PNG_SIGNATURE):
        text = png_card_text(data, name)
        source = "the card text in the PNG"
    else:
        if isinstance(data, bytes):
            if data and PNG_SIGNATURE.startswith(data[:8]):
                raise CardError(f"{name}: truncated PNG: the file ends inside the PNG signature")
            try:
                data = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                raise CardError(
                    f"{name}: not a character card: neither a PNG nor JSON text "
                    f"(it starts with {data[:8]!r})"
                ) from None
        text, source = data.removeprefix("\ufeff"), "the file"
    try:
        document = jsontext.loads(text, jsontext.DOCUMENT)
    except JsonTextError as error:
        if error.syntax:
            raise CardError(
                f"{name}: {source} is not JSON ({error.problem}: line {error.line} "
                f"column {error.column})"
            ) from error
        inside = f"{source}: " if source != "the file" else ""
        raise CardError(f"{name}: {inside}{error}") from error
    return parse_card(document, name)
