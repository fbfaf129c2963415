"""PromptTraces: what a generated node's model call was sent, stored without repeating it.

Each prompt holds the whole history, so storing prompts verbatim would make a
campaign's storage grow with the square of its length. A trace keeps instead:

- the messages as *parts*: a run of history messages is ``{"run": [first, last,
  count]}`` (the enabled nodes on the path from node ``first`` down to node
  ``last``, each sent as ``{"role", "content"}``; with ``"named": true``, a reply
  that has a speaker's name sent as ``"Name: text"``, :func:`history_message`); any
  other message is ``{"blob": hash}``, its JSON stored once in ``blobs`` under the
  SHA-256 of its text (a system prompt that does not change is stored once for the
  whole database);
- ``messages_hash``, the SHA-256 of the exact messages (canonical JSON), so a
  rebuilt trace says whether it is still what was sent (an edit in place of a message
  of the history since then makes it differ, and the trace says so);
- a JSON ``document`` with the rest (model, parameters, usage, lore and reasons...),
  whose large texts the caller stores as blobs with :func:`put_blob`.

A trace therefore costs a constant number of rows and bytes per turn whatever the
depth, plus what is new in that turn.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring as _json_string
from typing import Any

from sqlalchemy import Connection, insert, select

from . import _dialect as dialect
from . import _queries as q
from ._schema import blobs, nodes, traces
from .errors import InvalidOperationError
from .models import Message

__all__ = ["Trace", "blob_hash", "history_message", "messages_hash"]


def canonical_json(value: Any) -> str:
    """The one JSON text of a value that hashes are taken of."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def blob_hash(text: str) -> str:
    """The name of a blob: the SHA-256 of its UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """The SHA-256 of the canonical JSON of a list of messages."""
    return blob_hash(canonical_json(list(messages)))


@dataclass(frozen=True)
class Trace:
    """A node's PromptTrace as read back: the messages rebuilt from their parts."""

    node_id: str
    messages: list[dict[str, Any]]
    """The messages, rebuilt: what was sent if ``verified``."""
    messages_hash: str
    """The hash of what was sent, taken when it was sent."""
    verified: bool
    """Whether the rebuilt messages hash to ``messages_hash``."""
    document: dict[str, Any]
    parts: list[dict[str, Any]] = field(default_factory=list)
    """How the messages are stored (runs of history, blobs)."""
    problems: list[str] = field(default_factory=list)
    """Why the messages could not be rebuilt as sent, when they could not."""

    def as_dict(self) -> dict[str, Any]:
        """The trace as the CLI's ``--json`` and the API give it: the rebuilt messages,
        whether they verify, then the stored document (model, params, lore, usage...)."""
        return {
            "node_id": self.node_id,
            "messages": self.messages,
            "verified": self.verified,
            "messages_hash": self.messages_hash,
            "problems": self.problems,
            **self.document,
        }


def put_blob(conn: Connection, text: str) -> str:
    """Store a text once; its hash."""
    if not isinstance(text, str):
        raise InvalidOperationError(f"a blob must be text, not {type(text).__name__}")
    if "\x00" in text:
        raise InvalidOperationError("a blob must not contain NUL characters (\\x00)")
    digest = blob_hash(text)
    conn.execute(dialect.insert_or_ignore(conn, blobs).values(hash=digest, content=text))
    return digest


def get_blobs(conn: Connection, hashes: Iterable[str]) -> dict[str, str]:
    """The texts of the blobs that exist among ``hashes``."""
    wanted = list(dict.fromkeys(hashes))
    out: dict[str, str] = {}
    for i in range(0, len(wanted), 500):
        query = select(blobs.c.hash, blobs.c.content).where(blobs.c.hash.in_(wanted[i : i + 500]))
        out.update({row.hash: row.content for row in conn.execute(query)})
    return out


def history_message(message: Message, named: bool = False) -> dict[str, Any]:
    """How a message of the projection is sent to a model: its role and text, as they
    are; ``named`` (a story with a cast of several), a reply (``assistant``) that has a
    speaker's name as ``"Name: text"``, as SillyTavern sends a group chat. A trace
    stores such messages as references, so prompts must send them so."""
    if named and message.role == "assistant" and message.name:
        return {"role": message.role, "content": f"{message.name}: {message.content}"}
    return {"role": message.role, "content": message.content}


def _sent_json(message: Message) -> bytes:
    """``canonical_json(history_message(message))`` in UTF-8, kept on the message: the
    store hands the same read-only Message objects to every turn that reads the path
    (see mnemosyne._paths), so a deep history is encoded once, not once per turn."""
    try:
        return message._json
    except AttributeError:
        # canonical_json({"role": ..., "content": ...}) spelled out (keys sorted): the
        # same string encoder json.dumps uses without ensure_ascii, minus its set-up
        text = (
            f'{{"content":{_json_string(message.content)},"role":{_json_string(message.role)}}}'
        ).encode()
        object.__setattr__(message, "_json", text)
        return text


def _named_sent_json(message: Message) -> bytes:
    """:func:`_sent_json` of the message sent ``named`` (kept on it the same way)."""
    if message.role != "assistant" or not message.name:
        return _sent_json(message)
    try:
        return message._named_json
    except AttributeError:
        text = canonical_json(history_message(message, named=True)).encode()
        object.__setattr__(message, "_named_json", text)
        return text


