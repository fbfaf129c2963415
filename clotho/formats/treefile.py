"""Tree files: a whole session as one JSON document, and back, losing nothing.

The document (``"format": "clotho-tree"``, version 1; see ``docs/cli.md``)::

    {
      "format": "clotho-tree",
      "version": 1,
      "session": {"id", "title", "campaign", "metadata", "state_schema",
                  "created_at", "updated_at", "head_id"},
      "documents": [{"kind", "name", "content"}],
      "nodes": [{"id", "parent_id", "role", "name", "content", "enabled", "created_at",
                 "metadata", "delta", "active_child_id", "detached"}],
      "traces": {"<node id>": {"parts", "messages_hash", "document"}},
      "blobs": {"<sha256>": "<text>"}
    }

``nodes`` lists every node, parents before their children and siblings in order: the
tree root by root, then the fragments, then the trash. ``detached`` is ``null`` but on
the top of a fragment or of the trash: ``{"place": "fragment"|"trash", "from": <the
node it hung under, or null>, "at": <time>, "state": <the world state after it where
it hung>}``. ``traces`` holds each generated node's PromptTrace as it is stored (its
history as runs of node ids, the rest as blobs); ``blobs`` the texts they name.
Document ``content`` is the document's JSON text as kept. Times are ISO 8601 with
their zone (UTC).

Keyframes (a cache) are rebuilt on import; the undo journal is not exported: an
imported session starts with an empty undo history. Its version starts again at 1,
and its documents take the import's time. An active child left ``null`` on a node
with children, or off the path to HEAD, is set as the store keeps it (the last child;
the path to HEAD) rather than refused.

Node ids are unique across a database: a document whose ids are taken (imported
before) is refused; ``new_ids`` gives the session and every node fresh ids, and
rewrites every reference to them (parents, active children, HEAD, where fragments
hung, the traces, and ids quoted in metadata).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clotho.errors import ClothoError
from mnemosyne import (
    ROLES,
    IdTakenError,
    InvalidDeltaError,
    InvalidOperationError,
    MnemosyneError,
    NodeRecord,
    Session,
    SessionTransaction,
    StateSchema,
    Store,
    StoredTrace,
    jsontext,
    new_id,
    schema_from_mapping,
)
from mnemosyne.errors import JsonTextError
from mnemosyne.jsontext import preview
from mnemosyne.traces import blob_hash

__all__ = ["FORMAT", "VERSION", "TreeFileError", "TreeIdsTakenError", "export_tree", "import_tree"]

FORMAT = "clotho-tree"
VERSION = 1

SESSION_KEYS = (
    "id",
    "title",
    "campaign",
    "metadata",
    "state_schema",
    "created_at",
    "updated_at",
    "head_id",
)
NODE_KEYS = (
    "id",
    "parent_id",
    "role",
    "name",
    "content",
    "enabled",
    "created_at",
    "metadata",
    "delta",
    "active_child_id",
    "detached",
)
DETACHED_KEYS = ("place", "from", "at", "state")
TRACE_KEYS = ("parts", "messages_hash", "document")
DOCUMENT_KEYS = ("kind", "name", "content")
TOP_KEYS = ("format", "version", "session", "documents", "nodes", "traces", "blobs")
_ID = re.compile(r"^[0-9a-f]{32}$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_KIND = re.compile(r"^[a-z][a-z0-9_]{0,31}$")  # a document's kind, as the store takes it


class TreeFileError(ClothoError, ValueError):
    """A tree file cannot be imported; the message names the place in the document."""

    code = "invalid_tree"


class TreeIdsTakenError(TreeFileError):
    """The tree's ids are in the database already (it was imported before)."""

    code = "ids_taken"


# --- export ------------------------------------------------------------------------------


def _time(value: datetime) -> str:
    return value.isoformat()


