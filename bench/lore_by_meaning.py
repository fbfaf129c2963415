"""How well the local embedding model finds lore by meaning, and where to cut.

Run from the repository root::

    .venv/bin/python bench/lore_by_meaning.py

Four small books (six entries on a fantasy world's places and people; the ten enabled
entries of tests/planner/test_vectors.py's Northreach; tests/planner/test_lore_planner.py's
valley; tests/cli/test_lore_by_meaning.py's two), 20 questions each about one entry and
sharing none of its keys, and 15 messages about nothing in any book. Prints how many
questions rank their entry first, the similarity of the right entry, the best similarity
an unrelated message reaches in each book, and for a few cut-offs how many right entries
a cut keeps and how many (message, book) pairs of unrelated messages it lets in. The
planner's ``max_distance`` is ``1 - similarity``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from planner.lorebook import parse_world_info
from planner.vectors import LocalEmbeddings, entry_text
from tests.cli.test_lore_by_meaning import FERRY, WOLVES
from tests.planner.test_vectors import make_book

WORLD = [
    "Eldoria is a mystical forest realm where ancient trees whisper secrets "
    "and magical creatures roam.",
    "The Shadowfangs are a pack of dark wolves corrupted by evil magic that hunt "
    "travellers at night.",
    "Seraphina is a guardian who heals the wounded with her glowing hands in the forest glade.",
    "The tavern in the harbour town sells ale and rumours to sailors.",
    "Dragons breathe fire and ice; the old red dragon sleeps under the mountain "
    "on a hoard of gold.",
    "The king's treasury is guarded by knights; taxes are collected every spring.",
]
WORLD_QUESTIONS = {
    "the wolves howl in the dark, their eyes glowing red with corruption": 1,
    "I buy a drink at the inn by the docks and listen for gossip": 3,
    "my wound bleeds, can anyone cure me?": 2,
    "a huge winged lizard spews flames over the village": 4,
    "how much money does the crown have?": 5,
}
NORTHREACH_QUESTIONS = {  # question -> uid
    "where can I get a drink and play dice tonight?": 1,
    "where can I get a new sword made?": 8,
    "how do we cross the river?": 4,
    "is there a monster in the mountains?": 6,
    "what are those beasts howling in the dark woods?": 3,
    "a tavern with ale and music": 1,
    "tell me about the black wolves": 3,
    "a guild of merchants with brass lanterns": 5,
    "who sits on the throne?": 2,
    "we pray for a good harvest": 7,
    "the bell tolls from under the swamp water": 9,
    "masks and dancing in autumn": 10,
}
VALLEY = [
    "Shadowfangs\nshadowfang\nShadowfangs are wolf-like beasts of smoke that hunt at night "
    "and howl in the dark woods.",
    "The Gilded Goose\ntavern\nA tavern in the port town that serves cheap ale.",
    "The lighthouse\nlighthouse\nAn old lighthouse on the cliffs guides ships at sea.",
    "Royal taxes\ntaxes\nThe crown collects a tenth of every harvest in taxes.",
]
VALLEY_QUESTIONS = {"What is howling out there among the trees tonight?": 0}
TWO_QUESTIONS = {
    "What is that howling out in the dark woods tonight?": 0,
    "How do we get across the river?": 1,
}
UNRELATED = [
    "I open the door and greet the old man.",
    "She smiles and hands me a cup of tea.",
    "We walk for hours without speaking.",
    "I check my pack: rope, bread, a knife.",
    "He laughs at my joke and pats my shoulder.",
    "The morning is cold and grey.",
    "Let's rest here for the night.",
    "I ask her name.",
    "You roll a 14 on your perception check.",
    "My character sits down and writes a letter to his sister.",
    "I nod and follow him up the stairs.",
    "Thank you, that was kind of you.",
    "Can you repeat that? I didn't hear.",
    "I sit by the window and wait.",
    "She hugs me tightly.",
]
CUTS = (0.15, 0.18, 0.2, 0.22, 0.25, 0.3, 0.4)


def main() -> None:
    embedder = LocalEmbeddings()

    def embed(texts: list[str]) -> np.ndarray:
        return np.array(embedder(texts))

    northreach = [entry for entry in make_book().entries if not entry.disable]
    uids = [entry.uid for entry in northreach]
    two = parse_world_info({"entries": {"0": WOLVES, "1": FERRY}}, "two").entries
    books = [
        (WORLD, WORLD_QUESTIONS),
        (
            [entry_text(entry) for entry in northreach],
            {text: uids.index(uid) for text, uid in NORTHREACH_QUESTIONS.items()},
        ),
        (VALLEY, VALLEY_QUESTIONS),
        ([entry_text(entry) for entry in two], TWO_QUESTIONS),
    ]
    right: list[float] = []
    unrelated: list[float] = []
    first = 0
    for documents, questions in books:
        vectors = embed(documents)
        for question, wanted in questions.items():
            similarities = vectors @ embed([question])[0]
            right.append(float(similarities[wanted]))
            first += int(np.argmax(similarities) == wanted)
        unrelated.extend((embed(UNRELATED) @ vectors.T).max(axis=1).tolist())
    kept, noise = np.array(right), np.array(unrelated)
    print(f"model: {embedder.identity}")
    print(
        f"rank 1: {first}/{len(kept)} questions; the right entry's similarity: "
        f"min {kept.min():.3f}, median {np.median(kept):.3f}"
    )
    print(
        f"unrelated messages, best similarity in a book ({len(noise)} message-book pairs): "
        f"max {noise.max():.3f}, median {np.median(noise):.3f}"
    )
    for cut in CUTS:
        print(
            f"similarity >= {cut:.2f} (max_distance {1 - cut:.2f}): "
            f"right entries kept {int((kept >= cut).sum())}/{len(kept)}, "
            f"unrelated pairs let in {int((noise >= cut).sum())}/{len(noise)}"
        )


if __name__ == "__main__":
    main()
