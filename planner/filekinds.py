"""What a lore file is, told by its content: a character card or a World Info lorebook.

Players mix the two up (a card is often named after its world, a lorebook after its
character), and each importer's own refusal ("no 'entries'", "no 'spec'") does not say
what to do instead. :func:`file_kind` answers which it is, so an importer that refuses a
file can say "this is a character card: import it as a card" (and the reverse).

A card is a PNG (cards are the only PNGs SillyTavern trades), or a JSON object with a
card's ``spec`` (``chara_card_v2``/``chara_card_v3``), or a V1 card's ``name`` with its
``first_mes`` or ``description``; a lorebook is a JSON object with ``entries`` and none
of those. The JSON is read within :data:`mnemosyne.jsontext.DOCUMENT`'s limits, so a
stranger's file costs no more here than in the importers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from mnemosyne import jsontext
from mnemosyne.errors import JsonTextError

__all__ = ["CARD_SPECS", "FileKind", "file_kind"]

FileKind = Literal["card", "lorebook"]

CARD_SPECS = frozenset({"chara_card_v2", "chara_card_v3"})
"""The ``spec`` values of character cards (V2, V3)."""

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def file_kind(data: bytes | str) -> FileKind | None:
    """Whether a file's contents are a character card or a World Info lorebook.

    Args:
        data: the file's bytes (or its text).

    Returns:
        ``"card"``, ``"lorebook"``, or ``None`` when it is neither (not JSON, past a
        limit, or JSON of another shape).
    """
    if isinstance(data, bytes) and data.startswith(_PNG_SIGNATURE):
        return "card"
    try:
        document = jsontext.loads(data, jsontext.DOCUMENT)
    except JsonTextError:
        return None
    if not isinstance(document, Mapping):
        return None
    if document.get("spec") in CARD_SPECS:
        return "card"
    if (
        "spec" not in document
        and "name" in document
        and ("first_mes" in document or "description" in document)
    ):
        return "card"
    if "entries" in document:
        return "lorebook"
    return None