def export_tree(store: Store, session_id: str) -> dict[str, Any]:
    """The whole session as a tree-file document (JSON-ready), read in one snapshot.

    Raises:
        mnemosyne.MnemosyneError: unknown session.
    """
    dump = store.dump(session_id)
    session = dump.session
    nodes = []
    for node in dump.nodes:
        detached = None
        if node.detached is not None:
            assert node.detached_at is not None
            detached = {
                "place": node.detached,
                "from": node.detached_from,
                "at": _time(node.detached_at),
                "state": node.detached_state,
            }
        assert node.created_at is not None
        nodes.append(
            {
                "id": node.id,
                "parent_id": node.parent,
                "role": node.role,
                "name": node.name,
                "content": node.content,
                "enabled": node.enabled,
                "created_at": _time(node.created_at),
                "metadata": node.metadata,
                "delta": node.delta,
                "active_child_id": node.active_child,
                "detached": detached,
            }
        )
    return {
        "format": FORMAT,
        "version": VERSION,
        "session": {
            "id": session.id,
            "title": session.title,
            "campaign": session.campaign,
            "metadata": session.metadata,
            "state_schema": dump.state_schema,
            "created_at": _time(session.created_at),
            "updated_at": _time(session.updated_at),
            "head_id": session.head_id,
        },
        "documents": [
            {"kind": d.kind, "name": d.name, "content": d.content} for d in dump.documents
        ],
        "nodes": nodes,
        "traces": {
            trace.node_id: {
                "parts": trace.parts,
                "messages_hash": trace.messages_hash,
                "document": trace.document,
            }
            for trace in dump.traces
        },
        "blobs": dump.blobs,
    }


def tree_text(document: Mapping[str, Any]) -> str:
    """A tree-file document as the text of a file (UTF-8 JSON, indented)."""
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


# --- reading and checking a document -----------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """A checked document, ready to store."""

    session_id: str
    title: str | None
    campaign: str | None
    metadata: dict[str, Any]
    schema: StateSchema | None
    created_at: datetime
    updated_at: datetime
    head_id: str | None
    documents: list[tuple[str, str, str]]
    records: list[NodeRecord]
    traces: list[StoredTrace]
    blobs: dict[str, str]


class _Checker:
    """Checks a parsed document; every error names its place (``nodes[3].role``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def fail(self, where: str, problem: str) -> TreeFileError:
        return TreeFileError(f"{self.name}: {where}: {problem}")

    def object(self, value: Any, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        unknown = [key for key in value if key not in keys]
        if unknown:
            raise self.fail(f"{where}.{unknown[0][:40]}", "unknown key")
        missing = [key for key in keys if key not in value]
        if missing:
            raise self.fail(where, f"missing {', '.join(repr(key) for key in missing)}")
        return value

    def text(self, value: Any, where: str, *, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str):
            raise self.fail(where, f"expected text, got {_kind(value)}")
        if "\x00" in value:
            raise self.fail(where, "NUL characters (\\u0000) are not allowed")
        return value

    def id(self, value: Any, where: str, *, optional: bool = False) -> Any:
        if value is None and optional:
            return None
        if not isinstance(value, str) or not _ID.match(value):
            raise self.fail(where, f"expected an id (32 lowercase hex), got {_kind(value)}")
        return value

    def time(self, value: Any, where: str) -> datetime:
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value)
            except ValueError:
                parsed = None
            if parsed is not None and parsed.tzinfo is not None:
                return parsed
        raise self.fail(where, f"expected an ISO 8601 time with its zone, got {_kind(value)}")

    def mapping(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(where, f"expected an object, got {_kind(value)}")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:39] + "…"
        return f"text {shown!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _parse(data: bytes | str, name: str) -> Any:
    """The document, read within :data:`mnemosyne.jsontext.TREE`'s limits."""
    try:
        return jsontext.loads(data, jsontext.TREE)
    except JsonTextError as error:
        if error.syntax:
            raise TreeFileError(
                f"{name}: not JSON (line {error.line}, column {error.column}: {error.problem})"
            ) from error
        raise TreeFileError(f"{name}: {error}") from error


