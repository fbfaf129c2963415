"""World Info's timed effects (sticky, cooldown, delay), as SillyTavern's WorldInfoTimedEffects.

The state is SillyTavern's ``chat_metadata.timedWorldInfo``:
``{"sticky": {id: {"hash", "start", "end", "protected"}}, "cooldown": {...}}``, where
``start`` is the chat length when the effect began and ``end`` the length at which it
stops. Clotho keeps it on the node a reply hangs under, so rolling the story back
rolls the effects back; SillyTavern's "chat not advanced" rule (an unprotected effect
whose start is not behind the chat any more is dropped) still applies.

At the start of a scan every stored effect is checked (sticky first, then cooldown):
dropped if the chat has not advanced past its start (unless protected); kept but
inactive if no entry has its hash any more (the entry was edited or removed) until
its end; dropped if the entry no longer has that effect; ended when the chat reaches
its end (an ended sticky starts a protected cooldown at once, if the entry has one);
otherwise active. After the scan, every activated entry with sticky/cooldown that has
no record under its id gets one.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

__all__ = ["TimedEffects"]

_KINDS = ("sticky", "cooldown")


class _Timed(Protocol):
    id: str
    hash: str | None

    @property
    def sticky(self) -> int: ...

    @property
    def cooldown(self) -> int: ...

    @property
    def delay(self) -> int: ...


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


class TimedEffects:
    """The effects in force for one scan, and the state to store after it.

    Args:
        stored: the state stored on the previous node (JSON-able; not modified).
        chat_length: SillyTavern's ``chat.length`` for this scan.
        by_hash: the entries that can have effects (sticky or cooldown), by hash.
        delayed: the entries with a ``delay``.
    """

    def __init__(
        self,
        stored: Mapping[str, Any],
        chat_length: int,
        by_hash: Mapping[str, _Timed],
        delayed: Iterable[_Timed],
    ) -> None:
        self.chat_length = chat_length
        self.state: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _KINDS}
        for kind in _KINDS:
            records = stored.get(kind) if isinstance(stored, Mapping) else None
            if isinstance(records, Mapping):
                for key, value in records.items():
                    if isinstance(value, Mapping):
                        self.state[kind][str(key)] = copy.deepcopy(dict(value))
        self.active: dict[str, dict[str, int]] = {"sticky": {}, "cooldown": {}}
        """kind -> entry hash -> the chat length at which the effect ends."""
        self._check("sticky", by_hash)
        self._check("cooldown", by_hash)
        self.delayed = {item.id for item in delayed if item.delay and chat_length < item.delay}

    def _check(self, kind: str, by_hash: Mapping[str, _Timed]) -> None:
        records = self.state[kind]
        length = self.chat_length
        for key, value in list(records.items()):
            start, end = _number(value.get("start")), _number(value.get("end"))
            if start is None or end is None:
                del records[key]
                continue
            item = by_hash.get(str(value.get("hash")))
            if length <= start and not value.get("protected"):
                del records[key]  # chat not advanced (a swipe, a deletion)
                continue
            if item is None:
                if length >= end:
                    del records[key]
                continue
            if not getattr(item, kind):
                del records[key]
                continue
            if length >= end:
                del records[key]
                if kind == "sticky" and item.cooldown:
                    self.state["cooldown"][key] = self._record(item, "cooldown", protected=True)
                    self.active["cooldown"][str(item.hash)] = length + item.cooldown
                continue
            self.active[kind][str(item.hash)] = int(end)

    def _record(self, item: _Timed, kind: str, protected: bool) -> dict[str, Any]:
        length = self.chat_length
        return {
            "hash": item.hash,
            "start": length,
            "end": length + getattr(item, kind),
            "protected": protected,
        }

    def sticky_until(self, item: _Timed) -> int | None:
        """The chat length at which the entry's sticky effect ends, if it is in force."""
        return self.active["sticky"].get(item.hash) if item.hash else None

    def cooldown_until(self, item: _Timed) -> int | None:
        """The chat length at which the entry's cooldown ends, if it is in force."""
        return self.active["cooldown"].get(item.hash) if item.hash else None

    def is_delayed(self, item: _Timed) -> bool:
        return item.id in self.delayed

    def finish(self, activated: Iterable[_Timed]) -> dict[str, dict[str, dict[str, Any]]]:
        """The state to store: the effects of the activated entries added."""
        for item in activated:
            for kind in _KINDS:
                if getattr(item, kind) and item.id not in self.state[kind]:
                    self.state[kind][item.id] = self._record(item, kind, protected=False)
        return self.state
