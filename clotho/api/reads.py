"""Reading a session: its tree, projection, nodes, states, diffs, blame, traces,
journal, fragments and trash. Every response carries the session's version as ETag
and answers ``If-None-Match`` with 304."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request, Response

from mnemosyne import Node, TurnView

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
    ProjectionQuery,
    StateOut,
    TreeOut,
)

router = APIRouter(tags=["reading"])

At = Annotated[
    str | None,
    Query(
        alias="node_id",
        description="A node id or prefix (default: HEAD).",
        min_length=6,
        max_length=32,
    ),
]
FROM = "A node id or prefix: the state compared from."
TO = "A node id or prefix: the state compared to."


@router.get("/sessions/{session_id}/tree", summary="The whole tree", response_model=TreeOut)
def tree(request: Request, session_id: str) -> Response:
    """HEAD and every node in the tree (fragments and trash are listed apart), parents
    before children, siblings in order."""
    store = context(request).store
    session = store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    found = store.tree(session.id)
    return raw_json(json_bytes(found.as_dict()), found.session)


def _projection_node(turn: TurnView, metadata: bool) -> dict[str, Any]:
    node = turn.node
    out: dict[str, Any] = {
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
    summary="The story as the model sees it, a window at a time",
    response_model=ProjectionOut,
)
def projection(
    request: Request, session_id: str, query: Annotated[ProjectionQuery, Query()]
) -> Response:
    """The last `limit` messages of the path root → HEAD, or the `limit` just before node
    `before`; `next` reads the window before this one. Disabled nodes are left out
    (unless `disabled=true`: a chat view shows them as hidden messages; `total` and
    `earlier` then count them too). Each message comes with its siblings (the
    alternatives a chat view flips through: `< index+1 / len(siblings) >`). A window
    costs what its messages cost, however long the story."""
    store = context(request).store
    session = store.session(session_id)
    if (cached := not_modified(request, session)) is not None:
        return cached
    page = store.projection_page(
        session.id, before=query.before, limit=query.limit, disabled=query.disabled
    )
    following = None
    if page.earlier and page.turns:
        params: dict[str, Any] = {"before": page.turns[0].node.id, "limit": query.limit}
        params.update({name: "true" for name in ("metadata", "disabled") if getattr(query, name)})
        where = request.app.url_path_for("projection", session_id=page.session.id)
        following = f"{where}?{urlencode(params)}"
    body = {
        "session_id": page.session.id,
        "head_id": page.session.head_id,
        "version": page.session.version,
        "total": page.total,
        "earlier": page.earlier,
        "next": following,
        "nodes": [_projection_node(turn, query.metadata) for turn in page.turns],
    }
    return raw_json(json_bytes(body), page.session)


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
    a: Annotated[str, Query(alias="from_id", min_length=6, max_length=32, description=FROM)],
    b: Annotated[str, Query(alias="to_id", min_length=6, max_length=32, description=TO)],
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
