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
      "blobs": {"<sha256>": "<text>"},
      "refs": [{"name", "kind", "node_id"}]
    }

``nodes`` lists every node, parents before their children and siblings in order: the
tree root by root, then the fragments, then the trash. ``detached`` is ``null`` but on
the top of a fragment or of the trash: ``{"place": "fragment"|"trash", "from": <the
node it hung under, or null>, "at": <time>, "state": <the world state after it where
it hung>}``. ``traces`` holds each generated node's PromptTrace as it is stored (its
history as runs of node ids, the rest as blobs); ``blobs`` the texts they name.
``refs`` are the session's tags and branches (``kind`` ``"tag"`` or ``"branch"``; see
``docs/tags.md``), by name; a file without it (written before names existed) has none.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    InstanceOf,
    PlainValidator,
    ValidationError,
    with_config,
)
from typing_extensions import TypedDict

from clotho.errors import ClothoError
from mnemosyne import (
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
from mnemosyne.models import Role
from mnemosyne.nodenames import MAX_REF_LENGTH, check_ref_name
from mnemosyne.traces import blob_hash
from mnemosyne.validation import problem_line

__all__ = ["FORMAT", "VERSION", "TreeFileError", "TreeIdsTakenError", "export_tree", "import_tree"]

FORMAT = "clotho-tree"
VERSION = 1

ID_PATTERN = r"^[0-9a-f]{32}$"
HASH_PATTERN = r"^[0-9a-f]{64}$"
KIND_PATTERN = r"^[a-z][a-z0-9_]{0,31}$"  # a document's kind, as the store takes it
NO_NUL_PATTERN = r"^[^\x00]*$"
NAME_PATTERN = r"^[^\x00]*\S[^\x00]*$"
#: What each pattern means, for messages.
PATTERNS = {
    ID_PATTERN: "expected an id (32 lowercase hex)",
    HASH_PATTERN: "a blob is named by the SHA-256 of its text (64 lowercase hex)",
    KIND_PATTERN: "lowercase letters, digits and '_'",
    NO_NUL_PATTERN: "NUL characters (\\u0000) are not allowed",
    NAME_PATTERN: "non-empty text without NUL characters",
}


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
        "refs": [
            {"name": ref.name, "kind": ref.kind, "node_id": ref.node_id} for ref in dump.names
        ],
    }


def tree_text(document: Mapping[str, Any]) -> str:
    """A tree-file document as the text of a file (UTF-8 JSON, indented)."""
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


# --- reading and checking a document -----------------------------------------------------


def _parsed_time(value: Any) -> datetime:
    """An ISO 8601 time with its zone, as ``datetime.fromisoformat`` reads it."""
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.tzinfo is not None:
            return parsed
    raise ValueError(f"expected an ISO 8601 time with its zone, got {preview(value)}")


Id = Annotated[str, Field(pattern=ID_PATTERN)]
Text = Annotated[str, Field(pattern=NO_NUL_PATTERN)]
Time = Annotated[datetime, PlainValidator(_parsed_time)]
Object = InstanceOf[dict[str, Any]]
"""A JSON object, kept as it is (not copied: a tree holds one per node, and more)."""
_STRICT = ConfigDict(strict=True, extra="forbid", frozen=True)


class _Strict(BaseModel):
    model_config = _STRICT


class TreeSession(_Strict):
    """``session``: every key present (``null`` where there is nothing)."""

    id: Id
    title: Text | None
    campaign: Text | None
    metadata: Object
    state_schema: Object | None
    created_at: Time
    updated_at: Time
    head_id: Id | None


class TreeDocument(_Strict):
    """``documents[i]``: a lorebook, a card... as the store keeps it (JSON text)."""

    kind: Annotated[str, Field(pattern=KIND_PATTERN)]
    name: Annotated[str, Field(max_length=200, pattern=NAME_PATTERN)]
    content: Text


# A node and its ``detached`` are TypedDicts, not models: a tree has up to a million
# nodes, validated in one call, and as dicts that call takes about half the time.
TreeDetached = TypedDict(
    "TreeDetached",
    {"place": Literal["fragment", "trash"], "from": Id | None, "at": Time, "state": Object},
)
"""``nodes[i].detached``: where the top of a fragment or of the trash hung."""
TreeDetached.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]


