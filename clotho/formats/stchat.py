"""SillyTavern chats (JSONL) in and out of the tree.

A chat file is a header line (``chat_metadata``, user and character names) and one
JSON object per message. On import, each message becomes a node (``is_user`` ->
user, else assistant; ``is_system``, a hidden message, -> a disabled node); its
swipes become sibling nodes, ``swipe_id`` the one the story goes on from; every
field is kept in the node's metadata (``metadata["sillytavern"]``: the message as it
would be with that swipe shown, per-swipe info and reasoning included), so an
unchanged import exports back to the same JSON on every line, keys in their order.

On export, the path root -> HEAD is the chat; each fork on it becomes the message's
swipes (siblings in order, the one on the path chosen). What hangs below the other
alternatives cannot be held by the format: the export says how many nodes that is
(they stay in the tree).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, InstanceOf, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from clotho.errors import ClothoError
from mnemosyne import Node, NodeRecord, Session, SessionTransaction, Store, jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.validation import json_place, problem_line

__all__ = ["ChatError", "Export", "export_chat", "import_chat", "parse_chat"]

KEY = "sillytavern"
#: Fields of a message that the tree itself holds (text, swipes and which one is shown).
DERIVED = ("mes", "swipes", "swipe_id", "swipe_info")


class ChatError(ClothoError, ValueError):
    """A chat file is not a SillyTavern chat; the message names the line and field."""

    code = "invalid_chat"


@dataclass(frozen=True)
class Export:
    lines: list[str]
    """The JSONL lines (header first)."""
    messages: int
    dropped: int
    """Nodes below alternatives that are not on the path: the format cannot hold them."""

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _fail(name: str, line: int, problem: str) -> ChatError:
    return ChatError(f"{name}: line {line}: {problem}")


@with_config(ConfigDict(strict=True, extra="ignore"))
class ChatMessage(TypedDict):
    """A message line: the fields Clotho reads, checked; any other field is allowed
    (the format is SillyTavern's). The line's own dict is what is kept, every field in
    its order, not this validation's copy, which leaves the other fields out
    (``extra="ignore"``: copying them made the check three times slower)."""

    mes: str
    is_user: NotRequired[bool]
    is_system: NotRequired[bool]
    """A hidden message."""
    name: NotRequired[str]
    swipes: NotRequired[Annotated[list[str], Field(min_length=1)] | None]
    swipe_id: NotRequired[int]
    """The swipe shown (an index of ``swipes``)."""
    swipe_info: NotRequired[list[InstanceOf[dict[str, Any]]] | None]


_MESSAGES: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])


def _line_place(loc: Sequence[int | str]) -> str:
    """A message's place as its line (the header is line 1) and its field."""
    line = f"line {int(loc[0]) + 2}"
    return f"{line}: {json_place(loc[1:])}" if len(loc) > 1 else line


def _check_messages(messages: list[Any], name: str) -> None:
    try:
        _MESSAGES.validate_python(messages)
    except ValidationError as error:
        raise ChatError(
            problem_line(error, name, place=_line_place, model=list[ChatMessage])
        ) from None
    for number, message in enumerate(messages, start=2):
        swipes, swipe_id = message.get("swipes"), message.get("swipe_id", 0)
        if swipes is not None and not 0 <= swipe_id < len(swipes):
            raise _fail(
                name, number, f"swipe_id: {swipe_id} is not one of the {len(swipes)} swipes"
            )


def parse_chat(
    data: bytes | str, name: str = "chat"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The header and the messages of a chat file.

    Raises:
        ChatError: a line that is not JSON, or a field of the wrong type (line and field named).
    """
    try:
        documents = jsontext.loads_lines(data, jsontext.CHAT)
    except JsonTextError as error:
        if error.syntax:
            raise _fail(
                name, error.line or 1, f"not JSON ({error.problem} at column {error.column})"
            ) from error
        raise ChatError(f"{name}: {error}") from error
    if not documents:
        raise ChatError(f"{name}: empty file (a chat starts with its header line)")
    header, messages = documents[0], documents[1:]
    if not isinstance(header, dict) or "mes" in header:
        raise _fail(name, 1, "the first line is the chat's header (chat_metadata, names)")
    if "chat_metadata" in header and not isinstance(header["chat_metadata"], dict):
        raise _fail(name, 1, "chat_metadata: expected an object")
    _check_messages(messages, name)
    return header, messages


def _as_shown(message: dict[str, Any], index: int) -> dict[str, Any]:
    """The message as SillyTavern shows it with swipe ``index`` chosen."""
    info = message.get("swipe_info")
    shown = dict(message)
    if index != message.get("swipe_id", 0) and isinstance(info, list) and index < len(info):
        for field, value in info[index].items():
            if field in shown or field in ("send_date", "gen_started", "gen_finished", "extra"):
                shown[field] = value
    return shown


def _meta(message: dict[str, Any], index: int | None) -> dict[str, Any]:
    kept = _as_shown(message, index) if index is not None else dict(message)
    meta: dict[str, Any] = {"keys": list(message), "message": kept}
    for field in DERIVED:
        kept.pop(field, None)
    if index is not None:
        info = message.get("swipe_info")
        if isinstance(info, list) and index < len(info):
            meta["swipe_info"] = info[index]
    metadata: dict[str, Any] = {KEY: meta}
    reasoning = (
        kept.get("extra", {}).get("reasoning") if isinstance(kept.get("extra"), dict) else None
    )
    if isinstance(reasoning, str) and reasoning:
        metadata["reasoning"] = reasoning
    return metadata


def import_chat(store: Store, data: bytes | str, name: str, *, title: str | None = None) -> Session:
    """A new session holding the chat, in one transaction (a bad file stores nothing).

    Raises:
        ChatError: the file is not a valid chat (line and field named).
    """
    header, messages = parse_chat(data, name)
    records: list[NodeRecord] = []
    parent: int | None = None
    for message in messages:
        role = "user" if message.get("is_user") else "assistant"
        enabled = not message.get("is_system", False)
        speaker = message.get("name") or None
        swipes = message.get("swipes")
        texts = [(message["mes"], None)] if not swipes else [(s, i) for i, s in enumerate(swipes)]
        first = len(records)
        for content, index in texts:  # swipes: siblings, in order
            records.append(
                NodeRecord(
                    role,
                    content,
                    parent=parent,
                    name=speaker,
                    enabled=enabled,
                    metadata=_meta(message, index),
                )
            )
        parent = first + message.get("swipe_id", 0) if swipes else first  # the story goes on

    def grow(tx: SessionTransaction) -> None:
        # HEAD on the last message's chosen swipe: the path to it is the active one.
        tx.insert_nodes(records, head=parent)

    characters = [m.get("name") for m in messages if not m.get("is_user") and m.get("name")]
    return store.create_session(
        title=title or (f"{characters[0]} (SillyTavern)" if characters else name),
        metadata={KEY: {"header": header, "file": name}},
        fill=grow,
    )


def _message(node: Node, siblings: Sequence[Node], names: dict[str, str]) -> dict[str, Any]:
    meta = node.metadata.get(KEY) if isinstance(node.metadata.get(KEY), dict) else None
    if meta is not None:
        base, keys = dict(meta["message"]), list(meta["keys"])
    else:  # grown in Clotho
        extra: dict[str, Any] = {}
        if node.metadata.get("reasoning"):
            extra["reasoning"] = node.metadata["reasoning"]
        if node.metadata.get("model"):
            extra["model"] = node.metadata["model"]
        base = {
            "name": node.name or names["user" if node.role == "user" else "char"],
            "is_user": node.role == "user",
            "is_system": not node.enabled,
            "send_date": node.created_at.isoformat(),
            "extra": extra,
        }
        keys = [*base, "mes"]
    if "is_system" in keys or not node.enabled:
        base["is_system"] = not node.enabled
    base["mes"] = node.content
    had_swipes = "swipes" in keys
    if len(siblings) > 1 or had_swipes:
        base["swipes"] = [s.content for s in siblings]
        base["swipe_id"] = [s.id for s in siblings].index(node.id)
        base["swipe_info"] = [_swipe_info(s) for s in siblings]
    order = [k for k in keys if k in base] + [k for k in base if k not in keys]
    return {k: base[k] for k in order}


def _swipe_info(node: Node) -> dict[str, Any]:
    meta = node.metadata.get(KEY)
    if isinstance(meta, dict) and isinstance(meta.get("swipe_info"), dict):
        return meta["swipe_info"]
    return {"send_date": node.created_at.isoformat(), "extra": {}}


def export_chat(store: Store, session_id: str, head: str | None = None) -> Export:
    """The path to ``head`` (default HEAD) as a SillyTavern chat.

    Raises:
        mnemosyne.MnemosyneError: unknown session or node.
    """
    tree = store.tree(session_id)
    session = tree.session
    target = store.node(session.id, head).id if head else session.head_id
    path = _full_path(tree.nodes, target)
    children = tree.children()
    kept = session.metadata.get(KEY, {}) if isinstance(session.metadata.get(KEY), dict) else {}
    header = kept.get("header") or {
        "chat_metadata": {},
        "user_name": "unused",
        "character_name": "unused",
    }
    names = {"user": "User", "char": "Assistant"}
    on_path = {node.id for node in path}
    dropped = 0
    lines = [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
    for node in path:
        siblings = [s for s in children.get(node.parent_id, []) if s.role == node.role]
        for sibling in siblings:
            if sibling.id not in on_path:
                dropped += _below(children, sibling.id)
        message = _message(node, siblings, names)
        lines.append(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
    return Export(lines, len(path), dropped)


def _full_path(nodes: Sequence[Node], head: str | None) -> list[Node]:
    """Root -> head, disabled nodes included (they are the chat's hidden messages)."""
    if head is None:
        return []
    by_id = {node.id: node for node in nodes}
    target = by_id.get(head)
    path: list[Node] = []
    while target is not None:
        path.append(target)
        target = by_id.get(target.parent_id) if target.parent_id else None
    return path[::-1]


def _below(children: dict[str | None, list[Node]], node_id: str) -> int:
    count, stack = 0, list(children.get(node_id, []))
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(children.get(node.id, []))
    return count
