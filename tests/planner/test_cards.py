"""Character cards: SillyTavern's real default card, V3 over V2, JSON cards, broken files."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from planner.cards import PNG_SIGNATURE, Card, load_card, parse_card, png_card_text
from planner.errors import CardError, LorebookError
from planner.lorebook import dump_world_info, load_world_info, world_info_document
from tests._fixtures import ELDORIA, SERAPHINA

SERAPHINA_TEXT_CHUNK = 511550  # byte offset of the card's tEXt chunk in the real file


def _fixture(path: Path) -> bytes:
    return path.read_bytes()  # missing: the test fails, never skips


@pytest.fixture
def seraphina() -> bytes:
    return _fixture(SERAPHINA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _text(keyword: str, card: Any) -> bytes:
    """A tEXt chunk as SillyTavern writes one: base64 of the card's UTF-8 JSON."""
    encoded = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
    return _chunk(b"tEXt", keyword.encode("latin-1") + b"\0" + encoded)


def _png(*chunks: bytes) -> bytes:
    """A valid 1x1 grey PNG with ``chunks`` inserted before IEND."""
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
    image = _chunk(b"IDAT", zlib.compress(b"\x00\x80"))
    return PNG_SIGNATURE + header + image + b"".join(chunks) + _chunk(b"IEND", b"")


def _v2(name: str, **data: Any) -> dict[str, Any]:
    return {"spec": "chara_card_v2", "spec_version": "2.0", "data": {"name": name, **data}}


def _v3(name: str, **data: Any) -> dict[str, Any]:
    return {"spec": "chara_card_v3", "spec_version": "3.0", "data": {"name": name, **data}}


def test_seraphina_the_default_card(seraphina: bytes) -> None:
    card = load_card(seraphina, "Seraphina.png")
    assert isinstance(card, Card)
    assert (card.name, card.spec, card.creator, card.character_version) == (
        "Seraphina",
        "v2",
        "OtisAlejandro",
        "1.0.0",
    )
    assert card.first_mes.startswith("*You wake with a start")
    assert "guardian of this forest" in card.first_mes
    assert card.description.startswith("[Seraphina's Personality=")
    assert card.creator_notes == "ST Default Bot contest winner: roleplay bots category"
    assert (card.personality, card.scenario, card.alternate_greetings, card.tags) == (
        "",
        "",
        (),
        (),
    )
    assert card.world == "Eldoria"
    assert card.extensions == {"talkativeness": "0.5", "fav": False, "world": "Eldoria"}
    assert card.raw["spec"] == "chara_card_v2"
    assert card.raw["data"]["name"] == "Seraphina"


def test_seraphinas_book_is_her_world_eldoria(seraphina: bytes) -> None:
    card = load_card(seraphina, "Seraphina.png")
    book = card.book
    assert book is not None
    assert (book.name, book.kind) == ("Eldoria", "character_book")
    assert book.raw == card.raw["data"]["character_book"]
    assert {entry.uid: entry.keys for entry in book.entries} == {
        0: ["eldoria", "wood", "forest", "magical forest"],
        1: ["shadowfang", "beast", "monster", "monsters", "beasts"],
        2: ["glade", "safe haven", "refuge"],
        3: ["power", "magic", "ability"],
    }
    first = book.entry(0)
    # the card writes probability null and useProbability false in extensions: ST reads 100 / false
    assert (first.probability, first.use_probability) == (100, False)
    assert (first.position, first.order, first.disable, first.selective) == (0, 100, False, False)
    assert first.extensions == {"position": 0, "probability": None, "useProbability": False}

    # the same lore as SillyTavern's Eldoria World Info file
    eldoria = load_world_info(_fixture(ELDORIA), "Eldoria")
    for entry in eldoria.entries:
        assert book.entry(entry.uid).keys == entry.keys
        assert book.entry(entry.uid).content == entry.content
    converted = world_info_document(book)
    assert converted["originalData"] == card.raw["data"]["character_book"]
    assert [converted["entries"][uid]["key"] for uid in "0123"] == [
        entry.keys for entry in eldoria.entries
    ]
    assert json.loads(dump_world_info(book)) == converted


@pytest.mark.parametrize("v3_first", [True, False])
def test_ccv3_wins_over_chara(v3_first: bool) -> None:
    v2 = _text("chara", _v2("Old Name", description="from V2"))
    v3 = _text("ccv3", _v3("New Name", description="from V3", nickname="Newt"))
    card = load_card(_png(v3, v2) if v3_first else _png(v2, v3), "both.png")
    assert (card.name, card.description, card.spec) == ("New Name", "from V3", "v3")
    assert card.raw["data"]["nickname"] == "Newt"


def test_the_keyword_is_matched_without_case_and_chara_alone_is_read() -> None:
    card = load_card(_png(_text("CCV3", _v3("Upper"))), "upper.png")
    assert (card.name, card.spec) == ("Upper", "v3")
    only_v2 = _png(_chunk(b"tEXt", b"Software\0paint"), _text("chara", _v2("Two")))
    assert (load_card(only_v2).name, load_card(only_v2).spec) == ("Two", "v2")