def encode(
    conn: Connection,
    messages: Sequence[Mapping[str, Any]],
    sources: Sequence[int | None],
    history: Sequence[Message],
    named: bool = False,
) -> tuple[list[dict[str, Any]], str]:
    """The parts of ``messages``: runs of ``history`` where ``sources`` says a message
    is ``history[i]`` sent as :func:`history_message` sends it (``named``: replies with
    their speaker's name), blobs for everything else; and the hash of the
    messages, :func:`messages_hash` (taken from the same pieces of canonical JSON: a
    history message's is kept on it, so a long history is not encoded every turn).

    This runs on every turn over the whole prompt: the loop is kept lean.
    """
    if len(sources) != len(messages):
        raise InvalidOperationError(
            f"a trace needs one source per message: {len(messages)} messages, "
            f"{len(sources)} sources"
        )
    parts: list[dict[str, Any]] = []
    pieces: list[bytes] = []  # the canonical JSON of each message
    piece = pieces.append
    size = len(history)
    first = last = -1  # the run of history being collected: history[first..last]

    run_flag = {"named": True} if named else {}
    sent_json = _named_sent_json if named else _sent_json

    def close_run() -> None:
        if first >= 0:
            parts.append(
                {"run": [history[first].id, history[last].id, last - first + 1], **run_flag}
            )

    for message, source in zip(messages, sources, strict=True):
        if type(message) is not dict and not isinstance(message, Mapping):
            raise InvalidOperationError(f"a message must be an object, not {message!r}")
        if source is not None:
            if not 0 <= source < size:
                raise InvalidOperationError(
                    f"source {source} is not an index of the {size} history messages"
                )
            sent = history[source]
            # message == history_message(sent, named), without building the latter
            if (
                len(message) == 2
                and message.get("role") == sent.role
                and (
                    message.get("content") == sent.content
                    if not (named and sent.role == "assistant" and sent.name)
                    else message.get("content") == f"{sent.name}: {sent.content}"
                )
            ):
                piece(sent_json(sent))
                if first < 0 or source != last + 1:
                    close_run()
                    first = source
                last = source
                continue
        close_run()
        first = last = -1
        text = canonical_json(dict(message))
        piece(text.encode("utf-8"))
        parts.append({"blob": put_blob(conn, text)})
    close_run()
    # canonical_json(messages) is "[" + the messages' own joined by "," + "]"
    digest = hashlib.sha256(b"[" + b",".join(pieces) + b"]").hexdigest()
    return parts, digest


def put_trace(
    conn: Connection,
    node_pk: int,
    node_id: str,
    messages: Sequence[Mapping[str, Any]],
    sources: Sequence[int | None],
    history: Sequence[Message],
    document: Mapping[str, Any],
    named: bool = False,
) -> str:
    """Store the trace of a node; the hash of its messages (``named``: see :func:`encode`)."""
    exists = conn.execute(select(traces.c.node_pk).where(traces.c.node_pk == node_pk)).first()
    if exists is not None:
        raise InvalidOperationError(f"node {node_id} already has a trace")
    try:
        document_text = canonical_json(dict(document))
    except (TypeError, ValueError) as error:
        raise InvalidOperationError(f"a trace document must be JSON: {error}") from None
    parts, digest = encode(conn, messages, sources, history, named)
    conn.execute(
        insert(traces).values(
            node_pk=node_pk,
            messages=canonical_json(parts),
            messages_hash=digest,
            document=document_text,
        )
    )
    return digest


def load_trace(conn: Connection, node_pk: int, node_id: str) -> Trace | None:
    """A node's trace with its messages rebuilt and checked; ``None`` if it has none."""
    row = conn.execute(
        select(traces.c.messages, traces.c.messages_hash, traces.c.document).where(
            traces.c.node_pk == node_pk
        )
    ).first()
    if row is None:
        return None
    parts: list[dict[str, Any]] = json.loads(row.messages)
    texts = get_blobs(conn, (part["blob"] for part in parts if "blob" in part))
    messages: list[dict[str, Any]] = []
    problems: list[str] = []
    for part in parts:
        if "blob" in part:
            text = texts.get(part["blob"])
            if text is None:
                problems.append(f"blob {part['blob']} is missing")
                continue
            messages.append(json.loads(text))
        else:
            first, last, count = part["run"]
            rebuilt, problem = _rebuild_run(conn, first, last, count, bool(part.get("named")))
            messages.extend(rebuilt)
            if problem:
                problems.append(problem)
    verified = messages_hash(messages) == row.messages_hash
    if not verified and not problems:
        problems.append(
            "a message of the history was edited in place since it was sent "
            "(the rebuilt messages differ from the ones hashed)"
        )
    document = json.loads(row.document)
    return Trace(node_id, messages, row.messages_hash, verified, document, parts, problems)


def _rebuild_run(
    conn: Connection, first: str, last: str, count: int, named: bool = False
) -> tuple[list[dict[str, Any]], str | None]:
    keys = dict(
        conn.execute(select(nodes.c.id, nodes.c.pk).where(nodes.c.id.in_([first, last]))).all()
    )
    if first not in keys or last not in keys:
        gone = first if first not in keys else last
        return [], f"node {gone} of the history no longer exists (purged)"
    rows = q.walk_up(conn, keys[last], "n.enabled, n.id, n.role, n.name, n.content")
    ids = [node_id for _, _, node_id, _, _, _ in rows]
    if first not in ids:
        return [], f"node {first} is no longer above node {last} (the tree was edited since)"
    segment = rows[ids.index(first) :]
    rebuilt = [
        history_message(Message(node_id, role, name, content), named)
        for _, enabled, node_id, role, name, content in segment
        if enabled
    ]
    if len(rebuilt) != count:
        return rebuilt, (
            f"the history from {first} to {last} now has {len(rebuilt)} enabled messages, "
            f"not the {count} sent (nodes were moved, toggled or injected since)"
        )
    return rebuilt, None
