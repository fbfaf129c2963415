"""What a file brought to Import… is, told by its content (never by its name): a
character card, a World Info lorebook, a SillyTavern chat or a Clotho tree file.

The one rule the page's Import… goes by (``POST /api/imports/kind``); cards and
lorebooks are told apart by :func:`planner.filekinds.file_kind`. A tree file is JSON
whose ``format`` is ``clotho-tree`` (it is written first); a chat is JSON Lines whose
first line is a SillyTavern chat's header or message. Only the start of a chat or a tree
file is read, so telling a file of megabytes costs no more than its first line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal

from clotho.errors import ClothoError
from mnemosyne import jsontext
from mnemosyne.errors import JsonTextError
from planner.filekinds import file_kind

__all__ = ["ImportKind", "UnknownFileError", "import_kind"]

ImportKind = Literal["card", "lorebook", "chat", "tree"]

# The start of a tree file as export_tree writes it (and the page used to look for).
_TREE = re.compile(rb'^\s*\{\s*"format"\s*:\s*"clotho-tree"')
_TREE_ANYWHERE = re.compile(rb'"format"\s*:\s*"clotho-tree"')
_HEAD = 64 * 1024
#: Keys of a SillyTavern chat's first line: its header, or (a group chat without one)
#: a message.
_CHAT_HEADER = frozenset({"user_name", "character_name", "chat_metadata"})
_CHAT_MESSAGE = frozenset({"mes", "is_user"})
_BOM = b"\xef\xbb\xbf"

WHAT = (
    "a character card (PNG or JSON), a World Info lorebook (JSON), a SillyTavern chat "
    "(.jsonl) or a Clotho tree file (JSON)"
)


class UnknownFileError(ClothoError, ValueError):
    """A file given to Import… is none of the kinds Clotho imports; the message names
    the file and the kinds."""

    code = "unknown_file_kind"


def _first_line(data: bytes) -> Mapping[str, object] | None:
    line = data.removeprefix(_BOM).lstrip().split(b"\n", 1)[0]
    if not line.strip():
        return None
    try:
        value = jsontext.loads(line, jsontext.DOCUMENT)
    except JsonTextError:
        return None
    return value if isinstance(value, Mapping) else None


def import_kind(data: bytes, name: str = "file") -> ImportKind:
    """Which kind of file ``data`` is.

    Raises:
        UnknownFileError: none of them (the message names the kinds).
    """
    head = data[:_HEAD]
    if not head.removeprefix(_BOM).strip():
        return "chat"  # (SillyTavern writes a group chat with no message yet as nothing)
    if _TREE.match(head.removeprefix(_BOM)):
        return "tree"
    lore = file_kind(data[:8]) if data.startswith(b"\x89PNG") else None
    if lore is not None:
        return lore
    first = _first_line(head)
    if first is not None and (first.keys() & _CHAT_HEADER or first.keys() >= _CHAT_MESSAGE):
        # (a card or a lorebook on one line has none of these keys)
        return "chat"
    lore = file_kind(data)
    if lore is not None:
        return lore
    if _TREE_ANYWHERE.search(head):
        return "tree"
    raise UnknownFileError(f"{name}: not a file Clotho imports: it is none of {WHAT}")
