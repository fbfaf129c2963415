"""Regex keys with catastrophic backtracking: a scan gives each match and all of them a
bounded time (``planner._jsregex.RegexClock``), skips a key that goes over for the rest
of the scan, and says so in the entry's miss; good keys keep firing; matching releases
the GIL, so other threads run while a bad key is matched."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest

from planner._jsregex import (
    MATCH_TIMEOUT_S,
    SCAN_BUDGET_S,
    RegexClock,
    RegexKey,
    RegexProblem,
    parse_regex_key,
)
from planner.base import PlanContext
from planner.lore import LorePlanner
from planner.worldinfo import ScanResult, ScanSettings, WorldInfo

from .test_worldinfo import make_book

BOMB = "/(a|a)*$/"
"""Exponential in the length of a run of ``a`` in ``regex`` too (``/(a+)+$/`` is not:
``regex`` cuts that one short by itself)."""
LONG = "a" * 60 + "!"
"""Unbounded, the bomb would take longer than anyone waits on this."""
GENEROUS_S = 10.0
"""A bound far above the clock's, far below the bomb's time: no tight timing."""


def bomb(number: int) -> str:
    """Another key as bad as :data:`BOMB` (an optional tail: no literal ``regex`` can
    look for first)."""
    return f"/(a|a)*b{{0,{number}}}$/"


def scan(entries: list[dict[str, Any]], *messages: str, **settings: Any) -> ScanResult:
    world = WorldInfo([make_book(*entries)], ScanSettings(**settings))
    return world.scan(
        messages=[("Player", text) for text in messages],
        chat_length=len(messages),
        budget_tokens=1_000_000,
        count_tokens=len,
        rng=random.Random(0),
    )


def timed(function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    start = time.monotonic()
    result = function(*args, **kwargs)
    return result, time.monotonic() - start


def test_a_catastrophic_key_is_skipped_and_says_so_while_a_good_key_fires() -> None:
    entries = [{"key": [BOMB]}, {"key": ["/dra(g|k)on/i"]}, {"key": ["griffin"]}]
    result, took = timed(scan, entries, f"A Drakon flies over {LONG}")
    assert took < GENEROUS_S
    assert [a.id for a in result.activated] == ["Lore:1"]
    (skip,) = result.skipped
    assert (skip.id, skip.kind) == ("Lore:0", "slow_regex")
    limit = f"{MATCH_TIMEOUT_S * 1000:g} ms"
    assert skip.reason == f"regex {BOMB} took longer than {limit} and was skipped for this scan"
    assert result.slow_regexes == [skip.reason]


def test_a_skipped_key_is_not_tried_again_by_the_recursion_steps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bomb's entry is a candidate in every loop (its key has no literal, and each
    loop's haystack is longer); the key is matched once, then skipped."""
    tries: list[str] = []
    search = RegexKey.search

    def counted(key: RegexKey, text: str, timeout: float | None) -> Any:
        tries.append(key.source)
        return search(key, text, timeout)

    monkeypatch.setattr(RegexKey, "search", counted)
    entries = [
        {"key": [BOMB]},
        {"key": ["gate"], "content": "the tower"},
        {"key": ["tower"], "content": "the keep"},
        {"key": ["keep"], "content": "the end"},
    ]
    result = scan(entries, f"the gate {LONG}")
    assert result.loops >= 4
    assert sorted(a.id for a in result.activated) == ["Lore:1", "Lore:2", "Lore:3"]
    assert [(s.id, s.kind) for s in result.skipped] == [("Lore:0", "slow_regex")]
    assert tries == [BOMB]


def test_an_entry_that_fires_by_another_key_names_the_skipped_one() -> None:
    result = scan([{"key": [BOMB, "dragon"]}], f"dragon {LONG}")
    (activation,) = result.activated
    assert activation.reason.startswith("key 'dragon' in message 0; regex /(a|a)*$/ took longer")


