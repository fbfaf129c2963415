"""The real files the tests read, kept in tests/fixtures/ (its README says where each came
from and its licence). A missing one fails the test that reads it: it is never skipped."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ELDORIA = FIXTURES / "sillytavern_Eldoria_worldinfo.json"
"""SillyTavern's default World Info book."""
SERAPHINA = FIXTURES / "sillytavern_default_Seraphina.png"
"""SillyTavern's default character card (PNG)."""
CHAT = FIXTURES / "sillytavern_chat_seraphina.jsonl"
"""A SillyTavern chat in the published format (swipes, a hidden message, reasoning)."""

REAL = FIXTURES / "real"
"""Files found in public repositories, byte for byte (the README names each one's source)."""
REAL_CHAT_ZH = REAL / "sillytavern_chat_zh_swipe_info_empty.jsonl"
"""A Chinese SillyTavern chat: a greeting with two swipes and ``swipe_info: []``."""
REAL_GROUP_CHAT = REAL / "sillytavern_group_chat_new.jsonl"
"""A SillyTavern group chat just created: no header line, one system message."""
REAL_TAVERNAI_CHAT = REAL / "tavernai_chat_megumin.jsonl"
"""A TavernAI chat: numeric dates, ``is_name``, no ``chat_metadata``."""
REAL_BOOK_ZH = REAL / "worldinfo_zh_encounters.json"
"""A Chinese World Info book (constant, keyed and AND ALL entries, most fields left out)."""
REAL_TAVERNAI_BOOK = REAL / "tavernai_worldinfo_toaru.json"
"""An old TavernAI World Info book (no ``position``, ``disable`` or timed fields)."""
REAL_CARD_V1 = REAL / "tavernai_card_v1_megumin.png"
"""A TavernAI (V1) card in a PNG: the fields at the top level, no ``spec``."""
REAL_CARD_V3 = REAL / "sillytavern_card_v3_seraphina.png"
"""SillyTavern's default card as it ships now: a ``chara`` (V2) and a ``ccv3`` (V3) chunk."""