def test_itxt_and_ztxt_chunks_are_read() -> None:
    card_json = json.dumps(_v3("Zoë"), ensure_ascii=False).encode("utf-8")
    encoded = base64.b64encode(card_json)
    itxt = _chunk(b"iTXt", b"ccv3\0\x01\x00en\0\0" + zlib.compress(encoded))
    assert load_card(_png(itxt)).name == "Zoë"
    ztxt = _chunk(b"zTXt", b"chara\0\x00" + zlib.compress(encoded))
    assert load_card(_png(ztxt)).name == "Zoë"
    assert json.loads(png_card_text(_png(ztxt))) == _v3("Zoë")


def test_a_json_card_with_a_character_book_carrying_st_fields() -> None:
    book = {
        "name": "Lore",
        "entries": [
            {
                "id": 3,
                "keys": ["tower"],
                "content": "The tower leans.",
                "enabled": True,
                "insertion_order": 7,
                "position": "after_char",
                "extensions": {
                    "probability": 40,
                    "useProbability": True,
                    "group": "places",
                    "group_weight": 60,
                    "sticky": 4,
                    "cooldown": 2,
                    "delay": 1,
                    "depth": 6,
                    "role": 2,
                    "match_whole_words": True,
                    "clotho": {"condition": "hp < 10"},
                },
            }
        ],
    }
    card_json = _v3(
        "Ada", tags=["wizard"], alternate_greetings=["Hi.", "Hello."], character_book=book
    )
    card = load_card(json.dumps(card_json).encode("utf-8"), "ada.json")
    assert (card.name, card.spec, card.tags, card.alternate_greetings) == (
        "Ada",
        "v3",
        ("wizard",),
        ("Hi.", "Hello."),
    )
    assert card.raw == card_json
    assert card.book is not None and card.book.name == "Lore"
    tower = card.book.entry(3)
    assert (tower.keys, tower.order, tower.position, tower.disable) == (["tower"], 7, 1, False)
    assert (tower.probability, tower.use_probability, tower.group, tower.group_weight) == (
        40,
        True,
        "places",
        60,
    )
    assert (tower.sticky, tower.cooldown, tower.delay, tower.depth, tower.role) == (4, 2, 1, 6, 2)
    assert tower.match_whole_words is True
    assert tower.condition == "hp < 10"
    assert tower.extensions == book["entries"][0]["extensions"]


def test_a_book_without_a_name_is_named_after_the_character() -> None:
    card = parse_card(_v2("Bram", character_book={"entries": [{"keys": ["x"], "enabled": True}]}))
    assert card.book is not None and card.book.name == "Bram's Lorebook"
    assert parse_card(_v2("Bram")).book is None


def test_json_text_and_a_byte_order_mark_are_accepted() -> None:
    text = json.dumps(_v2("Cora", personality="calm"))
    assert load_card(text).personality == "calm"
    assert load_card(b"\xef\xbb\xbf" + text.encode("utf-8")).personality == "calm"
    assert load_card("\ufeff" + text).personality == "calm"


def test_a_bare_v1_card() -> None:
    v1 = {
        "name": "Old Tom",
        "description": "A sailor.",
        "first_mes": "Ahoy.",
        "creatorcomment": "made in 2023",
        "tags": "sea, old",
        "talkativeness": "0.5",
    }
    card = load_card(json.dumps(v1).encode("utf-8"))
    assert (card.spec, card.name, card.description, card.first_mes) == (
        "v1",
        "Old Tom",
        "A sailor.",
        "Ahoy.",
    )
    assert (card.creator_notes, card.tags, card.book) == ("made in 2023", ("sea", "old"), None)
    assert card.raw == v1
    from_png = load_card(_png(_text("chara", v1)))
    assert (from_png.spec, from_png.name) == ("v1", "Old Tom")


def test_a_v2_field_missing_from_data_is_taken_from_the_v1_top_level() -> None:
    document = {
        "spec": "chara_card_v2",
        "name": "Top",
        "scenario": "A storm.",
        "data": {"first_mes": "Hm."},
    }
    card = parse_card(document)
    assert (card.name, card.scenario, card.first_mes) == ("Top", "A storm.", "Hm.")


def test_a_numeric_version_is_kept_as_text() -> None:
    assert parse_card(_v2("V", character_version=2)).character_version == "2"


def _error(data: bytes | str) -> str:
    with pytest.raises(CardError) as caught:
        load_card(data, "broken.png")
    return str(caught.value)


