"""Reading a session: its tree, projection, nodes, states, diffs, blame, traces,
journal, fragments and trash. Every response carries the session's version as ETag
and answers ``If-None-Match`` with 304."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request, Response

from mnemosyne import Node, NodeAmongSiblings, StateSchema

from ._common import json_bytes, next_page, page_after, raw_json, tagged
from .deps import NoParameters, ReadSession, StoreDep
from .problems import ApiError
from .schemas import (
    BlameOut,
    ChangesOut,
    DiffOut,
    DiffQuery,
    HistoryPage,
    HistoryQuery,
    NodeDetail,
    NodeOut,
    ProjectionOut,
    ProjectionQuery,
    StateOut,
    StateQuery,
    SubtreeOut,
    TraceOut,
    TreeOut,
    TreeQuery,
    VariableQuery,
)

router = APIRouter(tags=["reading"])


@router.get(
    "/sessions/{session_id}/tree",
    summary="The tree, a page at a time",
    response_model=TreeOut,
)
def tree(
    request: Request,
    response: Response,
    session: ReadSession,
    store: StoreDep,
    query: Annotated[TreeQuery, Query()],
) -> Any:
    """HEAD and the nodes of the tree (fragments and trash are listed apart), parents
    before children, depth first, siblings in order: `limit` of them after node `after`;
    `next` reads the page after this one (null at the end). A node of `after` pruned,
    deleted or purged since is a 422 `stale_cursor`: read again from the start (the
    version, also the ETag, says whether the tree changed between two pages)."""
    page = store.tree_page(session.id, limit=query.limit, after=query.after)
    assert page.session is not None
    following = page_after(request, "tree", page.after, query.limit, session_id=page.session.id)
    tagged(response, page.session)
    return {
        "session_id": page.session.id,
        "head_id": page.session.head_id,
        "version": page.session.version,
        "total": page.total,
        "next": following,
        "nodes": [n.as_dict() for n in page.items],
    }


def _projection_node(turn: NodeAmongSiblings, metadata: bool, raw: bool) -> dict[str, Any]:
    """A message of the projection as the route answers it; ``raw``: its metadata as the
    stored JSON text, written into the answer as it is (orjson's Fragment)."""
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
        out["metadata"] = orjson.Fragment(node.metadata_json) if raw else node.metadata
    return out


@router.get(
    "/sessions/{session_id}/projection",
    summary="The story as the model sees it, a window at a time",
    response_model=ProjectionOut,
)
def projection(
    request: Request,
    session: ReadSession,
    store: StoreDep,
    query: Annotated[ProjectionQuery, Query()],
) -> Response:
    """The last `limit` messages of the path root → HEAD, or the `limit` just before node
    `before`; `next` reads the window before this one. Disabled nodes are left out
    (unless `disabled=true`: a chat view shows them as hidden messages; `total` and
    `earlier` then count them too). Each message comes with its siblings (the
    alternatives a chat view flips through: `< index+1 / len(siblings) >`). A window
    costs what its messages cost, however long the story."""
    # (Written as bytes, not checked against ProjectionOut: the page's hottest read.)
    page = store.projection_page(
        session.id, before=query.before, limit=query.limit, disabled=query.disabled
    )
    following = None
    if page.earlier and page.turns:
        params: dict[str, Any] = {"before": page.turns[0].node.id, "limit": query.limit}
        params.update({name: "true" for name in ("metadata", "disabled") if getattr(query, name)})
        following = next_page(request, "projection", params, session_id=page.session.id)

    def body(raw: bool) -> dict[str, Any]:
        return {
            "session_id": page.session.id,
            "head_id": page.session.head_id,
            "version": page.session.version,
            "total": page.total,
            "earlier": page.earlier,
            "next": following,
            "nodes": [_projection_node(turn, query.metadata, raw) for turn in page.turns],
        }

    try:  # the metadata passed on as stored (most of a window's bytes in a long import)
        encoded = orjson.dumps(body(raw=True))
    except orjson.JSONEncodeError:  # what orjson refuses, json_bytes writes
        encoded = json_bytes(body(raw=False))
    return raw_json(encoded, page.session)


@router.get("/sessions/{session_id}/nodes/{node_id}", summary="One node", response_model=NodeDetail)
def node(
    session: ReadSession,
    store: StoreDep,
    node_id: str,
    _: NoParameters,
) -> Any:
    """A node with its siblings (ids, in order), its place among them, and its children."""
    turn = store.turn(session.id, node_id)
    children = store.children(session.id, turn.node.id)
    return {**turn.as_dict(), "children": [child.id for child in children]}


@router.get(
    "/sessions/{session_id}/nodes/{node_id}/children",
    summary="A node's children",
    response_model=list[NodeOut],
)
def children(
    session: ReadSession,
    store: StoreDep,
    node_id: str,
    _: NoParameters,
) -> Any:
    return [n.as_dict() for n in store.children(session.id, node_id)]


@router.get(
    "/sessions/{session_id}/nodes/{node_id}/trace",
    summary="A generated node's PromptTrace",
    response_model=TraceOut,
)
def trace(
    session: ReadSession,
    store: StoreDep,
    node_id: str,
    _: NoParameters,
) -> Any:
    """What the model was sent for this node, with which settings and why; `verified`
    says whether the rebuilt messages hash to what was sent. A node not generated by a
    model has none: 404 `no_trace`."""
    found = store.trace(session.id, node_id)
    if found is None:
        raise ApiError(
            404, "no_trace", f"node {node_id} has no trace: it was not generated by a model"
        )
    return found.as_dict()


@router.get("/sessions/{session_id}/state", summary="The world state", response_model=StateOut)
def state(
    session: ReadSession,
    store: StoreDep,
    query: Annotated[StateQuery, Query()],
) -> Any:
    """The world state after node `node_id` (default HEAD), and what the session's schema
    declares of each variable (`declared`: type, bounds as numbers at this state)."""
    at = query.node_id
    node_id = store.node(session.id, at).id if at else session.head_id
    found = store.state(session.id, node_id)
    declared = _declared(store.schema(session.id), found.variables)
    return {"node_id": node_id, **found.as_dict(), "declared": declared}


def _declared(schema: StateSchema, variables: dict[str, Any]) -> dict[str, Any]:
    """The schema's variables with their bounds as numbers in a state (a bound named after
    another variable is that variable's value there; ``None`` if it holds no number)."""

    def number(bound: Any) -> Any:
        if isinstance(bound, str):
            bound = variables.get(bound)
        return bound if isinstance(bound, (int, float)) and not isinstance(bound, bool) else None

    return {
        name: {
            "type": spec.type,
            "min": number(spec.min),
            "max": number(spec.max),
            "choices": spec.choices,
            "description": spec.description,
        }
        for name, spec in schema.variables.items()
    }


@router.get(
    "/sessions/{session_id}/diff",
    summary="How the state differs between two nodes",
    response_model=DiffOut,
)
def diff(
    session: ReadSession,
    store: StoreDep,
    query: Annotated[DiffQuery, Query()],
) -> Any:
    """`{"path": [value after from_id, value after to_id]}` for each variable that
    differs."""
    return store.diff(session.id, query.from_id, query.to_id)


@router.get(
    "/sessions/{session_id}/blame",
    summary="Which node last changed a variable",
    response_model=BlameOut,
)
def blame(
    session: ReadSession,
    store: StoreDep,
    query: Annotated[VariableQuery, Query()],
) -> Any:
    """The node on the path to `node_id` (default HEAD) that last changed `path`."""
    return store.blame(session.id, query.path, query.node_id).as_dict()


@router.get(
    "/sessions/{session_id}/changes",
    summary="A variable's history along the path",
    response_model=ChangesOut,
)
def changes(
    session: ReadSession,
    store: StoreDep,
    query: Annotated[VariableQuery, Query()],
) -> Any:
    """`path`'s value at the root (`start`), then each change along the path to
    `node_id` (default HEAD)."""
    start, found = store.changes(session.id, query.path, query.node_id)
    return {"path": query.path, "start": start, "changes": [c.as_dict() for c in found]}


@router.get(
    "/sessions/{session_id}/history",
    summary="The undo journal, a page at a time",
    response_model=HistoryPage,
)
def history(
    request: Request,
    response: Response,
    session: ReadSession,
    store: StoreDep,
    query: Annotated[HistoryQuery, Query()],
) -> Any:
    """The journal's entries oldest first (`current`: the last one applied; `undone`:
    redoable), `limit` of them after the entry at position `after`; `next` reads the
    page after this one (null at the end). An `after` whose entry is gone (a turn or a
    purge clears the journal) is a 422 `stale_cursor`."""
    after = None if query.after is None else str(query.after)
    page = store.history_page(session.id, limit=query.limit, after=after)
    assert page.session is not None
    following = page_after(request, "history", page.after, query.limit, session_id=page.session.id)
    tagged(response, page.session)
    return {
        "session_id": page.session.id,
        "version": page.session.version,
        "total": page.total,
        "next": following,
        "entries": [e.as_dict() for e in page.items],
    }


def _subtrees(found: list[list[Node]]) -> list[dict[str, Any]]:
    return [{"top": nodes[0].as_dict(), "size": len(nodes)} for nodes in found]


@router.get(
    "/sessions/{session_id}/fragments",
    summary="Pruned subtrees, ready to graft",
    response_model=list[SubtreeOut],
)
def fragments(session: ReadSession, store: StoreDep, _: NoParameters) -> Any:
    return _subtrees(store.fragments(session.id))


@router.get(
    "/sessions/{session_id}/trash",
    summary="Deleted subtrees, restorable",
    response_model=list[SubtreeOut],
)
def trash(session: ReadSession, store: StoreDep, _: NoParameters) -> Any:
    return _subtrees(store.trash(session.id))
