"""Hostile variants of real files, for the fuzz tests and ``bench/hostile.py``.

Each importer's real fixture (``tests/fixtures/``) is taken apart and one part of it
replaced by something an attacker or a broken tool would write: numbers of thousands
of digits, ``NaN``/``Infinity``, nesting deeper than any parser's stack, megabytes of
text, the wrong type, tens of thousands of entries, regular expressions that backtrack
for ever, a file cut short, bytes that are not UTF-8; for a PNG card, chunks with a bad
CRC, a length past the end, and ``zTXt``/``iTXt`` chunks that inflate to hundreds of MB.

A mutation is applied to the JSON *text*: the document is dumped with a placeholder
where the hostile value goes, and the placeholder replaced by raw JSON (so ``NaN`` and
5,000-digit integers reach the importer's parser exactly as a file would hold them).
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from tests._fixtures import CHAT, ELDORIA, SERAPHINA

LOREBOOK = ELDORIA
CARD_PNG = SERAPHINA

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_HOLE = "\x00hostile\x00"

#: Regular expressions that backtrack exponentially (or polynomially) on a text made of
#: ``a``s without the final character: SillyTavern accepts ``/.../flags`` keys.
REGEX_BOMBS = (
    "/(a+)+$/",
    "/^(a|a)*$/",
    "/(a|aa)+b/",
    "/(.*a){20}/",
    "/^(\\w+\\s?)*$/",
    "/((a*)*)*b/i",
)
#: A text that makes them backtrack: many ``a``s, then what does not match.
BOMB_TEXT = "a" * 40 + "!"


def raw_values() -> dict[str, str]:
    """Hostile JSON values, as raw text, by name."""
    deep = 100_000
    return {
        "int_5000_digits": "9" * 5000,
        "negative_int_5000_digits": "-" + "7" * 5000,
        "int_past_64_bits": "18446744073709551617",
        "float_overflow": "1e999",
        "nan": "NaN",
        "infinity": "Infinity",
        "negative_infinity": "-Infinity",
        "deep_list": "[" * deep + "]" * deep,
        "deep_object": '{"a":' * deep + "1" + "}" * deep,
        "huge_string": json.dumps("x" * 8_000_000),
        "many_items": json.dumps(list(range(200_000))),
        "lone_surrogate": '"\\ud800"',
        "nul_text": '"a\\u0000b"',
        "null": "null",
        "true": "true",
        "zero": "0",
        "negative": "-1",
        "empty_list": "[]",
        "empty_object": "{}",
        "empty_string": '""',
        "regex_bomb": json.dumps(REGEX_BOMBS[0]),
    }


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a part of a JSON document (the root excluded)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*prefix, key)
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*prefix, index)
            yield from paths(item, (*prefix, index))


def replaced(document: Any, path: tuple[Any, ...], raw: str) -> str:
    """The document as JSON text with the part at ``path`` replaced by raw JSON."""
    copy = json.loads(json.dumps(document))
    at = copy
    for key in path[:-1]:
        at = at[key]
    at[path[-1]] = _HOLE
    text = json.dumps(copy, ensure_ascii=False)
    return text.replace(json.dumps(_HOLE), raw, 1)


def lorebook() -> dict[str, Any]:
    return json.loads(LOREBOOK.read_text())


def lorebook_with_entries(count: int) -> str:
    """The lorebook with ``count`` small entries (a key and a line each)."""
    book = lorebook()
    book["entries"] = {
        str(i): {"uid": i, "key": [f"key{i}"], "content": f"entry {i}"} for i in range(count)
    }
    return json.dumps(book)


def lorebook_with_regex_keys(keys: list[str], *, constant_text: bool = False) -> str:
    """The lorebook with every entry keyed by ``keys`` (regexes), enabled."""
    book = lorebook()
    for entry in book["entries"].values():
        entry["key"] = list(keys)
        entry["disable"] = False
    return json.dumps(book)


def card_text() -> str:
    """The card JSON inside the real PNG."""
    from planner.cards import png_card_text

    return png_card_text(CARD_PNG.read_bytes(), CARD_PNG.name)


def card() -> dict[str, Any]:
    return json.loads(card_text())


def chat_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CHAT.read_text().splitlines() if line.strip()]


def chat_replaced(index: int, path: tuple[Any, ...], raw: str) -> str:
    """The chat with one part of line ``index`` replaced by raw JSON."""
    lines = [json.dumps(line, ensure_ascii=False) for line in chat_lines()]
    lines[index] = replaced(chat_lines()[index], path, raw)
    return "\n".join(lines)


# -- PNG ------------------------------------------------------------------------------------


def png_chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    """A PNG's chunks as (type, data), IEND included."""
    out, offset = [], len(PNG_SIGNATURE)
    while offset < len(data):
        (length,) = struct.unpack_from(">I", data, offset)
        kind = data[offset + 4 : offset + 8]
        out.append((kind, data[offset + 8 : offset + 8 + length]))
        offset += 12 + length
        if kind == b"IEND":
            break
    return out


def chunk(
    kind: bytes, payload: bytes, *, crc: int | None = None, length: int | None = None
) -> bytes:
    """One PNG chunk (a right CRC and length unless told otherwise)."""
    body = kind + payload
    return (
        struct.pack(">I", len(payload) if length is None else length)
        + body
        + struct.pack(">I", zlib.crc32(body) if crc is None else crc)
    )


def png_with(text_chunks: list[bytes], *, keep_card: bool = False) -> bytes:
    """The real PNG with its text chunks replaced by ``text_chunks`` (before IEND)."""
    chunks = png_chunks(CARD_PNG.read_bytes())
    kept = [
        chunk(kind, payload)
        for kind, payload in chunks
        if kind != b"IEND" and (keep_card or kind not in (b"tEXt", b"zTXt", b"iTXt"))
    ]
    return PNG_SIGNATURE + b"".join(kept) + b"".join(text_chunks) + chunk(b"IEND", b"")


def card_chunk(card_json: str) -> bytes:
    """A ``tEXt`` ``chara`` chunk holding the card JSON (base64, as SillyTavern writes)."""
    return chunk(b"tEXt", b"chara\0" + base64.b64encode(card_json.encode()))


def ztxt_bomb(inflated: int = 512 * 1024 * 1024) -> bytes:
    """A ``zTXt`` ``chara`` chunk of about ``inflated/1000`` bytes that inflates to
    ``inflated`` bytes of base64 ``A``s (a valid start of a card's base64)."""
    return chunk(b"zTXt", b"chara\0\0" + deflate_repeated(b"A", inflated))


def itxt_bomb(inflated: int = 512 * 1024 * 1024) -> bytes:
    """The same bomb in a compressed ``iTXt`` chunk."""
    return chunk(b"iTXt", b"chara\0\1\0\0\0" + deflate_repeated(b"A", inflated))


def deflate_repeated(byte: bytes, size: int) -> bytes:
    """``size`` bytes of ``byte`` deflated (about a thousandth of the size)."""
    compressor = zlib.compressobj(9)
    block = byte * (1024 * 1024)
    parts = [compressor.compress(block) for _ in range(size // len(block))]
    return b"".join(parts) + compressor.flush()


def tree_document(store: Any, chat: bytes) -> dict[str, Any]:
    """A real tree file: the chat fixture imported, then exported whole."""
    from clotho.formats.stchat import import_chat
    from clotho.formats.treefile import export_tree

    session = import_chat(store, chat, CHAT.name)
    return export_tree(store, session.id)
