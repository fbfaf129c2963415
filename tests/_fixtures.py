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
