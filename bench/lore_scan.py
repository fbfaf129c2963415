"""World Info scan per turn: our compiled keys against the straightforward port.

Run from the repository root::

    .venv/bin/python bench/lore_scan.py            # 2,000 entries, 200 turns
    .venv/bin/python bench/lore_scan.py --quick    # 500 entries, 40 turns

The lorebook is generated from a seed: 2,000 entries with realistic keys (fantasy
names of people and places, items, common nouns; a fifth of the keys have several
words), 10 % of the entries with a regex key (``/\\bname(s|'s)?\\b/i``,
``/(sir|lady) name/i``...), 20 % with secondary keys and a selective logic, a few
constants, some with a probability, some in inclusion groups, a few with their own
scan depth or scanning the scenario, a few that prevent or exclude recursion. Each
entry's content is ~400 characters of prose that names zero to two other entries,
so recursion finds more. The chat is 200 turns of seeded prose (``bench/_texts.py``):
each turn the player's message (300 characters) is scanned with the history before
it, then the reply (600 characters) is added; about half of the messages name one to
three entries. Settings: SillyTavern's defaults but scan depth 10 (recursion on,
whole words, case-insensitive), context 16,384 tokens (budget 4,096; ``--context``
to change it: with 131,072 the budget rarely stops recursion, ~100 entries fire in
~13 loops), tokens counted as characters / 4.

- **ours** -- :class:`planner.worldinfo.WorldInfo` (compiled once, before timing):
  per message, one pass per kind of key finds every key, remembered for the next
  turns; only entries with a key present (or a constant...) are looked at.
- **ours, cold** -- the same with everything remembered (key hits, regex results)
  dropped before every turn: the cost of a scan over texts never seen (the first
  turn of a session).
- **peer** -- the straightforward port of SillyTavern's ``checkWorldInfo`` in this
  file: every loop, for every entry, for every key, a search of the joined scan text
  (joined and lower-cased once per loop and haystack; a whole-word pattern only runs
  when the key is a substring; regexes and patterns compiled once: the sensible
  naive version), same recursion loop, groups, probability and budget.

Every turn both get the same ``random.Random(seed)`` and must activate exactly the
same entries, in the same order (asserted). Times are ``time.perf_counter`` around
``scan``; the table gives median and mean ms per turn. ``--profile`` prints the top
of a cProfile of our turns. The last line is ``ratio scan=<peer ms / ours>
ms_per_turn=<ours> at <N> entries`` (medians; targets: ratio >= 5, ours < 10 ms).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import random
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from _texts import line

from planner._jsregex import JS_SPACE, RegexKey, js_trim, parse_regex_key
from planner.lorebook import Lorebook, parse_world_info
from planner.worldinfo import ScanSettings, WorldInfo

SEED = 20_260_611
CONTEXT = 16384
SCAN_DEPTH = 10
TARGET_RATIO, TARGET_MS = 5.0, 10.0
CHAR, USER = "Seraphina", "Alice"
SCENARIO = "A storm over the northern marches; the old roads are closed."

_SYLLABLES = (
    "al",
    "bar",
    "cal",
    "dor",
    "el",
    "fen",
    "gar",
    "hal",
    "is",
    "kor",
    "lan",
    "mor",
    "nel",
    "or",
    "pel",
    "quin",
    "ros",
    "sar",
    "tal",
    "ul",
    "var",
    "wen",
    "yr",
    "zan",
    "ath",
    "bri",
    "cor",
    "dra",
    "eth",
    "fal",
    "gor",
    "hel",
    "ith",
    "jor",
    "kel",
    "lor",
    "mir",
    "nor",
)
_NOUNS = (
    "keep",
    "hold",
    "marsh",
    "ford",
    "crown",
    "blade",
    "tower",
    "gate",
    "vale",
    "spire",
    "harbor",
    "well",
    "shrine",
    "forge",
    "citadel",
    "abbey",
    "bridge",
    "mine",
    "pass",
    "grove",
)
_COMMON = (
    "tavern",
    "guard",
    "king",
    "queen",
    "merchant",
    "dragon",
    "wolf",
    "ghost",
    "priest",
    "witch",
    "smith",
    "captain",
    "ferryman",
    "raven",
    "amulet",
    "lantern",
    "compass",
    "chalice",
    "oath",
    "curse",
    "plague",
    "storm",
)


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def make_book(size: int, seed: int) -> tuple[Lorebook, list[str]]:
    """A seeded World Info book of ``size`` entries, and the names it uses."""
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < size:
        name = _name(rng)
        if name.lower() not in seen:
            seen.add(name.lower())
            names.append(name)
    entries: dict[str, dict[str, Any]] = {}
    for uid, name in enumerate(names):
        kind = rng.random()
        keys = [name]
        if kind < 0.2:
            keys.append(f"{name} {rng.choice(_NOUNS)}")
        elif kind < 0.3:
            keys.append(f"the {rng.choice(_NOUNS)} of {name}")
        if rng.random() < 0.05:
            keys.append(rng.choice(_COMMON))
        if rng.random() < 0.1:
            low = name.lower()
            keys.append(
                rng.choice(
                    [
                        f"/\\b{low}(s|'s)?\\b/i",
                        f"/(sir|lady) {low}/i",
                        f"/{low} ?({'|'.join(rng.sample(_NOUNS, 3))})/i",
                        f"/\\b{low[:4]}\\w*{low[-2:]}\\b/i",
                    ]
                )
            )
        mentioned = [rng.choice(names) for _ in range(rng.choice((0, 0, 1, 1, 1, 2)))]
        content = line(rng, f"{name}:", 220)
        for other in mentioned:
            content += f" It is bound to {other}. " + line(rng, "", 90)
        entry: dict[str, Any] = {
            "uid": uid,
            "key": keys,
            "keysecondary": [],
            "comment": name,
            "content": content,
            "order": rng.choice((100, 100, 100, 50, 150, 200, 250)),
            "position": rng.choice((0, 0, 1, 4)),
            "selective": True,
        }
        if rng.random() < 0.2:
            entry["keysecondary"] = rng.sample(_COMMON, 2)
            entry["selectiveLogic"] = rng.randint(0, 3)
        if rng.random() < 0.005:
            entry["constant"] = True
        if rng.random() < 0.05:
            entry["probability"] = rng.choice((25, 50, 75))
        if rng.random() < 0.04:
            entry["group"] = f"faction{rng.randint(1, 12)}"
            entry["groupWeight"] = rng.choice((50, 100, 200))
            entry["groupOverride"] = rng.random() < 0.1
        if rng.random() < 0.02:
            entry["scanDepth"] = rng.choice((1, 4))
        if rng.random() < 0.01:
            entry["matchScenario"] = True
        if rng.random() < 0.03:
            entry["preventRecursion"] = True
        if rng.random() < 0.03:
            entry["excludeRecursion"] = True
        entries[str(uid)] = entry
    return parse_world_info({"entries": entries}, "Bench"), names


def make_chat(turns: int, names: Sequence[str], seed: int) -> list[tuple[str, str]]:
    """2 x ``turns`` messages (player, then reply), about half naming 1-3 entries."""
    rng = random.Random(seed)
    messages = []
    for turn in range(turns):
        for speaker, size in ((USER, 300), (CHAR, 600)):
            text = line(rng, f"turn {turn}", size)
            if rng.random() < 0.5:
                words = text.split(" ")
                for name in rng.sample(list(names), rng.randint(1, 3)):
                    words.insert(rng.randrange(1, len(words)), name)
                text = " ".join(words)
            messages.append((speaker, text))
    return messages


def count_tokens(text: str) -> int:
    return (len(text) + 3) // 4


# -- the peer: SillyTavern's checkWorldInfo, ported line by line ------------------------

_SPACE_SPLIT = re.compile("[" + re.escape(JS_SPACE) + "]+")
_FIELDS = (
    ("match_persona_description", "persona"),
    ("match_character_description", "description"),
    ("match_character_personality", "personality"),
    ("match_character_depth_prompt", "depth_prompt"),
    ("match_scenario", "scenario"),
    ("match_creator_notes", "creator_notes"),
)
_MACRO = re.compile(r"\{\{(char|user)\}\}", re.IGNORECASE)


class NaiveWorldInfo:
    """For each entry, for each key: a search of the joined scan text."""

    def __init__(self, books: Sequence[Lorebook], settings: ScanSettings) -> None:
        self.settings = settings
        pairs = [(book.name, e) for book in books for e in sorted(book.entries, key=_uid)]
        pairs.sort(key=lambda pair: -pair[1].order)
        self.entries = [(f"{book}:{entry.uid}", entry) for book, entry in pairs]
        self._regex: dict[str, RegexKey | None] = {}
        self._bound: dict[str, re.Pattern[str]] = {}

    def _match(self, text: str, lowered: str, key: str, case: bool, whole: bool) -> bool:
        if key not in self._regex:
            parsed = parse_regex_key(key)
            self._regex[key] = parsed if isinstance(parsed, RegexKey) else None
        regex = self._regex[key]
        if regex is not None:
            return regex.test(text)
        if not case:
            text, key = lowered, key.lower()
        if whole and len(_SPACE_SPLIT.split(key)) == 1:
            if key not in text:
                return False
            pattern = self._bound.get(key)
            if pattern is None:
                escaped = re.escape(key)
                pattern = re.compile(rf"(?:\A|[^A-Za-z0-9_]){escaped}(?:\Z|[^A-Za-z0-9_])")
                self._bound[key] = pattern
            return pattern.search(text) is not None
        return key in text

    def scan(
        self,
        messages: Sequence[tuple[str, str]],
        budget: int,
        count: Callable[[str], int],
        rng: random.Random,
        character: dict[str, str],
    ) -> list[str]:
        s = self.settings
        chat = [js_trim(f"{name}: {text}") for name, text in reversed(messages)]
        recurse: list[str] = []
        joined: dict[Any, tuple[str, str]] = {}

        def get(entry: Any, state: int) -> tuple[str, str]:
            depth = entry.scan_depth if entry.scan_depth is not None else s.scan_depth
            flags = tuple(name for flag, name in _FIELDS if getattr(entry, flag))
            key = (depth, flags, state == 3)
            if key not in joined:
                if depth <= 0:
                    joined[key] = ("", "")
                else:
                    text = "\x01" + "\n\x01".join(chat[:depth])
                    for name in flags:
                        if character.get(name):
                            text += "\n\x01" + character[name]
                    if recurse and state != 3:
                        text += "\n\x01" + "\n\x01".join(recurse)
                    joined[key] = (text, text.lower())
            return joined[key]

        def keys_of(raw: list[str]) -> list[str]:
            return [
                _MACRO.sub(lambda m: USER if m.group(1).lower() == "user" else CHAR, k) for k in raw
            ]

        def hit(entry: Any, key: str, hay: tuple[str, str]) -> bool:
            case = entry.case_sensitive if entry.case_sensitive is not None else s.case_sensitive
            whole = entry.match_whole_words
            whole = whole if whole is not None else s.match_whole_words
            return bool(key) and self._match(hay[0], hay[1], key.strip(JS_SPACE), case, whole)

        activated: dict[str, Any] = {}
        failed: set[str] = set()
        all_text = ""
        state, count_loops, overflowed = 1, 0, False
        while state:
            if s.max_recursion_steps and s.max_recursion_steps <= count_loops:
                break
            count_loops += 1
            joined.clear()
            now = []
            for id, entry in self.entries:
                if id in failed or id in activated or entry.disable:
                    continue
                if state == 2 and s.recursive and entry.exclude_recursion:
                    continue
                if entry.constant:
                    now.append((id, entry))
                    continue
                if not entry.keys:
                    continue
                hay = get(entry, state)
                if not any(hit(entry, key, hay) for key in keys_of(entry.keys)):
                    continue
                secondary = keys_of(entry.secondary_keys)
                if not (entry.selective and secondary):
                    now.append((id, entry))
                    continue
                found = [hit(entry, key, hay) for key in secondary]
                logic = entry.selective_logic
                if (
                    (logic == 0 and any(found))
                    or (logic == 1 and not all(found))
                    or (logic == 2 and not any(found))
                    or (logic == 3 and all(found))
                ):
                    now.append((id, entry))
            self._groups(now, activated, rng)
            before = count(all_text)
            content = ""
            for id, entry in now:
                if overflowed:
                    continue
                rolled = entry.use_probability and entry.probability != 100
                if rolled and not rng.random() * 100 <= (entry.probability or 0):
                    failed.add(id)
                    continue
                content += entry.content + "\n"
                if before + count(content) >= budget:
                    overflowed = True
                    continue
                activated[id] = entry
            recursing = [e for id, e in now if id not in failed and not e.prevent_recursion]
            state = 2 if s.recursive and not overflowed and recursing else 0
            if state:
                text = "\n".join(entry.content for entry in recursing)
                if text:
                    recurse.append(text)
                    all_text = text + "\n" + all_text
        ordered = sorted(activated.items(), key=lambda pair: -pair[1].order)
        return [id for id, _ in reversed(ordered)]

    def _groups(self, now: list[Any], activated: dict[str, Any], rng: random.Random) -> None:
        grouped: dict[str, list[Any]] = {}
        for pair in now:
            for name in (g for g in re.split(r",\s*", pair[1].group) if g):
                grouped.setdefault(name, []).append(pair)
        for name, group in grouped.items():
            if any(entry.group == name for entry in activated.values()):
                for pair in group:
                    if pair in now:
                        now.remove(pair)
                continue
            if len(group) <= 1:
                continue
            prio = sorted((p for p in group if p[1].group_override), key=lambda p: -p[1].order)
            if prio:
                winner = prio[0]
            else:
                total = sum(p[1].group_weight for p in group)
                roll, reached, winner = rng.random() * total, 0.0, None
                for pair in group:
                    reached += pair[1].group_weight
                    if roll <= reached:
                        winner = pair
                        break
            for pair in group:
                if pair is not winner and pair in now:
                    now.remove(pair)


def _macro(found: re.Match[str]) -> str:
    return USER if found.group(1).lower() == "user" else CHAR


def _uid(entry: Any) -> int:
    return entry.uid


# -- the run ------------------------------------------------------------------------------


def run(size: int, turns: int, profile: bool, context: int = CONTEXT) -> dict[str, float]:
    book, names = make_book(size, SEED)
    settings = ScanSettings(scan_depth=SCAN_DEPTH)
    started = time.perf_counter()
    ours = WorldInfo([book], settings)
    compile_ms = (time.perf_counter() - started) * 1000
    peer = NaiveWorldInfo([book], settings)
    chat = make_chat(turns, names, SEED + 1)
    budget = settings.budget(context)
    character = {"scenario": SCENARIO}
    times: dict[str, list[float]] = {"ours": [], "cold": [], "peer": []}
    activations, loops = [], []
    profiler = cProfile.Profile() if profile else None
    for turn in range(turns):
        history = chat[: 2 * turn + 1]

        def ours_scan(history: list[tuple[str, str]] = history, turn: int = turn) -> Any:
            return ours.scan(
                messages=history,
                chat_length=len(history),
                char=CHAR,
                user=USER,
                character=character,
                budget_tokens=budget,
                count_tokens=count_tokens,
                rng=random.Random(SEED + turn),
            )

        start = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        result = ours_scan()
        if profiler is not None:
            profiler.disable()
        times["ours"].append((time.perf_counter() - start) * 1000)
        ours.static.cache.clear()
        ours.regex_cache.clear()
        start = time.perf_counter()
        cold = ours_scan()
        times["cold"].append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        expected = peer.scan(history, budget, count_tokens, random.Random(SEED + turn), character)
        times["peer"].append((time.perf_counter() - start) * 1000)
        got = [activation.id for activation in result.activated]
        assert got == expected, f"turn {turn}: ours {got} != peer {expected}"
        assert [activation.id for activation in cold.activated] == expected, f"turn {turn} cold"
        activations.append(len(got))
        loops.append(result.loops)
    print(
        f"\n== {size} entries, {turns} turns, scan depth {SCAN_DEPTH}, recursion on, "
        f"budget {budget} tokens =="
    )
    print(
        f"compiled in {compile_ms:.0f} ms; per turn: {statistics.fmean(activations):.1f} entries "
        f"activated (max {max(activations)}), {statistics.fmean(loops):.1f} loops; "
        "same activated entries on every turn: yes"
    )
    print(f"{'side':<12} {'median ms':>10} {'mean ms':>9} {'max ms':>8}")
    for side, label in (("ours", "ours"), ("cold", "ours, cold"), ("peer", "peer")):
        values = times[side]
        print(
            f"{label:<12} {statistics.median(values):>10.2f} {statistics.fmean(values):>9.2f} "
            f"{max(values):>8.2f}"
        )
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("cumulative").print_stats(18)
        print(f"\n== cProfile of our {turns} turns (cumulative) ==")
        print(out.getvalue().rstrip())
    return {side: statistics.median(values) for side, values in times.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="500 entries, 40 turns")
    parser.add_argument("--profile", action="store_true", help="cProfile our turns")
    parser.add_argument(
        "--context", type=int, default=CONTEXT, help=f"context window (default {CONTEXT})"
    )
    args = parser.parse_args(argv)
    size, turns = (500, 40) if args.quick else (args.entries, args.turns)
    figures = run(size, turns, args.profile, args.context)
    ratio = figures["peer"] / figures["ours"]
    ok = lambda good: "ok" if good else "MISSED"  # noqa: E731
    print(
        f"\ntargets at {size} entries: ratio {ratio:.1f} >= {TARGET_RATIO:g} "
        f"{ok(ratio >= TARGET_RATIO)}; ours {figures['ours']:.2f} ms < {TARGET_MS:g} "
        f"{ok(figures['ours'] < TARGET_MS)}; cold {figures['cold']:.2f} ms < {TARGET_MS:g} "
        f"{ok(figures['cold'] < TARGET_MS)}"
    )
    print(f"ratio scan={ratio:.1f} ms_per_turn={figures['ours']:.2f} at {size} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
