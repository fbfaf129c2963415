"""Who is present: a built-in of every world state, so the cast rolls back with the story.

``present`` is ``None`` (no one has come or gone: every character of the cast is in
the scene) or the names of the characters present, in the order they came. A node's
delta changes it like any state: ``set`` a whole list, ``append`` a name (a character
joins; a no-op if already there), ``remove`` one (a character leaves; refused if not
there), ``unset`` (everyone again). A character's prompt may then hold only the nodes
where it was present (the cast, still to come: issue 24).

The store does not know the cast: the first ``remove`` from everyone needs the list
of those who stay, so the one who writes it ``set``\\ s that list instead.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["MAX_NAME", "MAX_PRESENT", "apply_presence", "check_present"]

#: The most characters present at once, and the longest name (in characters).
MAX_PRESENT = 200
MAX_NAME = 200


def _name(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"present: a character's name is a non-empty text, not {value!r}")
    if len(value) > MAX_NAME:
        raise ValueError(f"present: a name has at most {MAX_NAME} characters")
    return value


def check_present(value: Any) -> list[str] | None:
    """A ``present`` given whole (``None``, or a list of distinct names), checked.

    Raises:
        ValueError: what is wrong with it.
    """
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError(f"present is a list of names (or null), not {value!r}")
    if len(value) > MAX_PRESENT:
        raise ValueError(f"present: at most {MAX_PRESENT} characters at once")
    names = [_name(item) for item in value]
    twice = sorted(name for name, count in Counter(names).items() if count > 1)
    if twice:
        raise ValueError(f"present names {', '.join(map(repr, twice))} more than once")
    return names


def apply_presence(op: str, value: Any, current: list[str] | None) -> list[str] | None:
    """``present`` after one operation (``current`` is never changed).

    Raises:
        ValueError: the operation is refused, and why.
    """
    if op == "set":
        return check_present(value)
    if op == "unset":
        return None
    if op not in ("append", "remove"):
        raise ValueError(f"present takes set, append, remove or unset, not {op}")
    name = _name(value)
    if current is None:
        raise ValueError(
            f"present is everyone (no one has come or gone): to {op} {name!r}, set the "
            "list of those present"
        )
    if op == "append":
        if name in current:
            return current
        if len(current) >= MAX_PRESENT:
            raise ValueError(f"present: at most {MAX_PRESENT} characters at once")
        return [*current, name]
    if name not in current:
        raise ValueError(f"{name!r} is not present (present: {', '.join(current) or 'no one'})")
    return [other for other in current if other != name]
