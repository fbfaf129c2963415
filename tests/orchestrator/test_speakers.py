"""Who speaks, as pure functions of the cast (orchestrator.speakers): no store needed."""

from __future__ import annotations

import random

import pytest

from orchestrator import NARRATOR, Character, TurnError
from orchestrator.speakers import next_speakers, speaker_for

ANN, BRAM, CORA, DAG = (
    Character(name="Ann", talkativeness=0.0),
    Character(name="Bram the Bold", talkativeness=0.0),
    Character(name="Cora", talkativeness=0.0),
    Character(name="Dag", talkativeness=0.0),
)
CAST = (ANN, BRAM, CORA, DAG)


def speakers(cast=CAST, present=None, order="natural", **kwargs) -> list[str]:
    return next_speakers(cast, present, order, rng=random.Random(7), **kwargs)


def test_natural_order_takes_the_names_mentioned_in_the_order_mentioned() -> None:
    # whole words, any case; a word of a name is enough (SillyTavern's extractAllWords)
    assert speakers(text="CORA, hand the map to bram. Ann watches.") == [
        "Cora",
        "Bram the Bold",
        "Ann",
    ]
    assert speakers(text="Dag? Dag!") == ["Dag"]  # once each


def test_natural_order_rolls_talkativeness_and_always_picks_someone() -> None:
    chatty = tuple(Character(name=c.name, talkativeness=1.0) for c in CAST)
    assert sorted(speakers(chatty, text="Hello.")) == sorted(c.name for c in CAST)
    # no one mentioned, everyone silent: one at random, every time
    for seed in range(20):
        picked = next_speakers(CAST, None, "natural", text="Hello.", rng=random.Random(seed))
        assert len(picked) == 1 and picked[0] in {c.name for c in CAST}
    # mentioned first, then the talkative ones
    mixed = (ANN, Character(name="Bram", talkativeness=1.0), CORA)
    assert speakers(mixed, text="Cora?") == ["Cora", "Bram"]
    assert speakers(mixed, text="Coral annals.") == ["Bram"]  # not inside words


def test_absent_and_muted_members_never_speak() -> None:
    muted = Character(name="Cora", muted=True, talkativeness=1.0)
    cast = (ANN, BRAM, muted, DAG)
    for seed in range(20):
        picked = next_speakers(
            cast, ["Ann", "Cora", "Dag"], "natural", text="Bram? Cora?", rng=random.Random(seed)
        )
        assert picked and set(picked) <= {"Ann", "Dag"}
    assert speakers(cast, present=[], text="Ann?") == []


def test_a_reply_with_no_message_does_not_give_the_last_speaker_the_word_again() -> None:
    duo = (Character(name="Ann", talkativeness=1.0), Character(name="Bram", talkativeness=1.0))
    for seed in range(10):
        rng = random.Random(seed)
        assert next_speakers(duo, None, "natural", last_speaker="Ann", rng=rng) == ["Bram"]
    # unless no one else can speak
    alone = next_speakers(duo, ["Ann"], "natural", last_speaker="Ann", rng=random.Random(1))
    assert alone == ["Ann"]


def test_round_robin_narrator_manual_and_a_cast_of_one() -> None:
    assert speakers(order="round_robin") == ["Ann"]
    assert speakers(order="round_robin", last_speaker="Ann") == ["Bram the Bold"]
    assert speakers(order="round_robin", last_speaker="Dag") == ["Ann"]
    # the next one present
    assert speakers(order="round_robin", present=["Ann", "Dag"], last_speaker="Ann") == ["Dag"]
    assert speakers(order="narrator", text="Ann?") == [NARRATOR]
    assert speakers(order="manual", present=["Dag", "Cora"]) == ["Cora"]
    lone = Character(name="Marla", muted=True, talkativeness=0.0)
    assert speakers((lone,), present=[], order="round_robin") == ["Marla"]


def test_a_speaker_named_must_be_a_member_who_can_speak() -> None:
    assert speaker_for(CAST, None, "natural", "cora") is CORA
    assert speaker_for(CAST, None, "natural", NARRATOR).name == NARRATOR
    with pytest.raises(TurnError, match=r"'Eve'.*the cast: Ann, Bram the Bold, Cora, Dag"):
        speaker_for(CAST, None, "natural", "Eve")
    with pytest.raises(TurnError, match=r"Cora is not in the scene \(present: Ann\)"):
        speaker_for(CAST, ["Ann"], "natural", "Cora")
    muted = (ANN, Character(name="Cora", muted=True))
    with pytest.raises(TurnError, match="Cora is muted"):
        speaker_for(muted, None, "natural", "Cora")


@pytest.mark.parametrize(
    ("speaker", "text", "stored"),
    [
        ("Cora", "Cora: I say nothing.", "I say nothing."),
        ("Cora", "  cora:   Quietly.", "Quietly."),
        ("Cora", "Cora:", "Cora:"),
        ("Cora", "Cora: ", "Cora: "),
        ("Cora", "Corallian ships.", "Corallian ships."),
        ("Cora", "Co", "Co"),
        ("Cora", "The fire crackles. Cora: no.", "The fire crackles. Cora: no."),
        ("Cora", "", ""),
        # a name whose casefold is longer than it (ß is ss): the same either way
        ("Strauß", "Strauß: Hello.", "Hello."),
        ("Strauß", "STRAUSS: Hello.", "Hello."),
        ("STRAUSS", "Strauß: Hello.", "Hello."),
        ("Strauß", "Straus: Hello.", "Straus: Hello."),
        ("Strauß", "Straußen.", "Straußen."),
        ("İlker", "İlker: Merhaba.", "Merhaba."),
    ],
)
def test_a_streamed_reply_is_shown_as_it_is_stored(speaker: str, text: str, stored: str) -> None:
    from orchestrator.casting import Unnamed, unnamed

    assert unnamed(text, speaker) == stored
    for seed in range(30):
        rng = random.Random(seed)
        inner = range(1, len(text))
        cuts = sorted(rng.sample(inner, k=min(len(inner), rng.randrange(4))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
        shown: list[tuple[str, str]] = []
        stream = Unnamed(lambda kind, piece, shown=shown: shown.append((kind, piece)), speaker)
        stream("reasoning", "hm")  # other events pass at once
        for piece in pieces:
            stream("token", piece)
        stream.flush()
        assert shown[0] == ("reasoning", "hm")
        assert "".join(piece for kind, piece in shown if kind == "token") == stored