def _check(document: Any, name: str) -> _Plan:
    c = _Checker(name)
    if not isinstance(document, dict):
        raise TreeFileError(f"{name}: a tree file is a JSON object, not {_kind(document)}")
    if document.get("format") != FORMAT:
        raise c.fail("format", f"expected {FORMAT!r}, got {_kind(document.get('format'))}")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise c.fail("version", f"expected {VERSION}, got {_kind(version)}")
    if version > VERSION:
        raise c.fail("version", f"{version} is newer than this Clotho reads ({VERSION})")
    c.object(document, "(top)", TOP_KEYS)

    session = c.object(document["session"], "session", SESSION_KEYS)
    session_id = c.id(session["id"], "session.id")
    title = c.text(session["title"], "session.title", optional=True)
    campaign = c.text(session["campaign"], "session.campaign", optional=True)
    metadata = c.mapping(session["metadata"], "session.metadata")
    schema = None
    if session["state_schema"] is not None:
        c.mapping(session["state_schema"], "session.state_schema")
        try:
            schema = schema_from_mapping(session["state_schema"], source="session.state_schema")
        except MnemosyneError as error:
            raise TreeFileError(f"{name}: {error}") from None
    created_at = c.time(session["created_at"], "session.created_at")
    updated_at = c.time(session["updated_at"], "session.updated_at")

    documents: list[tuple[str, str, str]] = []
    if not isinstance(document["documents"], list):
        raise c.fail("documents", f"expected a list, got {_kind(document['documents'])}")
    seen_documents: set[tuple[str, str]] = set()
    for i, item in enumerate(document["documents"]):
        where = f"documents[{i}]"
        item = c.object(item, where, DOCUMENT_KEYS)
        kind = c.text(item["kind"], f"{where}.kind")
        if not _KIND.match(kind):
            raise c.fail(f"{where}.kind", f"{preview(kind)}: lowercase letters, digits and '_'")
        called = c.text(item["name"], f"{where}.name")
        if not called.strip() or len(called) > 200:
            raise c.fail(f"{where}.name", "non-empty text of at most 200 characters")
        content = c.text(item["content"], f"{where}.content")
        try:
            jsontext.loads(content, jsontext.DOCUMENT)
        except JsonTextError as error:
            raise c.fail(f"{where}.content", f"not JSON text the store keeps ({error})") from error
        if (kind, called) in seen_documents:
            raise c.fail(where, f"a second {kind} named {called!r}")
        seen_documents.add((kind, called))
        documents.append((kind, called, content))

    records, index = _check_nodes(c, document["nodes"])
    head_id = c.id(session["head_id"], "session.head_id", optional=True)
    _check_head(c, records, index, head_id)
    traces, blobs = _check_traces(c, document["traces"], document["blobs"], index)
    return _Plan(
        session_id,
        title,
        campaign,
        metadata,
        schema,
        created_at,
        updated_at,
        head_id,
        documents,
        records,
        traces,
        blobs,
    )


def _check_nodes(c: _Checker, items: Any) -> tuple[list[NodeRecord], dict[str, int]]:
    if not isinstance(items, list):
        raise c.fail("nodes", f"expected a list, got {_kind(items)}")
    index: dict[str, int] = {}
    for i, item in enumerate(items):
        where = f"nodes[{i}]"
        c.object(item, where, NODE_KEYS)
        node_id = c.id(item["id"], f"{where}.id")
        if node_id in index:
            raise c.fail(f"{where}.id", f"{node_id} is nodes[{index[node_id]}] already")
        index[node_id] = i
    records: list[NodeRecord] = []
    children: dict[str, list[str]] = {}
    for i, item in enumerate(items):
        where = f"nodes[{i}]"
        parent = c.id(item["parent_id"], f"{where}.parent_id", optional=True)
        if parent is not None:
            if parent not in index:
                raise c.fail(f"{where}.parent_id", f"unknown node {parent!r}")
            if index[parent] >= i:
                raise c.fail(
                    f"{where}.parent_id",
                    f"node {parent!r} is nodes[{index[parent]}]: parents come before children",
                )
            children.setdefault(parent, []).append(item["id"])
        if item["role"] not in ROLES:
            raise c.fail(
                f"{where}.role", f"expected one of {', '.join(ROLES)}, got {_kind(item['role'])}"
            )
        if not isinstance(item["enabled"], bool):
            raise c.fail(
                f"{where}.enabled", f"expected true or false, got {_kind(item['enabled'])}"
            )
        delta = item["delta"]
        if not isinstance(delta, list) or not all(isinstance(op, dict) for op in delta):
            raise c.fail(f"{where}.delta", "expected a list of operations (objects)")
        detached = item["detached"]
        place = source = at = state = None
        if detached is not None:
            c.object(detached, f"{where}.detached", DETACHED_KEYS)
            place = detached["place"]
            if place not in ("fragment", "trash"):
                raise c.fail(
                    f"{where}.detached.place", f"expected 'fragment' or 'trash', got {_kind(place)}"
                )
            if parent is not None:
                raise c.fail(f"{where}.detached", "a detached node has no parent_id")
            source = c.id(detached["from"], f"{where}.detached.from", optional=True)
            if source is not None and source not in index:
                raise c.fail(f"{where}.detached.from", f"unknown node {source!r}")
            at = c.time(detached["at"], f"{where}.detached.at")
            state = c.mapping(detached["state"], f"{where}.detached.state")
        records.append(
            NodeRecord(
                role=item["role"],
                content=c.text(item["content"], f"{where}.content"),
                parent=parent,
                name=c.text(item["name"], f"{where}.name", optional=True),
                enabled=item["enabled"],
                metadata=c.mapping(item["metadata"], f"{where}.metadata"),
                delta=delta,
                id=item["id"],
                created_at=c.time(item["created_at"], f"{where}.created_at"),
                active_child=c.id(
                    item["active_child_id"], f"{where}.active_child_id", optional=True
                ),
                detached=place,
                detached_from=source,
                detached_at=at,
                detached_state=state,
            )
        )
    for i, record in enumerate(records):
        if record.active_child is not None and record.active_child not in children.get(
            str(record.id), []
        ):
            raise c.fail(
                f"nodes[{i}].active_child_id",
                f"{record.active_child!r} is not a child of this node",
            )
    return records, index