def test_a_secondary_key_that_is_skipped_explains_the_miss() -> None:
    entry = {"key": ["dragon"], "keysecondary": [BOMB], "selective": True, "selectiveLogic": 0}
    result = scan([entry], f"dragon {LONG}")
    assert not result.activated
    assert [(s.kind, s.reason.split(" took")[0]) for s in result.skipped] == [
        ("slow_regex", f"regex {BOMB}")
    ]


def test_the_scan_budget_bounds_many_slow_keys() -> None:
    """Many different bombs: each stops at the match timeout until the scan's budget is
    spent; the rest are not tried, and say so."""
    bombs = [bomb(number) for number in range(40)]
    result, took = timed(scan, [{"key": [bomb]} for bomb in bombs], LONG)
    assert not result.activated
    assert took < SCAN_BUDGET_S + GENEROUS_S
    kinds = {skip.kind for skip in result.skipped}
    assert kinds == {"slow_regex"} and len(result.skipped) == len(bombs)
    assert any("were spent" in reason for reason in result.slow_regexes)
    assert any("took longer than" in reason for reason in result.slow_regexes)


def test_a_skip_lasts_one_scan_and_is_not_remembered() -> None:
    world = WorldInfo([make_book({"key": [BOMB]})])
    for _ in range(2):
        result = world.scan(
            messages=[("Player", LONG)], chat_length=1, budget_tokens=10**6, count_tokens=len
        )
        assert [skip.kind for skip in result.skipped] == ["slow_regex"]
    assert not world.regex_cache  # a miss for lack of time is no answer


def test_matching_releases_the_gil() -> None:
    """Another thread keeps running while one bomb is matched for its whole timeout."""
    key = parse_regex_key(BOMB)
    assert key is not None and not isinstance(key, str)
    clock = RegexClock(match_timeout=1.0, budget=1.0)
    ticks = 0
    done = threading.Event()

    def count() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            time.sleep(0.005)

    counter = threading.Thread(target=count)
    counter.start()
    with clock.running():
        assert key.test(LONG) is False
    done.set()
    counter.join()
    assert BOMB in clock.skipped
    assert ticks > 20  # held, the GIL would have let it count a handful at most


def test_variable_width_look_behind_and_property_escapes_now_compile() -> None:
    """``regex`` expresses what ``re`` could not: these were compile problems before."""
    entries = [{"key": ["/(?<=sir |lady )Aldric/"]}, {"key": ["/\\p{Lu}\\p{Ll}+ roars/u"]}]
    result = scan(entries, "lady Aldric says hi", "Émeric roars")
    assert sorted(a.id for a in result.activated) == ["Lore:0", "Lore:1"]
    assert not result.skipped
    quiet = scan(entries, "sire Aldric", "émeric roars")
    assert not quiet.activated
    unknown = parse_regex_key("/\\p{Nonsense}/u")
    assert isinstance(unknown, RegexProblem) and "unknown property" in unknown.error


def test_the_planner_scans_off_the_event_loop() -> None:
    """A turn's retrieve matches in a worker thread: the loop keeps running meanwhile."""
    bombs = [{"key": [bomb(number)]} for number in range(30)]
    planner = LorePlanner([make_book({"key": ["dragon"]}, *bombs)])

    class Message:
        role, name, content = "user", "Player", f"dragon {LONG}"

    context = PlanContext(history=[Message()], state={})

    async def main() -> tuple[Any, int]:
        beats = 0

        async def beat() -> None:
            nonlocal beats
            while True:
                beats += 1
                await asyncio.sleep(0.001)

        beating = asyncio.create_task(beat())
        await asyncio.sleep(0)
        plan = await planner.plan(context)
        retrieval = await planner.retrieve(plan, context)
        beating.cancel()
        return retrieval, beats

    retrieval, beats = asyncio.run(main())
    assert [hit.id for hit in retrieval.hits] == ["Lore:0"]
    assert retrieval.skipped[0]["id"] == "Lore:1"
    assert "took longer than" in retrieval.skipped[0]["reason"]
    assert len(retrieval.details["slow_regexes"]) == len(bombs)
    assert beats > 10  # on the loop, the scan's whole budget would have passed in one beat
