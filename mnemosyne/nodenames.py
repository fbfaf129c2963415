"""Node names: how a node is named wherever one is taken (the command line's arguments,
the API's paths and bodies, the edit operations), in git's manner.

- an id, or a prefix of it of at least :data:`MIN_PREFIX` hex characters (``1a2b3c``);
- ``HEAD``, or ``@`` (git's alias for it): where the story stands;
- any of those followed by steps up the path to the root: ``~N`` (N steps), ``~`` or
  ``^`` (one step), as many as wanted: ``HEAD~2`` is HEAD's grandparent, ``@^^`` too,
  ``1a2b3c~1`` the parent of node ``1a2b3c``. A node has one parent, so ``^2`` (git's
  second parent of a merge) names nothing.

This module is the grammar (:func:`parse`, :data:`NODE_NAME_PATTERN` for the schemas);
the store resolves a parsed name against a session's tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._schema import ID_LENGTH
from .errors import InvalidOperationError

__all__ = ["MAX_NAME_LENGTH", "MIN_PREFIX", "NODE_NAME_PATTERN", "NodeName", "parse"]

#: The shortest id prefix taken (as git's short ids, but longer: fewer collisions).
MIN_PREFIX = 6
#: The longest name taken: an id and a few steps.
MAX_NAME_LENGTH = 64
_STEPS = r"(?:~[0-9]{0,9}|\^[0-9]?)*"
#: Every name :func:`parse` takes (for a schema's ``pattern``; parse says what is wrong).
NODE_NAME_PATTERN = rf"^(?:HEAD|@|[0-9a-fA-F]{{{MIN_PREFIX},{ID_LENGTH}}}){_STEPS}$"
_NAME = re.compile(r"(HEAD|@|[0-9a-zA-Z]+)((?:[~^][0-9]*)*)")
_STEP = re.compile(r"([~^])([0-9]*)")
_HEX = frozenset("0123456789abcdef")
_HINT = (
    f"give a node id or a prefix of at least {MIN_PREFIX} hex characters, "
    "HEAD (or @), HEAD~N or HEAD^"
)


@dataclass(frozen=True, slots=True)
class NodeName:
    """A parsed node name: where to start, and how many steps up from there."""

    text: str
    """The name as given (stripped)."""
    prefix: str | None
    """The id or id prefix to start from (lowercase); ``None``: HEAD."""
    up: int
    """Steps up the path to the root (0: the node itself)."""

    @property
    def start(self) -> str:
        """The starting point as written: ``HEAD`` or the id prefix."""
        return "HEAD" if self.prefix is None else self.prefix


def parse(ref: str) -> NodeName:
    """A node name parsed (see the module's doc).

    Raises:
        InvalidOperationError: the text is no node name, and why.
    """
    text = ref.strip()
    match = _NAME.fullmatch(text) if len(text) <= MAX_NAME_LENGTH else None
    if match is None:
        raise InvalidOperationError(f"{ref!r} is not a node name: {_HINT}")
    start, steps = match.groups()
    prefix: str | None = None
    if start not in ("HEAD", "@"):
        prefix = start.lower()
        if start.lower() == "head":
            raise InvalidOperationError(f"{ref!r} is not a node name: HEAD is written in capitals")
        if not set(prefix) <= _HEX or len(prefix) > ID_LENGTH:
            raise InvalidOperationError(f"{ref!r} is not a node name: {_HINT}")
        if len(prefix) < MIN_PREFIX:
            raise InvalidOperationError(
                f"node id prefix {start!r} is too short: give at least {MIN_PREFIX} characters"
            )
    up = 0
    for mark, count in _STEP.findall(steps):
        if mark == "~":
            up += int(count) if count else 1
        elif count in ("", "1"):
            up += 1
        elif count != "0":
            raise InvalidOperationError(
                f"{ref!r}: a node has one parent, so ^{count} names nothing "
                f"(~{count} is {count} steps up)"
            )
    return NodeName(text, prefix, up)
