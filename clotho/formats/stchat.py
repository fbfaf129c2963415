"""SillyTavern chats (JSONL) in and out of the tree.

A chat file is a header line (``chat_metadata``, user and character names) and one
JSON object per message; a group chat may have no header (SillyTavern's group save
writes the messages alone), and its messages carry each speaker (``name``,
``original_avatar``, ``force_avatar``, ``is_name``). An empty file (or only
whitespace) is an empty chat: SillyTavern writes one for a group chat with no message
yet. On import, each message becomes a node (``is_user`` -> user, a narrator's message
(``extra.type`` ``narrator``, SillyTavern's ``/sys``) -> system, else assistant;
``is_system``, a hidden message, -> a disabled node; ``name`` -> the node's name); its
swipes become sibling nodes, ``swipe_id`` the one the story goes on from; every field
is kept in the node's metadata (``metadata["sillytavern"]``: the message as it would
be with that swipe shown, reasoning included, and the swipe's own ``swipe_info`` entry
if the file had one), and the file's layout (header or none, line endings, final
newline) in the session's, so an unchanged import exports back to the same JSON on
every line, keys in their order, ``swipe_info`` as it was (absent, ``[]``, partial,
full), and the same bytes between the lines.

On export, the path root -> HEAD is the chat; each fork on it becomes the message's
swipes (siblings in order, the one on the path chosen). ``swipe_info`` holds the
entries the swipes came with, each at its own swipe: an entry is made only for a reply
Clotho generated, or to fill a gap before a swipe's real entry (the list is parallel to
the swipes). What hangs below the other alternatives cannot be held by the format: the
export says how many nodes that is (they stay in the tree). A message with no name of
its own is named by the session's names (:mod:`clotho.formats.names`); a narration node
grown in Clotho (a scene change, ``Bram leaves the scene.``) is a narrator's message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired

from pydantic import ConfigDict, Field, InstanceOf, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from clotho.errors import ClothoError
from mnemosyne import Node, NodeRecord, Session, SessionTransaction, Store, jsontext
from mnemosyne.errors import JsonTextError
from mnemosyne.validation import json_place, problem_line

from .names import NAMES, NARRATOR, SessionNames, narration, speakers

__all__ = ["ChatError", "Export", "export_chat", "import_chat", "parse_chat"]

KEY = "sillytavern"
#: Fields of a message with swipes that the tree itself holds (the texts, which one is
#: shown, each swipe's info). A message without swipes keeps all but ``mes`` as it was.
DERIVED = ("mes", "swipes", "swipe_id", "swipe_info")
#: A narrator's message's default name (SillyTavern's ``/sys``).
NARRATOR_NAME = "System"
#: The header SillyTavern 1.15 writes; a chat grown in Clotho exports with it.
NEW_HEADER = {"chat_metadata": {}, "user_name": "unused", "character_name": "unused"}


class ChatError(ClothoError, ValueError):
    """A chat file is not a SillyTavern chat; the message names the line and field."""

    code = "invalid_chat"


@dataclass(frozen=True)
class Export:
    lines: list[str]
    """The JSONL lines (the header first, if the chat has one)."""
    messages: int
    dropped: int
    """Nodes below alternatives that are not on the path: the format cannot hold them."""
    newline: str = "\n"
    """What ends a line: as the imported file had it (``\\r\\n`` or ``\\n``)."""
    final_newline: bool = True
    """Whether the last line is ended too, as the imported file had it."""

    @property
    def text(self) -> str:
        if not self.lines:
            return ""
        return self.newline.join(self.lines) + (self.newline if self.final_newline else "")


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


def _check_messages(messages: list[Any], name: str, lines: Sequence[int]) -> None:
    """``lines``: the line each message is on."""

    def place(loc: Sequence[int | str]) -> str:
        line = f"line {lines[int(loc[0])]}"
        return f"{line}: {json_place(loc[1:])}" if len(loc) > 1 else line

    for number, message in zip(lines, messages, strict=True):
        if isinstance(message, dict) and "chat_metadata" in message and "mes" not in message:
            raise _fail(
                name,
                number,
                "a second header line (chat_metadata, no mes): a chat has one header, "
                "its first line (two chats joined into one file?)",
            )
    try:
        _MESSAGES.validate_python(messages)
    except ValidationError as error:
        raise ChatError(problem_line(error, name, place=place, model=list[ChatMessage])) from None
    for number, message in zip(lines, messages, strict=True):
        swipes, swipe_id = message.get("swipes"), message.get("swipe_id", 0)
        if swipes is not None and not 0 <= swipe_id < len(swipes):
            raise _fail(
                name, number, f"swipe_id: {swipe_id} is not one of the {len(swipes)} swipes"
            )


def _is_header(document: Any) -> bool:
    """A first line without ``mes`` is the header; a group chat may have none."""
    return isinstance(document, dict) and "mes" not in document


_BLANK_LINE = re.compile(r"^[ \t\r]*$", re.MULTILINE)
_BLANK_LINE_BYTES = re.compile(rb"^[ \t\r]*$", re.MULTILINE)


def _documents(data: bytes | str, name: str) -> list[tuple[int, Any]]:
    """The file's JSON values with their lines; blank lines (and ``null`` ones) are no
    value, as SillyTavern reads them."""
    try:
        documents = jsontext.loads_lines(data, jsontext.CHAT)
    except JsonTextError as error:
        if not error.syntax:
            raise ChatError(f"{name}: {error}") from error
        # A blank line (hand-edited files have them) is read again as no value.
        nulled = (
            _BLANK_LINE_BYTES.sub(b"null", data)
            if isinstance(data, bytes)
            else _BLANK_LINE.sub("null", data)
        )
        if nulled == data:
            raise ChatError(f"{name}: {error}") from error
        try:
            documents = jsontext.loads_lines(nulled, jsontext.CHAT)
        except JsonTextError as again:
            raise ChatError(f"{name}: {again}") from again
    return [(line, value) for line, value in enumerate(documents, start=1) if value is not None]


def parse_chat(
    data: bytes | str, name: str = "chat"
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The header (``None`` for a chat without one, as SillyTavern saves a group chat)
    and the messages of a chat file. An empty file, or one of whitespace only, is a
    chat with no messages (``(None, [])``); blank lines are skipped.

    Raises:
        ChatError: a line that is not JSON, or a field of the wrong type (line and field named).
    """
    if not data.strip():
        return None, []
    documents = _documents(data, name)
    header = documents[0][1] if documents and _is_header(documents[0][1]) else None
    if header is not None:
        documents = documents[1:]
    if header is not None and not isinstance(header.get("chat_metadata", {}), dict):
        raise _fail(name, 1, "chat_metadata: expected an object")
    messages = [value for _, value in documents]
    _check_messages(messages, name, [line for line, _ in documents])
    return header, messages


