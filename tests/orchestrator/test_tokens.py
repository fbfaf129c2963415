"""Trimming counts each history message's tokens once per tokenizer and keeps the count."""

from __future__ import annotations

from mnemosyne import Message
from prompts import FRAMING, TokenCounts, fit


def test_a_message_is_counted_once_and_again_only_when_its_text_changes() -> None:
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    counts = TokenCounts()
    count = counts.counter("words", words)
    old = Message("n1", "user", None, "one two three")
    assert count(old) == count(old) == 3
    assert counted == ["one two three"]
    edited = Message("n1", "user", None, "one two")  # edited in place: same id
    assert count(edited) == 2
    assert counts.counter("other", words)(edited) == 2  # another tokenizer counts anew
    fresh = Message("", "user", None, "not stored yet")  # the player's, before the commit
    count(fresh)
    count(fresh)
    assert counted == ["one two three", "one two", "one two", "not stored yet", "not stored yet"]


def test_fit_counts_only_the_newest_messages_and_reuses_their_counts() -> None:
    counted: list[str] = []

    def words(text: str) -> int:
        counted.append(text)
        return len(text.split())

    history = [Message(f"n{i}", "user", None, f"word{i} " * 10) for i in range(100)]
    count = TokenCounts().counter("words", words)
    budget = 3 * (10 + FRAMING)
    assert fit(history, budget, count) == 97
    first = len(counted)
    assert first <= 4  # from the newest until the budget is spent
    assert fit(history, budget, count) == 97
    assert len(counted) == first  # the next turn counts nothing again


def test_past_its_limit_the_older_half_is_forgotten() -> None:
    counts = TokenCounts(limit=10)
    count = counts.counter("len", len)
    for i in range(25):
        count(Message(f"n{i}", "user", None, "x" * i))
    assert len(counts._counts) <= 10
