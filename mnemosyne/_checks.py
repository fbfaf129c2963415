"""The checks every write applies to a node's fields before anything is stored, and
the ids new nodes and sessions get.

One home for them: the store's growth, the editor and the bulk imports all call these,
so a node is refused for the same reason, in the same words, whichever way it came in.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import DeltaProblem, InvalidDeltaError, InvalidOperationError
from .models import ROLES, Role
from .state.delta import unstorable

__all__ = [
    "check_content",
    "check_delta",
    "check_metadata",
    "check_name",
    "check_role",
    "new_id",
]


def new_id() -> str:
    """A random 128-bit id in hex: random so that short prefixes are unique."""
    return secrets.token_hex(16)


def check_role(role: str) -> Role:
    match role:
        case "system" | "user" | "assistant":
            return role
    raise InvalidOperationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")


def check_content(content: object) -> str:
    if not isinstance(content, str):
        raise InvalidOperationError(f"content must be text, not {type(content).__name__}")
    if "\x00" in content:
        raise InvalidOperationError("content must not contain NUL characters (\\x00)")
    return content


def check_name(name: object) -> str | None:
    if name is None or name == "":
        return None
    if not isinstance(name, str):
        raise InvalidOperationError(f"name must be text, not {type(name).__name__}")
    if "\x00" in name:
        raise InvalidOperationError("name must not contain NUL characters (\\x00)")
    return name


def check_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidOperationError(f"metadata must be a mapping, not {type(metadata).__name__}")
    reason = unstorable(metadata)
    if reason is not None:
        raise InvalidOperationError(f"metadata: {reason}")
    return dict(metadata)


def check_delta(delta: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not delta:
        return None
    if isinstance(delta, (str, bytes)) or not isinstance(delta, Sequence):
        raise InvalidOperationError(f"a delta must be a list of operations, not {delta!r}")
    out = []
    for i, op in enumerate(delta):
        if not isinstance(op, Mapping):
            raise InvalidOperationError(f"delta operation {i} must be an object, not {op!r}")
        reason = unstorable(op.get("value"))
        if reason is not None:
            raise InvalidDeltaError([DeltaProblem(i, op, reason)])
        out.append(dict(op))
    return out


def check_limit(limit: int) -> None:
    """A page's size: at least 1."""
    if limit < 1:
        raise InvalidOperationError(f"limit must be at least 1, not {limit}")
