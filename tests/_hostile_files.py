"""Hostile variants of the real fixtures, one per limit of :mod:`mnemosyne.jsontext`, for
each importer (lorebook, card JSON, card PNG, tree file, SillyTavern chat).

Each :class:`Hostile` is the file's bytes, the name to import it as, and what the
refusal must say (the place and the limit). A hostile value is put into the JSON *text*
(the real document dumped with a placeholder, the placeholder replaced by raw JSON), so
``NaN`` and a 5,000-digit integer reach the importer as a file would hold them.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mnemosyne import jsontext
from planner.cards import MAX_CHUNK_TEXT, png_card_text
from tests.fuzz._hostile import CARD_PNG as CARD
from tests.fuzz._hostile import CHAT, chunk, deflate_repeated, png_with, replaced
from tests.fuzz._hostile import LOREBOOK as BOOK

DIGITS = "9" * 5000
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = json.dumps("x" * (jsontext.MAX_STRING + 1))

#: What each refusal says, by case (each importer adds the place).
SAYS = {
    "digits": "a number of 5,000 digits, more than the 100 allowed",
    "nan": "NaN is not a JSON number",
    "deep": "(64 levels down): nested too deep: more than 64 levels (the limit)",
    "huge_string": f"a text of {jsontext.MAX_STRING + 1:,} characters",
    "too_many_entries": "entries, more than the",
    "ztxt_bomb": "inflates past",
    "itxt_bomb": "inflates past",
}


@dataclass(frozen=True)
class Hostile:
    data: bytes
    filename: str
    place: str
    """What the one-line refusal names first: the file, the line, the field."""
    says: str
    """What it says after: the problem and the limit."""


def _cases(document: Any, fields: dict[str, tuple[Any, ...]]) -> dict[str, tuple[str, str]]:
    """The value cases (digits, NaN, deep, huge string) at the given fields: text, place."""
    out = {}
    for case, raw in (("digits", DIGITS), ("nan", "NaN"), ("deep", DEEP), ("huge_string", HUGE)):
        path = fields[case]
        # Nesting is refused where it passes the limit: the path goes on down the lists.
        place = jsontext.path_text(path) + ("[0][0]" if case == "deep" else ": ")
        place = place.removesuffix("(top): ")
        out[case] = (replaced(document, path, raw), place)
    return out


def lorebooks() -> dict[str, Hostile]:
    book = json.loads(BOOK.read_text())
    fields = {
        "digits": ("entries", "0", "order"),
        "nan": ("entries", "0", "probability"),
        "deep": ("entries", "0", "key"),
        "huge_string": ("entries", "0", "content"),
    }
    out = {
        case: Hostile(text.encode(), "book.json", f"book: {place}", SAYS[case])
        for case, (text, place) in _cases(book, fields).items()
    }
    many = {"entries": {str(i): {} for i in range(jsontext.MAX_DOCUMENT_ENTRIES + 1)}}
    out["too_many_entries"] = Hostile(
        json.dumps(many).encode(),
        "book.json",
        f"book: entries: {jsontext.MAX_DOCUMENT_ENTRIES + 1:,}",
        SAYS["too_many_entries"],
    )
    return out


def card_document() -> dict[str, Any]:
    return json.loads(png_card_text(CARD.read_bytes(), CARD.name))


def _card_cases() -> dict[str, tuple[str, str]]:
    card = card_document()
    fields = {
        "digits": ("data", "extensions", "talkativeness"),
        "nan": ("data", "extensions", "fav"),
        "deep": ("data", "extensions"),
        "huge_string": ("data", "description"),
    }
    out = _cases(card, fields)
    data = {
        **card["data"],
        "character_book": {"entries": [{}] * (jsontext.MAX_DOCUMENT_ENTRIES + 1)},
    }
    out["too_many_entries"] = (json.dumps({**card, "data": data}), "data.character_book.entries: ")
    return out


def cards_json() -> dict[str, Hostile]:
    return {
        case: Hostile(text.encode(), "card.json", f"card.json: {place}", SAYS[case])
        for case, (text, place) in _card_cases().items()
    }


def cards_png() -> dict[str, Hostile]:
    out = {}
    for case, (text, place) in _card_cases().items():
        card_chunk = chunk(b"tEXt", b"chara\0" + base64.b64encode(text.encode()))
        out[case] = Hostile(
            png_with([card_chunk]),
            "card.png",
            f"card.png: the card text in the PNG: {place}",
            SAYS[case],
        )
    bomb = deflate_repeated(
        b"A", MAX_CHUNK_TEXT + (1 << 20)
    )  # a few tens of KB, past the cap inflated
    out["ztxt_bomb"] = Hostile(
        png_with([chunk(b"zTXt", b"chara\0\0" + bomb)]),
        "card.png",
        "card.png: 'chara' zTXt chunk at byte ",
        SAYS["ztxt_bomb"],
    )
    out["itxt_bomb"] = Hostile(
        png_with([chunk(b"iTXt", b"chara\0\1\0\0\0" + bomb)]),
        "card.png",
        "card.png: 'chara' iTXt chunk at byte ",
        SAYS["itxt_bomb"],
    )
    return out


def chat_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CHAT.read_text().splitlines() if line.strip()]


def chats() -> dict[str, Hostile]:
    lines = chat_lines()

    def with_line(index: int, path: tuple[Any, ...], raw: str) -> bytes:
        texts = [json.dumps(line, ensure_ascii=False) for line in lines]
        texts[index] = replaced(lines[index], path, raw)
        return ("\n".join(texts) + "\n").encode()

    out = {
        "digits": Hostile(
            with_line(1, ("swipe_id",), DIGITS),
            "chat.jsonl",
            "chat.jsonl: line 2: swipe_id: ",
            SAYS["digits"],
        ),
        "nan": Hostile(
            with_line(2, ("extra", "token_count"), "NaN"),
            "chat.jsonl",
            "chat.jsonl: line 3: extra.token_count: ",
            SAYS["nan"],
        ),
        "deep": Hostile(
            with_line(1, ("extra",), DEEP),
            "chat.jsonl",
            "chat.jsonl: line 2: extra[0][0]",
            SAYS["deep"],
        ),
        "huge_string": Hostile(
            with_line(2, ("mes",), HUGE),
            "chat.jsonl",
            "chat.jsonl: line 3: mes: ",
            SAYS["huge_string"],
        ),
    }
    many = "\n".join([json.dumps(lines[0])] + ['{"mes":""}'] * jsontext.MAX_LINES) + "\n"
    out["too_many_entries"] = Hostile(
        many.encode(),
        "chat.jsonl",
        "chat.jsonl: ",
        f"more than {jsontext.MAX_LINES:,} lines (the limit)",
    )
    return out


def trees(document: dict[str, Any]) -> dict[str, Hostile]:
    """``document``: a real tree file (the chat fixture imported and exported)."""
    fields = {
        "digits": ("version",),
        "nan": ("nodes", 1, "metadata", "sillytavern", "message", "extra", "token_count"),
        "deep": ("nodes", 1, "metadata"),
        "huge_string": ("nodes", 1, "content"),
    }
    node = document["nodes"][1]
    if "extra" not in node["metadata"]["sillytavern"]["message"]:
        fields["nan"] = ("nodes", 1, "metadata", "x")
    out = {
        case: Hostile(text.encode(), "tree.json", f"tree.json: {place}", SAYS[case])
        for case, (text, place) in _cases(document, fields).items()
    }
    many = {**document, "nodes": [{}] * (jsontext.MAX_SESSION_ENTRIES + 1)}
    out["too_many_entries"] = Hostile(
        json.dumps(many).encode(),
        "tree.json",
        f"tree.json: nodes: {jsontext.MAX_SESSION_ENTRIES + 1:,}",
        SAYS["too_many_entries"],
    )
    return out


#: Each importer's hostile files (the tree's need a real tree document).
BUILDERS: dict[str, Callable[[], dict[str, Hostile]]] = {
    "lorebook": lorebooks,
    "card_json": cards_json,
    "card_png": cards_png,
    "chat": chats,
}