def _check_head(
    c: _Checker, records: list[NodeRecord], index: dict[str, int], head_id: str | None
) -> None:
    def top(i: int) -> NodeRecord:
        while records[i].parent is not None:
            i = index[str(records[i].parent)]
        return records[i]

    in_tree = any(r.parent is None and r.detached is None for r in records)
    if head_id is None:
        if in_tree:
            raise c.fail("session.head_id", "null, but the tree has nodes: name HEAD's node")
        return
    if head_id not in index:
        raise c.fail("session.head_id", f"unknown node {head_id!r}")
    if top(index[head_id]).detached is not None:
        raise c.fail("session.head_id", f"node {head_id!r} is not in the tree (it is detached)")
    # Active children left null, or off the path to HEAD, are set as the store keeps them
    # (a node's last child; along the path to HEAD) rather than refused.


def _check_traces(
    c: _Checker, traces: Any, blobs: Any, index: dict[str, int]
) -> tuple[list[StoredTrace], dict[str, str]]:
    texts = c.mapping(blobs, "blobs")
    for digest, content in texts.items():
        where = f"blobs.{digest}"
        if not _HASH.match(digest):
            raise c.fail(where, "a blob is named by the SHA-256 of its text (64 lowercase hex)")
        c.text(content, where)
        if blob_hash(content) != digest:
            raise c.fail(where, f"the text hashes to {blob_hash(content)}, not to its name")
    stored = []
    for node_id, item in c.mapping(traces, "traces").items():
        where = f"traces.{node_id}"
        if node_id not in index:
            raise c.fail(where, "not a node of this tree")
        c.object(item, where, TRACE_KEYS)
        parts = item["parts"]
        if not isinstance(parts, list):
            raise c.fail(f"{where}.parts", f"expected a list, got {_kind(parts)}")
        for n, part in enumerate(parts):
            named = part.get("blob") if isinstance(part, dict) else None
            if isinstance(named, str) and named not in texts:
                raise c.fail(f"{where}.parts[{n}].blob", f"{named!r} is not in blobs")
        c.text(item["messages_hash"], f"{where}.messages_hash")
        c.mapping(item["document"], f"{where}.document")
        stored.append(StoredTrace(node_id, parts, item["messages_hash"], item["document"]))
    return stored, texts


# --- fresh ids ---------------------------------------------------------------------------


def _rewrite(value: Any, fresh: Mapping[str, str]) -> Any:
    """``value`` with every string that is an id of ``fresh`` replaced."""
    if isinstance(value, str):
        return fresh.get(value, value)
    if isinstance(value, list):
        return [_rewrite(item, fresh) for item in value]
    if isinstance(value, dict):
        return {key: _rewrite(item, fresh) for key, item in value.items()}
    return value


