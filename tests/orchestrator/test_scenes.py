"""What a character witnessed (orchestrator.scenes), against the rule read node by node:
a node is witnessed by one present just before it or just after it."""

from __future__ import annotations

import random

import pytest

from mnemosyne import Message, SceneChange
from orchestrator.scenes import witnessed

NAMES = ("Ann", "Bram", "Cora")


def story(rng: random.Random, length: int) -> tuple[list[Message], list[SceneChange]]:
    messages, changes = [], []
    present: list[str] | None = None
    for i in range(length):
        messages.append(Message(f"n{i}", "assistant", None, f"text {i}"))
        if rng.random() < 0.2:
            here = [name for name in NAMES if rng.random() < 0.5]
            present = None if rng.random() < 0.2 else here
            changes.append(SceneChange(i, present))
    return messages, changes


def by_the_rule(messages: list[Message], changes: list[SceneChange], name: str) -> list[Message]:
    after = {change.index: change.present for change in changes}
    seen, present = [], None
    for i, message in enumerate(messages):
        later = after.get(i, present)
        if present is None or name in present or later is None or name in later:
            seen.append(message)
        present = later
    return seen


@pytest.mark.parametrize("seed", range(40))
def test_the_runs_kept_are_the_nodes_witnessed(seed: int) -> None:
    rng = random.Random(seed)
    messages, changes = story(rng, rng.randrange(0, 60))
    for name in NAMES:
        scope = witnessed(messages, changes, name, lambda name=name: f"({name} was away.)")
        expected = by_the_rule(messages, changes, name)
        assert scope.seen == expected
        assert [m for m in scope.history if m.id] == expected
        assert scope.path == messages
        # every message of the prompt's history maps to its place in the path
        for message, source in zip(scope.history, scope.sources, strict=True):
            assert (source is None) == (message.id == "")
            if source is not None:
                assert scope.path[source] is message
        # the runs left out are the rest, and an away line stands at each
        assert sum(run["count"] for run in scope.left_out) == len(messages) - len(expected)
        assert sum(1 for m in scope.history if not m.id) == len(scope.left_out)
        seen_ids = {m.id for m in expected}
        for run in scope.left_out:
            first = messages.index(next(m for m in messages if m.id == run["first"]))
            assert all(m.id not in seen_ids for m in messages[first : first + run["count"]])
            assert messages[first + run["count"] - 1].id == run["last"]