@with_config(_STRICT)
class TreeNode(TypedDict):
    """``nodes[i]``."""

    id: Id
    parent_id: Id | None
    role: Role
    name: Text | None
    content: Text
    enabled: bool
    created_at: Time
    metadata: Object
    delta: list[Object]
    active_child_id: Id | None
    detached: TreeDetached | None


class TreeTrace(_Strict):
    """``traces[node id]``: a PromptTrace as stored (its parts checked by the store)."""

    parts: list[Any]
    messages_hash: Text
    document: Object


class TreeRef(_Strict):
    """``refs[i]``: a tag or a branch (its name checked as the store checks it)."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_REF_LENGTH)]
    kind: Literal["tag", "branch"]
    node_id: Id


class TreeFile(_Strict):
    """A tree file's document (checked for ``format`` and ``version`` first)."""

    format: Literal["clotho-tree"]
    version: Literal[1]
    session: TreeSession
    documents: list[TreeDocument]
    nodes: list[TreeNode]
    traces: dict[str, TreeTrace]
    blobs: dict[Annotated[str, Field(pattern=HASH_PATTERN)], Text]
    refs: list[TreeRef] = []


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
    refs: list[tuple[str, str, str]]
    """(name, kind, node id) of each tag and branch."""


class _Fail:
    """Errors of the checks past the models, naming their place (``nodes[3].parent_id``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, where: str, problem: str) -> TreeFileError:
        return TreeFileError(f"{self.name}: {where}: {problem}")


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


def _validated(document: Any, name: str) -> TreeFile:
    """The document as a :class:`TreeFile`: its format and version first (a newer
    file is named as such, not by the keys it may have added), then the models."""
    fail = _Fail(name)
    if not isinstance(document, dict):
        raise TreeFileError(f"{name}: a tree file is a JSON object, not {preview(document)}")
    if document.get("format") != FORMAT:
        raise fail("format", f"expected {FORMAT!r}, got {preview(document.get('format'))}")
    version = document.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise fail("version", f"expected {VERSION}, got {preview(version)}")
    if version > VERSION:
        raise fail("version", f"{version} is newer than this Clotho reads ({VERSION})")
    try:
        return TreeFile.model_validate(document)
    except ValidationError as error:
        raise TreeFileError(problem_line(error, name, model=TreeFile, patterns=PATTERNS)) from None


def _check(document: Any, name: str) -> _Plan:
    tree = _validated(document, name)
    fail = _Fail(name)
    session = tree.session
    schema = None
    if session.state_schema is not None:
        try:
            schema = schema_from_mapping(session.state_schema, source="session.state_schema")
        except MnemosyneError as error:
            raise TreeFileError(f"{name}: {error}") from None
    documents: list[tuple[str, str, str]] = []
    seen_documents: set[tuple[str, str]] = set()
    for i, item in enumerate(tree.documents):
        try:
            jsontext.loads(item.content, jsontext.DOCUMENT)
        except JsonTextError as error:
            raise fail(
                f"documents[{i}].content", f"not JSON text the store keeps ({error})"
            ) from error
        if (item.kind, item.name) in seen_documents:
            raise fail(f"documents[{i}]", f"a second {item.kind} named {item.name!r}")
        seen_documents.add((item.kind, item.name))
        documents.append((item.kind, item.name, item.content))
    records, index = _check_nodes(fail, tree.nodes)
    _check_head(fail, records, index, session.head_id)
    traces = _check_traces(fail, tree, index)
    refs = _check_refs(fail, tree.refs, index)
    return _Plan(
        session.id,
        session.title,
        session.campaign,
        session.metadata,
        schema,
        session.created_at,
        session.updated_at,
        session.head_id,
        documents,
        records,
        traces,
        tree.blobs,
        refs,
    )


def _check_refs(
    fail: _Fail, refs: list[TreeRef], index: dict[str, int]
) -> list[tuple[str, str, str]]:
    """Each name valid and once, on a node of the tree."""
    seen: dict[str, int] = {}
    for i, ref in enumerate(refs):
        try:
            check_ref_name(ref.name)
        except InvalidOperationError as error:
            raise fail(f"refs[{i}].name", str(error)) from None
        if ref.name in seen:
            raise fail(f"refs[{i}].name", f"{ref.name!r} is refs[{seen[ref.name]}] already")
        seen[ref.name] = i
        if ref.node_id not in index:
            raise fail(f"refs[{i}].node_id", f"unknown node {ref.node_id!r}")
    return [(ref.name, ref.kind, ref.node_id) for ref in refs]


def _check_nodes(fail: _Fail, nodes: list[TreeNode]) -> tuple[list[NodeRecord], dict[str, int]]:
    """The links between nodes: ids unique, parents before their children, detached
    tops without a parent, active children among the children."""
    index: dict[str, int] = {}
    for i, node in enumerate(nodes):
        node_id = node["id"]
        if node_id in index:
            raise fail(f"nodes[{i}].id", f"{node_id} is nodes[{index[node_id]}] already")
        index[node_id] = i
    records: list[NodeRecord] = []
    children: dict[str, list[str]] = {}
    for i, node in enumerate(nodes):
        parent = node["parent_id"]
        if parent is not None:
            if parent not in index:
                raise fail(f"nodes[{i}].parent_id", f"unknown node {parent!r}")
            if index[parent] >= i:
                raise fail(
                    f"nodes[{i}].parent_id",
                    f"node {parent!r} is nodes[{index[parent]}]: parents come before children",
                )
            children.setdefault(parent, []).append(node["id"])
        detached = node["detached"]
        place = source = at = state = None
        if detached is not None:
            if parent is not None:
                raise fail(f"nodes[{i}].detached", "a detached node has no parent_id")
            place, source, at, state = (
                detached["place"],
                detached["from"],
                detached["at"],
                detached["state"],
            )
            if source is not None and source not in index:
                raise fail(f"nodes[{i}].detached.from", f"unknown node {source!r}")
        records.append(
            NodeRecord(
                role=node["role"],
                content=node["content"],
                parent=parent,
                name=node["name"],
                enabled=node["enabled"],
                metadata=node["metadata"],
                delta=node["delta"],
                id=node["id"],
                created_at=node["created_at"],
                active_child=node["active_child_id"],
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
            raise fail(
                f"nodes[{i}].active_child_id",
                f"{record.active_child!r} is not a child of this node",
            )
    return records, index


def _check_head(
    fail: _Fail, records: list[NodeRecord], index: dict[str, int], head_id: str | None
) -> None:
    def top(i: int) -> NodeRecord:
        while records[i].parent is not None:
            i = index[str(records[i].parent)]
        return records[i]

    in_tree = any(r.parent is None and r.detached is None for r in records)
    if head_id is None:
        if in_tree:
            raise fail("session.head_id", "null, but the tree has nodes: name HEAD's node")
        return
    if head_id not in index:
        raise fail("session.head_id", f"unknown node {head_id!r}")
    if top(index[head_id]).detached is not None:
        raise fail("session.head_id", f"node {head_id!r} is not in the tree (it is detached)")
    # Active children left null, or off the path to HEAD, are set as the store keeps them
    # (a node's last child; along the path to HEAD) rather than refused.


def _check_traces(fail: _Fail, tree: TreeFile, index: dict[str, int]) -> list[StoredTrace]:
    """Each blob named by its text's hash; each trace a node's, its blobs there."""
    for digest, content in tree.blobs.items():
        if blob_hash(content) != digest:
            raise fail(
                f"blobs.{digest}", f"the text hashes to {blob_hash(content)}, not to its name"
            )
    stored = []
    for node_id, trace in tree.traces.items():
        where = f"traces.{node_id}"
        if node_id not in index:
            raise fail(where, "not a node of this tree")
        for n, part in enumerate(trace.parts):
            named = part.get("blob") if isinstance(part, dict) else None
            if isinstance(named, str) and named not in tree.blobs:
                raise fail(f"{where}.parts[{n}].blob", f"{named!r} is not in blobs")
        stored.append(StoredTrace(node_id, trace.parts, trace.messages_hash, trace.document))
    return stored


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
        [(name, kind, fresh[node_id]) for name, kind, node_id in plan.refs],
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
        tx.restore_names(plan.refs)  # no undo step: an import starts with no history

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