def _layout(data: bytes | str) -> dict[str, Any]:
    """The file's line endings and whether its last line is ended."""
    raw = data.encode() if isinstance(data, str) else data
    body = raw.rstrip(b" \t")
    crlf = raw.count(b"\n") > 0 and raw.count(b"\r\n") == raw.count(b"\n")
    return {"newline": "\r\n" if crlf else "\n", "final_newline": body.endswith(b"\n")}


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
    """A node's metadata: the message it came from (as shown with swipe ``index``, or
    whole when it has no swipes), its keys in order, and the swipe's own info entry."""
    if index is None:  # no swipes: every field as it was but the text (the node's)
        kept = dict(message)
        kept.pop("mes", None)
    else:
        kept = _as_shown(message, index)
        for field in DERIVED:
            kept.pop(field, None)
    meta: dict[str, Any] = {"keys": list(message), "message": kept}
    if index is not None:
        swipe = message["swipes"][index]
        if index == message.get("swipe_id", 0) and swipe != message["mes"]:
            meta["swipe"] = swipe  # the list's text for it, unlike the message's
            meta["mes"] = message["mes"]
        info = message.get("swipe_info")
        if info is None and "swipe_info" in message:
            meta["swipe_info_null"] = True
        elif isinstance(info, list) and index < len(info):
            meta["swipe_info"] = info[index]
    metadata: dict[str, Any] = {KEY: meta}
    reasoning = (
        kept.get("extra", {}).get("reasoning") if isinstance(kept.get("extra"), dict) else None
    )
    if isinstance(reasoning, str) and reasoning:
        metadata["reasoning"] = reasoning
    return metadata


def _title(messages: list[dict[str, Any]], header: dict[str, Any] | None, name: str) -> str:
    characters = list(
        dict.fromkeys(
            m["name"]
            for m in messages
            if not m.get("is_user")
            and not m.get("is_system")
            and not narration(m)
            and m.get("name")
        )
    )
    if not characters:
        return name
    if header is None or len(characters) > 1:  # a group chat
        shown = ", ".join(characters[:3]) + (", …" if len(characters) > 3 else "")
        return f"{shown} (SillyTavern group chat)"
    return f"{characters[0]} (SillyTavern)"


