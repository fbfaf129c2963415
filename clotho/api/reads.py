"""Reading a session: its tree, projection, nodes, states, diffs, blame, traces,
journal, fragments and trash. Every response carries the session's version as ETag
and answers ``If-None-Match`` with 304."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from mnemosyne import Node, Session, TurnView

from ._common import context, document, json_bytes, raw_json
from .context import not_modified
from .problems import ApiError
from .schemas import (
    BlameOut,
    ChangesOut,
    JournalEntryOut,
    NodeDetail,
    NodeOut,
    ProjectionOut,
    StateOut,
    TreeOut,
)

router = APIRouter(tags=["reading"])

At = Annotated[
    str | None,
    Query(description="A node id or prefix (default: HEAD).", min_length=6, max_length=32),
]


@router.get("/sessions/{session_id}/tree", summary="The whole tree", response_model=TreeOut)
def tree(request: Request, session_id: str) -> Response:
    """HEAD and every node in the tree (fragments and trash are listed apart), parents
    before children, siblings in order."""
    store = context(request).store
    session = store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    found = store.tree(session.id)
    key = ("tree", found.session.id, found.session.version)
    return _rendered(request, found.session, key, lambda: json_bytes(found.as_dict()))


def _projection_node(turn: TurnView, metadata: bool) -> dict[str, Any]:
    node = turn.node
    out = {
        "id": node.id,
        "parent_id": node.parent_id,
        "role": node.role,
        "name": node.name,
        "content": node.content,
        "enabled": node.enabled,
        "created_at": node.created_at.isoformat(),
        "siblings": turn.siblings,
        "index": turn.index,
    }
    if metadata:
        out["metadata"] = node.metadata
    return out


@router.get(
    "/sessions/{session_id}/projection",
    summary="The story as the model sees it",
    response_model=ProjectionOut,
)
def projection(
    request: Request,
    session_id: str,
    tail: Annotated[
        int | None, Query(ge=1, le=1_000_000, description="Only the last N messages.")
    ] = None,
    metadata: Annotated[bool, Query(description="Include each node's metadata.")] = False,
    disabled: Annotated[
        bool,
        Query(description="Include the path's disabled nodes (hidden from the model)."),
    ] = False,
) -> Response:
    """The path root → HEAD, disabled nodes left out (unless `disabled=true`: a chat view
    shows them as hidden messages; `total` then counts them too); each message with its
    siblings (the alternatives a chat view flips through: `< index+1 / len(siblings) >`)."""
    ctx = context(request)
    session = ctx.store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    key = ("projection", session.id, session.version, tail, metadata, disabled)

    def render() -> bytes:
        current, turns = ctx.store.projection_turns(session.id, disabled=disabled)
        shown = turns[-tail:] if tail else turns
        return json_bytes(
            {
                "session_id": current.id,
                "head_id": current.head_id,
                "version": current.version,
                "total": len(turns),
                "nodes": [_projection_node(turn, metadata) for turn in shown],
            }
        )

    return _rendered(request, session, key, render)


def _rendered(request: Request, session: Session, key: Any, make: Callable[[], bytes]) -> Response:
    """The bytes of ``key`` (made by ``make`` once per key), remembered as the answer to
    this request at ``session``'s version (see :mod:`clotho.api.rendered`)."""
    rendered = context(request).rendered
    body = rendered.get(key, make)
    rendered.answered((request.scope["path"], request.scope["query_string"]), session, key)
    return raw_json(body, session)


def _detail(request: Request, session_id: str, ref: str) -> dict[str, Any]:
    store = context(request).store
    turn = store.turn(session_id, ref)
    children = store.children(session_id, turn.node.id)
    return {**turn.as_dict(), "children": [child.id for child in children]}


@router.get("/sessions/{session_id}/nodes/{node_id}", summary="One node", response_model=NodeDetail)
def node(request: Request, session_id: str, node_id: str) -> Response:
    """A node with its siblings (ids, in order), its place among them, and its children."""
    session = context(request).store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    return document(_detail(request, session.id, node_id), session)


@router.get(
    "/sessions/{session_id}/nodes/{node_id}/children",
    summary="A node's children",
    response_model=list[NodeOut],
)
def children(request: Request, session_id: str, node_id: str) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document([n.as_dict() for n in store.children(session.id, node_id)], session)


@router.get(
    "/sessions/{session_id}/nodes/{node_id}/trace",
    summary="A generated node's PromptTrace",
    responses={
        200: {
            "description": "The trace: `messages` (exactly what was sent, rebuilt), "
            "`verified`, `model`, `params`, `lore`, `planner`, `usage`, ..."
        }
    },
)
def trace(request: Request, session_id: str, node_id: str) -> Response:
    """What the model was sent for this node, with which settings and why; `verified`
    says whether the rebuilt messages hash to what was sent."""
    store = context(request).store
    session = store.session(session_id)
    found = store.trace(session.id, node_id)
    if found is None:
        raise ApiError(
            404, "no_trace", f"node {node_id} has no trace: it was not generated by a model"
        )
    return document(found.as_dict(), session)


@router.get("/sessions/{session_id}/state", summary="The world state", response_model=StateOut)
def state(request: Request, session_id: str, at: At = None) -> Response:
    """The world state after node `at` (default HEAD)."""
    store = context(request).store
    session = store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    node_id = store.node(session.id, at).id if at else session.head_id
    found = store.state(session.id, node_id)
    return document({"node_id": node_id, **found.as_dict()}, session)


@router.get(
    "/sessions/{session_id}/diff",
    summary="How the state differs between two nodes",
    responses={200: {"description": '`{"path": [value after a, value after b]}` per difference'}},
)
def diff(
    request: Request,
    session_id: str,
    a: Annotated[str, Query(min_length=6, max_length=32, description="A node id or prefix.")],
    b: Annotated[str, Query(min_length=6, max_length=32, description="A node id or prefix.")],
) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document(store.diff(session.id, a, b), session)


Path_ = Annotated[
    str, Query(min_length=1, max_length=200, description="A variable, such as hp or affinity.marla")
]


@router.get(
    "/sessions/{session_id}/blame",
    summary="Which node last changed a variable",
    response_model=BlameOut,
)
def blame(request: Request, session_id: str, path: Path_, at: At = None) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document(store.blame(session.id, path, at).as_dict(), session)


@router.get(
    "/sessions/{session_id}/changes",
    summary="A variable's history along the path",
    response_model=ChangesOut,
)
def changes(request: Request, session_id: str, path: Path_, at: At = None) -> Response:
    store = context(request).store
    session = store.session(session_id)
    start, found = store.changes(session.id, path, at)
    body = {"path": path, "start": start, "changes": [c.as_dict() for c in found]}
    return document(body, session)


@router.get(
    "/sessions/{session_id}/history",
    summary="The undo journal",
    response_model=list[JournalEntryOut],
)
def history(request: Request, session_id: str) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document([e.as_dict() for e in store.history(session.id)], session)


def _subtrees(found: list[list[Node]]) -> list[dict[str, Any]]:
    return [{"top": nodes[0].as_dict(), "size": len(nodes)} for nodes in found]


@router.get("/sessions/{session_id}/fragments", summary="Pruned subtrees, ready to graft")
def fragments(request: Request, session_id: str) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document(_subtrees(store.fragments(session.id)), session)


@router.get("/sessions/{session_id}/trash", summary="Deleted subtrees, restorable")
def trash(request: Request, session_id: str) -> Response:
    store = context(request).store
    session = store.session(session_id)
    return document(_subtrees(store.trash(session.id)), session)
