"""The messages of recent paths, kept in memory between reads (per :class:`Store`).

Reading the projection walks the whole path root -> node: at a depth of thousands
of messages that is the biggest part of a turn's own work, and it is the same path
turn after turn. So a store keeps, per session, the messages of the last few paths
it read (by the node at their end, a *tip*) and serves them again while nothing can
have changed them:

- An entry is valid for one *stamp* of its session, ``(version, updated_at)``: every
  write to a session bumps both, whichever process makes it, so a read that sees
  another stamp does not use the entry. That is what makes the cache safe across
  processes (and across stores in one process).
- A write through this store that only *grows* the tree or moves HEAD (append,
  sibling, checkout, traces, documents, keyframes, bulk inserts of new nodes)
  cannot change the path above any existing node: such a write carries the entry on
  to the stamp it commits (after the commit, and only if the entry was at the stamp
  the write started from). Any other write (the editor's operations, undo, redo,
  purge...) leaves the entry behind at the old stamp, so it is not used again.
- A path whose tip is not kept is read from the tip up only as far as the nearest
  kept tip above it (one recursive query that stops there): after a turn, the new
  reply's path is the previous one plus two rows.

The messages are :class:`~mnemosyne.Message` objects, read-only, shared by every
reader; each read gets a list of its own. Beside them a path keeps the keys of all its
nodes, disabled ones included (:class:`Path`): what a page of the projection needs to
find its place in the path without walking it; and the changes of who is present
along it (the deltas of its enabled nodes that mention ``present``, read in the same
walk): what :meth:`mnemosyne.Store.scenes` folds into who was present at each message.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .models import Message

__all__ = ["Path", "PathCache", "Stamp"]

#: What a session's entry is valid for: its version and its updated_at.
Stamp = tuple[int, datetime]

#: Walks up from a pk, stopping below the first of the given pks; the rows
#: ``(depth, enabled, id, role, name, content, parent_pk, pk, scene)``, the top one (a
#: root, or the node below a stop) first; ``scene`` is the node's delta (JSON text) if
#: it may change who is present (it mentions ``"present"``), else ``None``.
Walk = Callable[[int, Sequence[int]], list[tuple[Any, ...]]]


@dataclass(frozen=True, slots=True)
class Path:
    """One path root -> tip as it stood at a stamp, shared by its readers (read-only)."""

    messages: tuple[Message, ...]
    """Its enabled nodes, as the model sees them."""
    keys: tuple[int, ...]
    """The pk of every node on it, disabled ones included, root first."""
    enabled: tuple[int, ...]
    """Where its enabled nodes are in :attr:`keys` (ascending): as many as messages."""
    scenes: tuple[tuple[int, str], ...] = ()
    """The enabled nodes whose delta may change who is present: ``(index in
    messages, the delta's JSON text)``, in path order."""

    def extended(self, rows: Sequence[tuple[Any, ...]]) -> Path:
        """This path followed by the walked ``rows`` (top first)."""
        start = len(self.keys)
        count = len(self.messages)
        messages: list[Message] = []
        keys: list[int] = []
        enabled: list[int] = []
        scenes: list[tuple[int, str]] = []
        for i, (_, is_enabled, node_id, role, name, content, _, pk, scene) in enumerate(rows):
            keys.append(pk)
            if is_enabled:
                if scene is not None:
                    scenes.append((count + len(messages), scene))
                messages.append(Message(node_id, role, name, content))
                enabled.append(start + i)
        return Path(
            self.messages + tuple(messages),
            self.keys + tuple(keys),
            self.enabled + tuple(enabled),
            self.scenes + tuple(scenes) if scenes else self.scenes,
        )


_EMPTY = Path((), (), ())


@dataclass
class _Entry:
    stamp: Stamp
    tips: OrderedDict[int, Path] = field(default_factory=OrderedDict)


class PathCache:
    """The messages of the paths to the last ``tips`` nodes read in each of the last
    ``sessions`` sessions read, as long as their longest paths hold no more than
    ``messages`` messages in all (the session read last is kept whatever its length).
    Thread-safe."""

    def __init__(self, *, sessions: int = 16, tips: int = 8, messages: int = 50_000) -> None:
        self.max_sessions = sessions
        self.max_tips = tips
        self.max_messages = messages
        self._entries: OrderedDict[tuple[int, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        """Reads served whole from memory (for tests and benchmarks)."""
        self.extended = 0
        """Reads that walked up only to a kept tip."""
        self.misses = 0
        """Reads that walked up to the root."""

    def path(self, key: tuple[int, str], stamp: Stamp, pk: int, walk: Walk) -> Path:
        """The path root -> ``pk`` of session ``key`` as it stands at ``stamp``, read with
        ``walk`` inside the caller's read transaction (the one ``stamp`` was read in) as
        far as needed; shared: not to be changed."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.stamp != stamp:
                entry = None
            kept: dict[int, Path] = {}
            if entry is not None:
                self._entries.move_to_end(key)
                found = entry.tips.get(pk)
                if found is not None:
                    entry.tips.move_to_end(pk)
                    self.hits += 1
                    return found
                kept = dict(entry.tips)
        rows = walk(pk, list(kept))
        above = None
        if rows:
            above = rows[0][6]  # the parent of the walk's top
        base = _EMPTY
        if above in kept:
            base = kept[above]
        elif above is not None:  # not expected: the walk ends at a root or at a tip
            rows, above = walk(pk, []), None
        path = base.extended(rows)
        with self._lock:
            if above is None:
                self.misses += 1
            else:
                self.extended += 1
            entry = self._entries.get(key)
            if entry is None or entry.stamp != stamp:
                entry = self._entries[key] = _Entry(stamp)
            self._entries.move_to_end(key)
            entry.tips[pk] = path
            entry.tips.move_to_end(pk)
            while len(entry.tips) > self.max_tips:
                entry.tips.popitem(last=False)
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_sessions or self._size() > self.max_messages
            ):
                self._entries.popitem(last=False)
        return path

    def kept(self, key: tuple[int, str], stamp: Stamp, pk: int) -> Path | None:
        """The path root -> ``pk`` of session ``key`` if it is kept for ``stamp``, else
        ``None``; a look that changes nothing (not the order of what is kept, not the
        counts): for a reader of many sessions at once, which must not push out of the
        cache the few sessions being played."""
        with self._lock:
            entry = self._entries.get(key)
            return entry.tips.get(pk) if entry is not None and entry.stamp == stamp else None

    def _size(self) -> int:
        """The messages kept, about: each session's longest path (its paths share
        most of their messages)."""
        return sum(
            max((len(p.messages) for p in e.tips.values()), default=0)
            for e in self._entries.values()
        )

    def advance(self, key: tuple[int, str], before: Stamp, after: Stamp) -> None:
        """A write through this store that kept every existing path as it was took
        the session from ``before`` to ``after`` (committed): its entry, if it was
        at ``before``, is valid at ``after`` too."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.stamp == before:
                entry.stamp = after

    def forget(self, key: tuple[int, str] | None = None) -> None:
        """Drop a session's entry (``None``: every entry)."""
        with self._lock:
            if key is None:
                self._entries.clear()
            else:
                self._entries.pop(key, None)
