"""What a character witnessed: the history of a speaker's prompt in a cast of several.

A node is witnessed by a character if the character was present just before it or
just after it (so a leave and a join are both seen by the one who moves); ``present``
``None`` is everyone. :func:`witnessed` takes the path's messages and where who is
present changed along it (:meth:`mnemosyne.Store.scenes`) and keeps, in one pass over
the changes, the runs of messages the speaker saw, with one short line (the ``away``
template) where a run was left out. The narrator sees everything.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mnemosyne import Message, SceneChange

__all__ = ["Scope", "witnessed"]


@dataclass
class Scope:
    """A speaker's view of the path (the prompt's history), and how it maps to the path."""

    history: list[Message]
    """What the prompt is built from: the witnessed messages in order, an ``away`` line
    (a system message with no id) where messages were left out."""
    path: list[Message]
    """The whole path (the trace refers to its messages)."""
    sources: list[int | None]
    """For each message of :attr:`history`, its index in :attr:`path` (``None``: an
    ``away`` line)."""
    seen: list[Message]
    """The witnessed messages alone (no ``away`` line): what the lore scans."""
    left_out: list[dict[str, Any]] = field(default_factory=list)
    """The runs of path messages left out: ``{"first", "last", "count"}`` (node ids)."""
    first_gap: int | None = None
    """How many messages of :attr:`history` come before the first run left out (they
    are the path's first ones, all witnessed); ``None``: nothing was left out."""
    gaps: list[tuple[int, int, int]] = field(default_factory=list)
    """Each ``away`` line: its index in :attr:`history`, and the ``[start, end)`` of the
    run it stands for in :attr:`path`."""
    recaps: list[dict[str, Any]] = field(default_factory=list)
    """The recap calls this turn made (``TurnSetup.recap_missed``), for the trace."""
    told: list[dict[str, Any]] = field(default_factory=list)
    """Every recap the prompt holds, made now or before: ``{"covers": {"first", "last",
    "count"}, "recap"}``, kept on the reply's node (metadata ``recaps``), where the
    speaker's next turn finds them."""

    def add(self, message: Message) -> None:
        """The turn's new message (the player's, not stored yet) at the end of each."""
        self.path.append(message)
        self.history.append(message)
        if self.seen is not self.history:
            self.seen.append(message)
        self.sources.append(len(self.path) - 1)

    def replace_last(self, message: Message) -> None:
        """The new message, stored: the same place in each."""
        self.path[-1] = message
        self.history[-1] = message
        if self.seen is not self.history:
            self.seen[-1] = message


def _here(name: str, present: Sequence[str] | None) -> bool:
    return present is None or name in present


def witnessed(
    messages: list[Message],
    changes: Sequence[SceneChange],
    name: str,
    away: Callable[[], str],
) -> Scope:
    """The messages ``name`` witnessed (``changes``: where who is present changed,
    after which message, oldest first; before the first, everyone), with ``away()``'s
    text as a system line where some were left out."""
    kept: list[tuple[int, int]] = []  # [start, end) runs of the path kept

    def keep(start: int, end: int) -> None:
        if start >= end:
            return
        if kept and kept[-1][1] == start:
            kept[-1] = (kept[-1][0], end)
        else:
            kept.append((start, end))

    present: Sequence[str] | None = None
    position = 0
    for change in changes:
        index = change.index
        if _here(name, present):
            keep(position, index + 1)  # up to the change, and the change itself
        elif _here(name, change.present):
            keep(index, index + 1)  # the join (or the set) that brings them in
        present, position = change.present, index + 1
    if _here(name, present):
        keep(position, len(messages))
    if kept == [(0, len(messages))] or not messages:
        history = list(messages)
        return Scope(history, list(messages), list(range(len(messages))), history)
    history = []
    seen: list[Message] = []
    sources: list[int | None] = []
    left_out: list[dict[str, Any]] = []
    line: Message | None = None
    gaps: list[tuple[int, int, int]] = []
    first_gap: int | None = None
    previous = 0
    for start, end in [*kept, (len(messages), len(messages))]:
        if start > previous:
            if first_gap is None:
                first_gap = len(history)
            left_out.append(
                {
                    "first": messages[previous].id,
                    "last": messages[start - 1].id,
                    "count": start - previous,
                }
            )
            if line is None:
                line = Message("", "system", None, away())
            if line.content:
                gaps.append((len(history), previous, start))
                history.append(line)
                sources.append(None)
        kept_run = messages[start:end]
        history.extend(kept_run)
        seen.extend(kept_run)
        sources.extend(range(start, end))
        previous = end
    return Scope(history, list(messages), sources, seen, left_out, first_gap, gaps)
