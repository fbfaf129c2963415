"""Realistic campaign texts for the benchmarks: seeded, all different, of a set length."""

from __future__ import annotations

import random

__all__ = ["line"]

_PROSE = (
    "the lantern gutters as you step into the hall of the drowned king and a cold wind "
    "carries salt and ash from the stairs below where the old guard once kept watch "
    "over the vault of seven keys your companion whispers that the ferryman asked for "
    "silver not gold and the map you bought in the market shows a second door behind "
    "the altar marked with a crescent moon a raven croaks twice somewhere above the "
    "broken rafters dust falls on your sleeve and the torch light shows footprints "
    "smaller than a child leading toward the well you draw your blade roll for "
    "perception the goblin merchant smiles and offers a cracked amulet for three coins"
)
_WORDS = tuple(_PROSE.split(" "))


def line(rng: random.Random, prefix: str, length: int) -> str:
    """``prefix`` then words drawn from ``rng``, cut to ``length`` characters."""
    parts = [prefix]
    size = len(prefix)
    while size < length:
        word = rng.choice(_WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:length]