def _with_new_ids(plan: _Plan) -> _Plan:
    fresh = {str(record.id): new_id() for record in plan.records}
    fresh[plan.session_id] = new_id()

    def renamed(ref: Any) -> Any:
        return None if ref is None else fresh[ref]

    records = [
        NodeRecord(
            role=r.role,
            content=r.content,
            parent=renamed(r.parent),
            name=r.name,
            enabled=r.enabled,
            metadata=_rewrite(r.metadata, fresh),
            delta=r.delta,
            id=renamed(r.id),
            created_at=r.created_at,
            active_child=renamed(r.active_child),
            detached=r.detached,
            detached_from=renamed(r.detached_from),
            detached_at=r.detached_at,
            detached_state=r.detached_state,
        )
        for r in plan.records
    ]
    traces = [
        StoredTrace(
            fresh[t.node_id], _rewrite(t.parts, fresh), t.messages_hash, _rewrite(t.document, fresh)
        )
        for t in plan.traces
    ]
    return _Plan(
        fresh[plan.session_id],
        plan.title,
        plan.campaign,
        _rewrite(plan.metadata, fresh),
        plan.schema,
        plan.created_at,
        plan.updated_at,
        renamed(plan.head_id),
        plan.documents,
        records,
        traces,
        plan.blobs,
    )


# --- import ------------------------------------------------------------------------------------


def import_tree(store: Store, data: bytes | str, name: str, *, new_ids: bool = False) -> Session:
    """A new session holding the tree file's session, in one transaction (a refused
    file stores nothing).

    Args:
        data: the file's contents.
        name: the file's name, for messages.
        new_ids: give the session and every node fresh ids (a copy of a tree already
            in the database).

    Raises:
        TreeFileError: the document is malformed or does not hold together (the
            place in the document named). TreeIdsTakenError: its ids are in the
            database already (use ``new_ids``).
    """
    plan = _check(_parse(data, name), name)
    if new_ids:
        plan = _with_new_ids(plan)

    def fill(tx: SessionTransaction) -> None:
        try:
            tx.adopt_identity(
                plan.session_id, created_at=plan.created_at, updated_at=plan.updated_at
            )
        except IdTakenError:
            raise TreeIdsTakenError(
                f"{name}: session.id: session {plan.session_id} is in this database already "
                "(imported before?): import it with --new-ids to make a copy with fresh ids"
            ) from None
        # A disabled node's delta is not checked where it is: edits since it was
        # written (a toggle above it) may have left it not applying there.
        _stored(
            lambda: tx.insert_nodes(plan.records, head=plan.head_id, check_disabled_deltas=False),
            lambda i, error: _node_place(plan, i, error),
            name,
        )
        _stored(
            lambda: tx.insert_traces(plan.traces, plan.blobs),
            lambda i, error: f"traces.{plan.traces[i].node_id}",
            name,
        )

    try:
        return store.create_session(
            title=plan.title,
            campaign=plan.campaign,
            metadata=plan.metadata,
            schema=plan.schema,
            documents=plan.documents,
            fill=fill,
        )
    except InvalidOperationError as error:  # refused by the database itself
        raise TreeFileError(f"{name}: {error}") from None


def _node_place(plan: _Plan, i: int, error: MnemosyneError) -> str:
    if isinstance(error, IdTakenError):
        return f"nodes[{i}].id"
    if isinstance(error, InvalidDeltaError):
        return f"nodes[{i}].delta"
    if plan.records[i].detached_state is not None:
        return f"nodes[{i}].detached.state"  # the only check left to the store
    return f"nodes[{i}]"


def _stored(
    write: Callable[[], object], place: Callable[[int, MnemosyneError], str], name: str
) -> None:
    """Run a bulk write; its errors as the document's places."""
    try:
        write()
    except MnemosyneError as error:
        where = "" if error.record_index is None else place(error.record_index, error) + ": "
        if isinstance(error, IdTakenError):
            raise TreeIdsTakenError(
                f"{name}: {where}node {error.taken_id} is in this database already (imported "
                "before?): import it with --new-ids to make a copy with fresh ids"
            ) from None
        raise TreeFileError(f"{name}: {where}{error}") from None