def import_chat(
    store: Store,
    data: bytes | str,
    name: str,
    *,
    title: str | None = None,
    names: Mapping[str, str] | None = None,
    cast: Mapping[str, str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    also: Callable[[SessionTransaction], None] | None = None,
) -> Session:
    """A new session holding the chat, in one transaction (a bad file stores nothing).
    An empty chat (an empty file, as SillyTavern writes a group chat with no message
    yet) is an empty session. The chat's player and character become the session's
    names (``metadata["names"]``); ``names`` (``{"player", "character"}``, those known,
    e.g. a persona) come before them. ``cast`` maps a card file (a message's
    ``original_avatar``: ``Bram.png``) to the name of the member of the cast who spoke
    it: such a reply's node is named by the cast (a character renamed since the chat
    still speaks as its member), any other keeps the message's name. ``metadata`` is
    more of the session's (its settings). ``also`` runs in the same transaction after
    the nodes are in (to store the session's documents with it: a card, books).

    Raises:
        ChatError: the file is not a valid chat (line and field named).
    """
    header, messages = parse_chat(data, name)
    records: list[NodeRecord] = []
    parent: int | None = None
    for message in messages:
        role = "user" if message.get("is_user") else "assistant"
        if narration(message):
            role = "system"
        enabled = not message.get("is_system", False)
        speaker = message.get("name") or None
        card_file = message.get("original_avatar")
        if cast and isinstance(card_file, str) and not message.get("is_user"):
            speaker = cast.get(card_file, speaker)
        swipes = message.get("swipes")
        texts = [(message["mes"], None)] if not swipes else [(s, i) for i, s in enumerate(swipes)]
        if swipes:  # the story shows ``mes``, even where the swipe's text says otherwise
            texts[message.get("swipe_id", 0)] = (message["mes"], message.get("swipe_id", 0))
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
        if records:
            tx.insert_nodes(records, head=parent)
        if also is not None:
            also(tx)

    layout = {"header": header, "file": name, **_layout(data)}
    kept: dict[str, Any] = {**(metadata or {}), KEY: layout}
    found = {**speakers(messages), **{k: v for k, v in (names or {}).items() if v}}
    if header is not None:  # SillyTavern before 1.15 names them in the header too
        for key, field in (("player", "user_name"), ("character", "character_name")):
            given = header.get(field)
            if isinstance(given, str) and given.strip() and given != "unused":
                found.setdefault(key, given)
    if found:
        kept[NAMES] = found
    return store.create_session(
        title=title or _title(messages, header, name), metadata=kept, fill=grow
    )


def _message(node: Node, siblings: Sequence[Node], names: SessionNames) -> dict[str, Any]:
    meta = node.metadata.get(KEY) if isinstance(node.metadata.get(KEY), dict) else None
    if meta is not None:
        base, keys = dict(meta["message"]), list(meta["keys"])
    else:  # grown in Clotho
        extra: dict[str, Any] = {}
        if node.metadata.get("reasoning"):
            extra["reasoning"] = node.metadata["reasoning"]
        if node.metadata.get("model"):
            extra["model"] = node.metadata["model"]
        if node.role == "system":  # narration (a scene change): SillyTavern's /sys
            extra["type"] = NARRATOR
        base = {
            "name": node.name or (NARRATOR_NAME if node.role == "system" else names.of(node.role)),
            "is_user": node.role == "user",
            "is_system": not node.enabled,
            "send_date": node.created_at.isoformat(),
            "extra": extra,
        }
        keys = [*base, "mes"]
    if "is_system" in keys or not node.enabled:
        base["is_system"] = not node.enabled
    if meta is not None and "name" not in keys and node.name:
        base["name"] = node.name
    base["mes"] = node.content
    if len(siblings) > 1 or (meta is not None and _had_swipes(meta)):
        index = [s.id for s in siblings].index(node.id)
        base["swipes"] = [_swipe_text(s) for s in siblings]
        if meta is None or not _had_swipes(meta) or "swipe_id" in keys or index != 0:
            base["swipe_id"] = index
        info = _swipe_infos(siblings)
        if info:
            base["swipe_info"] = info
        elif meta is not None and meta.get("swipe_info_null"):
            base["swipe_info"] = None
        elif meta is None or "swipe_info" in keys:
            base["swipe_info"] = []
    order = [k for k in keys if k in base] + [k for k in base if k not in keys]
    return {k: base[k] for k in order}


def _swipe_text(node: Node) -> str:
    """A swipe's text in the list: the node's, or the list's own where the file had a
    different one than its ``mes`` (and the node is as it came)."""
    meta = node.metadata.get(KEY)
    if isinstance(meta, dict) and "swipe" in meta and node.content == meta.get("mes"):
        return str(meta["swipe"])
    return node.content


def _had_swipes(meta: dict[str, Any]) -> bool:
    """Whether the imported message had a list of swipes (its node is one of them)."""
    return "swipes" in meta["keys"] and "swipes" not in meta["message"]


def _swipe_infos(siblings: Sequence[Node]) -> list[dict[str, Any]]:
    """``swipe_info`` for these swipes: each imported swipe's own entry at its place;
    an entry made for a reply Clotho generated, and for an imported swipe without one
    only when a real entry comes after it (the list is parallel to the swipes). Nothing
    is made for an unchanged import: its list comes back as it was."""
    entries: list[dict[str, Any] | None] = []
    grown: list[bool] = []
    for sibling in siblings:
        meta = sibling.metadata.get(KEY)
        if isinstance(meta, dict):
            entry = meta.get("swipe_info")
            entries.append(entry if isinstance(entry, dict) else None)
            grown.append(False)
        else:
            entries.append(_made_info(sibling))
            grown.append(True)
    last_real = max(
        (i for i, e in enumerate(entries) if e is not None and not grown[i]), default=-1
    )
    infos: list[dict[str, Any]] = []
    for i, (sibling, entry) in enumerate(zip(siblings, entries, strict=True)):
        if entry is None:
            if i > last_real:
                break
            entry = _made_info(sibling)
        infos.append(entry)
    return infos


def _made_info(node: Node) -> dict[str, Any]:
    """A ``swipe_info`` entry for a node that has none: its send date (the imported
    message's, else when the node was made) and its model."""
    meta = node.metadata.get(KEY)
    message = meta.get("message", {}) if isinstance(meta, dict) else {}
    sent = message.get("send_date") if isinstance(message, dict) else None
    extra = {"model": node.metadata["model"]} if node.metadata.get("model") else {}
    return {"send_date": sent or node.created_at.isoformat(), "extra": extra}


def export_chat(
    store: Store, session_id: str, head: str | None = None, *, names: SessionNames | None = None
) -> Export:
    """The path to ``head`` (default HEAD) as a SillyTavern chat. An imported chat comes
    back with its header (or none), its line endings and final newline; a message with
    no name of its own is named by ``names`` (default: the names the session was given,
    :meth:`SessionNames.resolve`; the command line and the API pass the session's
    campaign and card too).

    Raises:
        mnemosyne.MnemosyneError: unknown session or node.
    """
    tree = store.tree(session_id)
    session = tree.session
    target = store.node(session.id, head).id if head else session.head_id
    path = tree.path(target)[::-1] if target else []  # root -> target, disabled too
    children = tree.children()
    kept = session.metadata.get(KEY, {}) if isinstance(session.metadata.get(KEY), dict) else {}
    header = kept.get("header", NEW_HEADER)
    speaking = names or SessionNames.resolve(metadata=session.metadata)
    on_path = {node.id for node in path}
    dropped = 0
    lines = (
        [] if header is None else [json.dumps(header, ensure_ascii=False, separators=(",", ":"))]
    )
    for node in path:
        siblings = [s for s in children.get(node.parent_id, []) if s.role == node.role]
        for sibling in siblings:
            if sibling.id not in on_path:
                dropped += _below(children, sibling.id)
        message = _message(node, siblings, speaking)
        lines.append(json.dumps(message, ensure_ascii=False, separators=(",", ":")))
    return Export(
        lines,
        len(path),
        dropped,
        newline="\r\n" if kept.get("newline") == "\r\n" else "\n",
        final_newline=bool(kept.get("final_newline", True)),
    )


def _below(children: dict[str | None, list[Node]], node_id: str) -> int:
    count, stack = 0, list(children.get(node_id, []))
    while stack:
        node = stack.pop()
        count += 1
        stack.extend(children.get(node.id, []))
    return count