def test_a_truncated_png_names_the_chunk_and_offset(seraphina: bytes) -> None:
    inside_text = _error(seraphina[: SERAPHINA_TEXT_CHUNK + 100])
    assert inside_text.startswith("broken.png: truncated PNG: chunk 'tEXt' at byte 511550")
    inside_image = _error(seraphina[:5000])
    assert "chunk 'IDAT' at byte 33 declares 511505 bytes" in inside_image
    no_end = _error(seraphina[:SERAPHINA_TEXT_CHUNK])
    assert no_end == "broken.png: truncated PNG: it ends at byte 511550 with no IEND chunk"
    header = _error(seraphina[: SERAPHINA_TEXT_CHUNK + 3])
    assert "the chunk header at byte 511550 is cut short (3 of 8 bytes)" in header
    assert "ends inside the PNG signature" in _error(seraphina[:5])


def test_a_bad_crc_is_refused_as_sillytavern_does(seraphina: bytes) -> None:
    corrupted = bytearray(seraphina)
    corrupted[SERAPHINA_TEXT_CHUNK + 20] ^= 0x01  # one bit in the card text
    message = _error(bytes(corrupted))
    assert message == "broken.png: corrupted PNG: chunk 'tEXt' at byte 511550 fails its CRC check"


def test_a_png_without_a_card() -> None:
    assert _error(_png()) == (
        "broken.png: no 'chara' or 'ccv3' text chunk in the PNG (text chunks: none)"
    )
    other = _error(_png(_chunk(b"tEXt", b"Software\0paint"), _chunk(b"tEXt", b"Comment\0hi")))
    assert other.endswith(
        "no 'chara' or 'ccv3' text chunk in the PNG (text chunks: 'Software', 'Comment')"
    )


def test_bad_base64_utf8_and_json_inside_a_png() -> None:
    bad_base64 = _error(_png(_chunk(b"tEXt", b"chara\0not*base64!")))
    assert bad_base64.startswith("broken.png: 'chara' tEXt chunk at byte ")
    assert "not valid base64" in bad_base64
    not_utf8 = _error(_png(_chunk(b"tEXt", b"chara\0" + base64.b64encode(b"\xff\xfe{}"))))
    assert "the base64 does not decode to UTF-8 text" in not_utf8
    not_json = _error(_png(_chunk(b"tEXt", b"ccv3\0" + base64.b64encode(b"{name: 1"))))
    assert not_json.startswith("broken.png: the card text in the PNG is not JSON")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([1, 2], "broken.png: not a character card: expected a JSON object, got a list"),
        ({"title": "x"}, "broken.png: not a character card: no 'spec' (V2/V3) and no 'name' (V1)"),
        ({"entries": {}}, "it looks like a World Info file: read it with load_world_info"),
        (
            {"spec": "chara_card_v9", "data": {}},
            "broken.png: spec: unknown card spec 'chara_card_v9'",
        ),
        ({"spec": "chara_card_v2", "data": "Ann"}, "broken.png: data: expected an object"),
        ({"spec": ["v2"], "data": {}}, "broken.png: spec: unknown card spec ['v2']"),
        (_v2("Ann", tags=5), "broken.png: data.tags: expected a list of strings, got a number (5)"),
        (
            _v2("Ann", alternate_greetings=["hi", 2]),
            "data.alternate_greetings.1: expected a string",
        ),
        (_v2("Ann", first_mes=["hi"]), "broken.png: data.first_mes: expected a string, got a list"),
        (_v2("Ann", extensions="x"), "broken.png: data.extensions: expected an object"),
        (_v2(""), "broken.png: data.name: the character has no name"),
        ({"name": 3}, "broken.png: name: expected a string, got a number (3)"),
        (_v2("Ann", character_book=[]), "broken.png: data.character_book: expected an object"),
        (
            _v2("Ann", character_book={"entries": [{}, {}, {"keys": 7}]}),
            "broken.png: data.character_book.entries.2.keys: expected a list of strings",
        ),
        (
            _v3("Ann", character_book={"entries": [{"extensions": {"sticky": "long"}}]}),
            "broken.png: data.character_book.entries.0.extensions.sticky: Input should be a valid"
            " integer",
        ),
    ],
)
def test_json_that_is_not_a_card_or_has_a_wrong_field(document: Any, message: str) -> None:
    error = _error(json.dumps(document).encode("utf-8"))
    assert message in error
    assert error.startswith("broken.png: ")


def test_a_book_error_in_a_card_is_a_card_error_caused_by_the_book() -> None:
    with pytest.raises(CardError) as caught:
        parse_card(_v2("Ann", character_book={"entries": "none"}), "ann.json")
    assert str(caught.value) == (
        "ann.json: data.character_book.entries: expected a list, got a string"
    )
    assert isinstance(caught.value.__cause__, LorebookError)


def test_neither_png_nor_json() -> None:
    assert _error(b"\xff\xd8\xff\xe0 a jpeg") == (
        "broken.png: not a character card: neither a PNG nor JSON text "
        "(it starts with b'\\xff\\xd8\\xff\\xe0 a j')"
    )
    assert _error(b"name: Ann").startswith("broken.png: the file is not JSON (")
