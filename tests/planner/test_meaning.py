"""Lore found by meaning as SillyTavern finds it, and as the author wrote it.

Only entries marked ``vectorized`` are candidates unless the campaign says all entries;
an entry found by meaning whose secondary keys refuse it comes in only if it is marked
``vectorized`` (SillyTavern activates vector hits before it looks at keys); an entry that
fires anyway (by its keys, constant, sticky) keeps that reason and leaves its place to the
next nearest. The scan's rules are checked on small books; the planner's with a real
Chroma index on disk, the real Eldoria book and the local embedding model.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from mnemosyne import Message
from planner import PlanContext, Retrieval
from planner.lore import LorePlanner, VectorSettings
from planner.lorebook import Lorebook, load_world_info, parse_world_info
from planner.vectors import LocalEmbeddings, LoreIndex
from planner.worldinfo import ScanResult, Similar, WorldInfo
from tests._fixtures import ELDORIA

DRAGON = {
    "key": ["dragon"],
    "keysecondary": ["fire", "ice"],
    "selective": True,
    "selectiveLogic": 3,  # AND ALL
    "content": "The frost-fire dragon wakes only when fire and ice meet.",
}


def book(*entries: dict[str, Any], name: str = "Lore") -> Lorebook:
    document = {
        "entries": {
            str(uid): {"uid": uid, "key": [], "content": f"content {uid}", **fields}
            for uid, fields in enumerate(entries)
        }
    }
    return parse_world_info(document, name)


def scan(lore: Lorebook, text: str, similar: list[Similar], slots: int = 3) -> ScanResult:
    return WorldInfo([lore]).scan(
        messages=[("Player", text)],
        chat_length=1,
        budget_tokens=1_000_000,
        count_tokens=len,
        rng=random.Random(0),
        similar=similar,
        similar_slots=slots,
    )


def came_in(result: ScanResult) -> dict[str, tuple[str, str]]:
    return {a.id: (a.via, a.reason) for a in result.activated}


# ------------------------------------------------------------------------ the scan


@pytest.mark.parametrize("vectorized", [False, True])
def test_secondary_keys_refuse_an_entry_found_by_meaning_unless_it_is_vectorized(
    vectorized: bool,
) -> None:
    lore = book({**DRAGON, "vectorized": vectorized})
    result = scan(lore, "the dragon breathes fire", [Similar("Lore:0", 0.3)])
    if vectorized:  # SillyTavern: a vector hit is activated before the keys are looked at
        assert came_in(result) == {
            "Lore:0": ("meaning", "found by meaning (similarity 0.70 to the newest messages)")
        }
    else:
        assert came_in(result) == {}
        assert [(s.kind, s.reason) for s in result.skipped] == [
            ("secondary", "key 'dragon' in message 0, but secondary AND ALL: 'ice' absent")
        ]
    # with both secondary keys present, the keys fire it: the reason is the key's
    both = scan(lore, "the dragon breathes fire on the ice", [Similar("Lore:0", 0.3)])
    assert came_in(both)["Lore:0"][0] == "key"


def test_secondary_keys_are_checked_for_meaning_without_the_primary_key() -> None:
    """Found by meaning stands in for the primary keys; NOT ANY still refuses."""
    lore = book({**DRAGON, "keysecondary": ["tavern"], "selectiveLogic": 2})  # NOT ANY
    refused = scan(lore, "a wyrm in the tavern", [Similar("Lore:0", 0.2)])
    assert came_in(refused) == {}
    assert refused.skipped[0].reason == (
        "found by meaning (similarity 0.80 to the newest messages), "
        "but secondary NOT ANY: 'tavern' present"
    )
    assert came_in(scan(lore, "a wyrm in the hills", [Similar("Lore:0", 0.2)]))["Lore:0"][0] == (
        "meaning"
    )


def test_entries_that_fire_anyway_keep_their_reason_and_leave_their_place() -> None:
    lore = book(
        {"key": ["wolf"], "content": "wolves", "vectorized": True},
        {"constant": True, "content": "the world", "vectorized": True},
        {"key": ["zzz"], "content": "near", "vectorized": True},
        {"key": ["zzz"], "content": "nearer still", "vectorized": True},
        {"key": ["zzz"], "content": "far", "vectorized": True},
    )
    similar = [Similar(f"Lore:{uid}", 0.1 + uid / 10) for uid in range(5)]
    result = scan(lore, "a wolf howls", similar, slots=2)
    assert {id: via for id, (via, _) in came_in(result).items()} == {
        "Lore:0": "key",
        "Lore:1": "constant",
        "Lore:2": "meaning",
        "Lore:3": "meaning",
    }
    assert came_in(result)["Lore:0"][1] == "key 'wolf' in message 0"
    assert {s.id: s.kind for s in result.skipped} == {"Lore:4": "meaning_slots"}
    assert result.skipped[0].reason == (
        "found by meaning (similarity 0.50 to the newest messages), but the 2 place(s) for "
        "entries found by meaning went to nearer ones"
    )


def test_recursion_is_its_own_way_in() -> None:
    lore = book({"key": ["wolf"], "content": "wolves guard the glade"}, {"key": ["glade"]})
    result = scan(lore, "a wolf", [])
    assert came_in(result) == {
        "Lore:0": ("key", "key 'wolf' in message 0"),
        "Lore:1": ("recursion", "key 'glade' in recursion from 'Lore:0'"),
    }


# ------------------------------------------------------------- the planner, for real


def context(texts: list[str]) -> PlanContext:
    history = [
        Message("", "assistant" if number % 2 else "user", None, text)
        for number, text in enumerate(texts)
    ]
    state = {"variables": {}, "active_lore_ids": [], "summary": "", "lore_timers": {}}
    return PlanContext(
        history=history, state=state, user_text=texts[-1], char="Seraphina", context_window=10**6
    )


def retrieve(planner: LorePlanner, texts: list[str]) -> Retrieval:
    async def run() -> Retrieval:
        plan = await planner.plan(context(texts))
        return await planner.retrieve(plan, context(texts))

    return asyncio.run(run())


def outcome(found: Retrieval) -> tuple[Any, ...]:
    hits = [(hit.id, hit.reason, hit.via) for hit in found.hits]
    return hits, found.skipped, found.timers


def indexed(tmp_path: Path, *books: Lorebook) -> LoreIndex:
    """An index of the books with the local model (WordLlama, installed with Clotho)."""
    index = LoreIndex(tmp_path / "index")
    for each in books:
        index.sync(each)
    return index


CHATS = [
    ["Where am I?", "You are safe in my glade."],
    ["What hunts in the dark at night?"],
    ["Tell me about your healing gifts."],
    ["Who are you?", "I am the guardian of these woods.", "Are the beasts gone?"],
    ["The moon is bright tonight."],
]


def test_a_book_with_no_vectorized_entry_plays_as_with_the_search_off(tmp_path: Path) -> None:
    eldoria = load_world_info(ELDORIA.read_bytes(), "Eldoria")
    assert not any(entry.vectorized for entry in eldoria.entries)
    index = indexed(tmp_path, eldoria)
    embedder = index.embedder
    assert isinstance(embedder, LocalEmbeddings)
    with_index = LorePlanner([eldoria], index=index, seed=7)
    without = LorePlanner([eldoria], seed=7)
    embedded = embedder.embedded
    for chat in CHATS:
        assert outcome(retrieve(with_index, chat)) == outcome(retrieve(without, chat))
    assert embedder.embedded == embedded  # nothing to search: no query embedded
    plan = asyncio.run(with_index.plan(context(CHATS[1])))
    assert plan.queries == []
    assert "no entry is marked for the search by meaning (vectorized)" in plan.reasoning

    # The same book searched in full (all_entries): the search does change what fires,
    # so the comparison above could fail.
    everything = VectorSettings(all_entries=True, max_distance=0.95)
    searched = LorePlanner([eldoria], index=index, vectors=everything, seed=7)
    assert any(
        outcome(retrieve(searched, chat)) != outcome(retrieve(without, chat)) for chat in CHATS
    )


def test_a_vectorized_entry_is_found_by_meaning_and_keys_keep_their_reason(
    tmp_path: Path,
) -> None:
    raw = json.loads(ELDORIA.read_bytes())
    for entry in raw["entries"].values():
        entry["vectorized"] = True
    raw["entries"]["4"] = {**DRAGON, "uid": 4, "vectorized": False}
    eldoria = parse_world_info(raw, "Eldoria")
    index = indexed(tmp_path, eldoria)
    settings = VectorSettings(hits=1, max_distance=0.95)
    planner = LorePlanner([eldoria], index=index, vectors=settings, seed=7)

    # 'sorrow', 'feast', 'suffering' are in the Shadowfangs entry's text, not in its keys
    found = retrieve(planner, ["What feasts on sorrow and suffering?"])
    vias = {hit.id: hit.via for hit in found.hits}
    assert vias.pop("Eldoria:1") == "meaning"
    assert set(vias.values()) == {"recursion"}  # the others: keys in the Shadowfangs' text
    shadowfangs = next(hit for hit in found.hits if hit.id == "Eldoria:1")
    assert shadowfangs.similarity is not None and shadowfangs.similarity > 0
    assert shadowfangs.as_dict()["via"] == "meaning"
    # the dragon (not vectorized) is never looked at, however near
    looked_at = [hit["id"] for hit in found.details["vector"]["hits"]]
    assert "Eldoria:4" not in looked_at and looked_at[0] == "Eldoria:1"

    # Named by its key, the Shadowfangs entry comes in by key and leaves the one place
    # for meaning to the next nearest entry.
    both = retrieve(planner, ["Do shadowfang beasts feast on sorrow and suffering?"])
    vias = {hit.id: hit.via for hit in both.hits}
    assert vias.pop("Eldoria:1") == "key"
    assert list(vias.values()).count("meaning") == 1
