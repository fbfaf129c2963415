"""Changing a session without a model: HEAD, swipes, messages, forks, the tree editor
(one or several operations in one request, atomically), undo and redo.

Every write takes ``If-Match: "<version>"``: if the session has moved on since that
version, the write is refused with 412 and the current version, and changes nothing.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ._common import context, document
from .context import expected_version
from .schemas import (
    AppendBody,
    EditsBody,
    EditsOut,
    ForkBody,
    HeadBody,
    NodeWrite,
    SwipeBody,
    TravelOut,
)

router = APIRouter(tags=["writing"])


@router.put("/sessions/{session_id}/head", summary="Move HEAD", response_model=NodeWrite)
def put_head(request: Request, session_id: str, body: HeadBody) -> Response:
    """Checkout: HEAD moves to the node (the state follows it)."""
    node, session = context(request).store.checkout(
        session_id, body.node_id, expected_version=expected_version(request)
    )
    return document({"node": node.as_dict(), "session": session.as_dict()}, session)


@router.post(
    "/sessions/{session_id}/swipe",
    summary="Switch to the next or previous alternative",
    response_model=NodeWrite,
)
def swipe(request: Request, session_id: str, body: SwipeBody) -> Response:
    """The next/previous sibling of `node_id` (default HEAD), then down to the leaf last
    visited there, which becomes HEAD."""
    node, session = context(request).store.switch_sibling(
        session_id, body.direction, body.node_id, expected_version=expected_version(request)
    )
    return document({"node": node.as_dict(), "session": session.as_dict()}, session)


@router.post(
    "/sessions/{session_id}/messages",
    summary="Add a message under HEAD (no model)",
    status_code=201,
    response_model=NodeWrite,
)
def append(request: Request, session_id: str, body: AppendBody) -> Response:
    node, session = context(request).store.append(
        session_id,
        body.role,
        body.content,
        name=body.name,
        delta=body.operations(),
        expected_version=expected_version(request),
    )
    return document({"node": node.as_dict(), "session": session.as_dict()}, session, 201)


@router.post(
    "/sessions/{session_id}/nodes/{node_id}/fork",
    summary="A new alternative of a node, with its own text (no model)",
    status_code=201,
    response_model=NodeWrite,
)
def fork(request: Request, session_id: str, node_id: str, body: ForkBody) -> Response:
    node, session = context(request).store.add_sibling(
        session_id,
        node_id,
        body.content,
        delta=body.operations(),
        expected_version=expected_version(request),
    )
    return document({"node": node.as_dict(), "session": session.as_dict()}, session, 201)


@router.post(
    "/sessions/{session_id}/edits",
    summary="Apply editor operations atomically",
    response_model=EditsOut,
)
def edits(request: Request, session_id: str, body: EditsBody) -> Response:
    """The operations run in order in one transaction: if one is refused, none happened
    (the problem names which one: `operation`, and `detail` starts `operations[i]`).
    They are one entry of the undo journal: one undo takes them all back."""
    results, session = context(request).store.edits(
        session_id, body.operations, expected_version=expected_version(request)
    )
    answer = {"results": [result.as_dict() for result in results], "session": session.as_dict()}
    return document(answer, session)


@router.post("/sessions/{session_id}/undo", summary="Undo the last edit", response_model=TravelOut)
def undo(request: Request, session_id: str) -> Response:
    result, session = context(request).store.undo(
        session_id, expected_version=expected_version(request)
    )
    return document({"result": result.as_dict(), "session": session.as_dict()}, session)


@router.post(
    "/sessions/{session_id}/redo", summary="Redo the last undone edit", response_model=TravelOut
)
def redo(request: Request, session_id: str) -> Response:
    result, session = context(request).store.redo(
        session_id, expected_version=expected_version(request)
    )
    return document({"result": result.as_dict(), "session": session.as_dict()}, session)


@router.delete(
    "/sessions/{session_id}/trash",
    summary="Empty the session's trash for good",
    responses={200: {"description": '`{"purged": <nodes deleted>, "session": ...}`'}},
)
def purge(request: Request, session_id: str) -> Response:
    """Irreversible; it also clears the undo journal."""
    count, session = context(request).store.purge(
        session_id, expected_version=expected_version(request)
    )
    return document({"purged": count, "session": session.as_dict()}, session)
