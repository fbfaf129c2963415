"""The lore planner: keyword World Info and vector hits merged in one scan, with the
real local embedding model and a real Chroma collection on disk (the book's entries are
marked ``vectorized``: only those are searched by meaning by default)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mnemosyne import Message
from planner import PlanContext, Retrieval
from planner.lore import LorePlanner, VectorSettings
from planner.lorebook import parse_world_info
from planner.vectors import LoreIndex

BOOK = parse_world_info(
    {
        "entries": {
            "0": {
                "uid": 0,
                "key": ["shadowfang"],
                "vectorized": True,
                "comment": "Shadowfangs",
                "content": "Shadowfangs are wolf-like beasts of smoke that hunt at night "
                "and howl in the dark woods.",
            },
            "1": {
                "uid": 1,
                "key": ["tavern"],
                "vectorized": True,
                "comment": "The Gilded Goose",
                "content": "A tavern in the port town that serves cheap ale.",
            },
            "2": {
                "uid": 2,
                "key": ["lighthouse"],
                "vectorized": True,
                "comment": "The lighthouse",
                "content": "An old lighthouse on the cliffs guides ships at sea.",
            },
            "3": {
                "uid": 3,
                "key": ["taxes"],
                "vectorized": True,
                "comment": "Royal taxes",
                "content": "The crown collects a tenth of every harvest in taxes.",
            },
        }
    },
    "valley",
)


def context(text: str) -> PlanContext:
    history = [Message("", "user", None, text)]
    state = {"variables": {}, "active_lore_ids": [], "summary": "", "lore_timers": {}}
    return PlanContext(history=history, state=state, user_text=text)


def retrieve(planner: LorePlanner, text: str) -> Retrieval:
    async def run() -> Retrieval:
        plan = await planner.plan(context(text))
        return await planner.retrieve(plan, context(text))

    return asyncio.run(run())


@pytest.mark.slow
def test_lore_no_key_names_is_found_by_meaning(tmp_path: Path) -> None:
    index = LoreIndex(tmp_path / "index")
    index.sync(BOOK)
    planner = LorePlanner([BOOK], index=index, vectors=VectorSettings(hits=1), seed=1)
    found = retrieve(planner, "Something is howling in the dark forest tonight.")
    assert [hit.id for hit in found.hits] == ["valley:0"]
    assert found.hits[0].reason.startswith("found by meaning (similarity")
    assert found.hits[0].via == "meaning"
    assert found.details["vector"]["hits"][0]["id"] == "valley:0"

    keywords = retrieve(LorePlanner([BOOK], seed=1), "What is howling among the trees?")
    assert keywords.hits == []  # without the index, no key names it


def test_a_failing_index_leaves_the_keywords_working(tmp_path: Path) -> None:
    index = LoreIndex(tmp_path / "never-synced")  # querying an unsynced book fails
    planner = LorePlanner([BOOK], index=index, seed=1)
    found = retrieve(planner, "Meet me at the tavern.")
    assert [hit.id for hit in found.hits] == ["valley:1"]
    assert "valley" in found.details["vector"]["error"]
