"""Trimming counts each history message's tokens once per tokenizer and keeps the count."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

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


class Watched(Sequence[Message]):
    """A history that records which of its messages were read."""

    def __init__(self, messages: list[Message]) -> None:
        self.messages = messages
        self.read: set[int] = set()

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            raise AssertionError("fit reads messages one at a time")
        self.read.add(index % len(self.messages))
        return self.messages[index]

    def __iter__(self) -> Iterator[Message]:
        raise AssertionError("fit walks from the newest message, not the whole history")


def test_fit_reads_the_window_not_the_whole_story() -> None:
    history = Watched([Message(f"n{i}", "user", None, "word " * 10) for i in range(20_000)])
    budget = 3 * (10 + FRAMING)  # three messages of ten words
    assert fit(history, budget, lambda message: len(message.content.split())) == 20_000 - 3
    assert min(history.read) >= 20_000 - 20  # its bytes are summed only past the budget


def test_a_history_whose_bytes_fit_is_kept_whole_uncounted() -> None:
    def never(message: Message) -> int:
        raise AssertionError("counted")

    history = [Message(f"n{i}", "user", None, "word " * 10) for i in range(10)]
    assert fit(history, 10 * (50 + FRAMING), never) == 0
    assert fit(history, 10 * (50 + FRAMING) - 1, lambda message: 10) == 0  # tokens fit


def test_past_its_limit_the_older_half_is_forgotten() -> None:
    counts = TokenCounts(limit=10)
    count = counts.counter("len", len)
    for i in range(25):
        count(Message(f"n{i}", "user", None, "x" * i))
    assert len(counts._counts) <= 10


def test_replies_sent_with_their_speakers_name_are_counted_so() -> None:
    counts = TokenCounts()
    plain = counts.counter("words", lambda text: len(text.split()))
    named = counts.counter("words", lambda text: len(text.split()), named=True)
    reply = Message("n1", "assistant", "Bram Ironhand", "one two")
    player = Message("n2", "user", "Player", "one two")
    assert plain(reply) == 2 and named(reply) == 4  # "Bram Ironhand: one two"
    assert plain(reply) == 2  # one kept count does not stand for the other
    assert named(player) == plain(player) == 2  # the player's message goes as it is

    history = [reply if i % 2 else player for i in range(10)]
    budget = 4 * (2 + FRAMING)  # four messages of two words
    assert fit(history, budget, plain) == 6
    assert fit(history, budget, named, named=True) == 7  # the names take room
    # a history is kept whole uncounted only if its bytes fit with the names
    sized = [Message(f"m{i}", "assistant", "N" * 40, "x") for i in range(4)]
    counted: list[Message] = []

    def one(message: Message) -> int:
        counted.append(message)
        return 1

    assert fit(sized, 4 * (1 + FRAMING), one) == 0 and counted == []
    assert fit(sized, 4 * (1 + FRAMING), one, named=True) == 0 and len(counted) == 4
