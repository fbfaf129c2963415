"""Node names: how a node is named wherever one is taken (the command line's arguments,
the API's paths and bodies, the edit operations), in git's manner.

- an id, or a prefix of it of at least :data:`MIN_PREFIX` hex characters (``1a2b3c``);
- ``HEAD``, or ``@`` (git's alias for it): where the story stands;
- a tag or a branch of the session (:mod:`mnemosyne.refs`): ``first-meeting``;
- any of those followed by steps up the path to the root: ``~N`` (N steps), ``~`` or
  ``^`` (one step), as many as wanted: ``HEAD~2`` is HEAD's grandparent, ``@^^`` too,
  ``1a2b3c~1`` the parent of node ``1a2b3c``, ``first-meeting~2`` two steps above the
  tag. A node has one parent, so ``^2`` (git's second parent of a merge) names nothing.

A tag's or branch's own name (:func:`check_ref_name`) is what cannot be read as anything
else: 1 to :data:`MAX_REF_LENGTH` characters, ASCII letters, digits, ``-``, ``_`` and
``.``, starting with a letter; not all hex digits (``cafe``, ``deadbeef`` read as id
prefixes), not ``head`` in any case nor starting with ``HEAD``, no ``~`` or ``^``
(they are steps).

This module is the grammar (:func:`parse`, :data:`NODE_NAME_PATTERN` for the schemas);
the store resolves a parsed name against a session's tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ._schema import ID_LENGTH
from .errors import InvalidOperationError

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_REF_LENGTH",
    "MIN_PREFIX",
    "NODE_NAME_PATTERN",
    "REF_NAME_PATTERN",
    "NodeName",
    "check_ref_name",
    "parse",
]

#: The shortest id prefix taken (as git's short ids, but longer: fewer collisions).
MIN_PREFIX = 6
#: The longest name taken: an id (or a tag) and a few steps.
MAX_NAME_LENGTH = 64
#: The longest tag or branch name.
MAX_REF_LENGTH = 40
_STEPS = r"(?:~[0-9]{0,9}|\^[0-9]?)*"
_REF = rf"[A-Za-z][A-Za-z0-9._-]{{0,{MAX_REF_LENGTH - 1}}}"
#: A tag's or branch's name as a schema's ``pattern`` (:func:`check_ref_name` says more).
REF_NAME_PATTERN = rf"^{_REF}$"
#: Every name :func:`parse` takes (for a schema's ``pattern``; parse says what is wrong).
NODE_NAME_PATTERN = rf"^(?:HEAD|@|[0-9a-fA-F]{{{MIN_PREFIX},{ID_LENGTH}}}|{_REF}){_STEPS}$"
_NAME = re.compile(r"(HEAD|@|[0-9a-zA-Z][0-9a-zA-Z._-]*)((?:[~^][0-9]*)*)")
_REF_NAME = re.compile(_REF)
_STEP = re.compile(r"([~^])([0-9]*)")
_HEX = frozenset("0123456789abcdef")
_HINT = (
    f"give a node id or a prefix of at least {MIN_PREFIX} hex characters, "
    "a tag or branch name, HEAD (or @), HEAD~N or HEAD^"
)


@dataclass(frozen=True, slots=True)
class NodeName:
    """A parsed node name: where to start, and how many steps up from there."""

    text: str
    """The name as given (stripped)."""
    prefix: str | None
    """The id or id prefix to start from (lowercase); ``None``: HEAD or a tag."""
    up: int
    """Steps up the path to the root (0: the node itself)."""
    ref: str | None = None
    """The tag or branch to start from (as written); ``None``: HEAD or an id."""

    @property
    def start(self) -> str:
        """The starting point as written: ``HEAD``, the id prefix or the tag."""
        return self.ref or ("HEAD" if self.prefix is None else self.prefix)


def check_ref_name(name: str) -> str:
    """A tag's or branch's name, checked (see the module's doc).

    Raises:
        InvalidOperationError: it cannot be one, and why.
    """
    if not isinstance(name, str) or not name:
        raise InvalidOperationError("a tag or branch name is 1 to 40 characters")
    if len(name) > MAX_REF_LENGTH:
        raise InvalidOperationError(
            f"tag or branch name {name[:50]!r} is too long: at most {MAX_REF_LENGTH} characters"
        )
    if name.lower() == "head" or name.startswith("HEAD"):
        raise InvalidOperationError(f"{name!r} cannot be a tag or branch name: it reads as HEAD")
    if set(name.lower()) <= _HEX:
        raise InvalidOperationError(
            f"{name!r} cannot be a tag or branch name: it is all hex digits, "
            "so it reads as a node id prefix (add a letter past f, or a '-')"
        )
    if _REF_NAME.fullmatch(name) is None:
        raise InvalidOperationError(
            f"{name!r} cannot be a tag or branch name: use ASCII letters, digits, "
            "'-', '_' and '.', starting with a letter (no spaces, '~' or '^')"
        )
    return name


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
    tag: str | None = None
    if start.lower() == "head" and start != "HEAD":
        raise InvalidOperationError(f"{ref!r} is not a node name: HEAD is written in capitals")
    if start not in ("HEAD", "@") and not set(start.lower()) <= _HEX:
        try:
            tag = check_ref_name(start)
        except InvalidOperationError as error:
            raise InvalidOperationError(f"{ref!r} is not a node name: {error}") from None
    elif start not in ("HEAD", "@"):
        prefix = start.lower()
        if len(prefix) > ID_LENGTH:
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
    return NodeName(text, prefix, up, tag)
