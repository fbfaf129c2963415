"""Sessions: list, create, read, delete to the trash, restore, purge."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request, Response

from clotho.sessions import new_session

from ._common import context, document
from .context import not_modified
from .deps import IfMatch, StoreDep
from .idempotency import Outcome, answer, result
from .schemas import NewSession, SessionOut, WriteOut

router = APIRouter(tags=["sessions"])


@router.get("/sessions", summary="List the sessions", response_model=list[SessionOut])
def list_sessions(request: Request) -> Response:
    """Every session not in the trash, most recently changed first."""
    return document([s.as_dict() for s in context(request).store.sessions()])


@router.post("/sessions", summary="Create a session", status_code=201, response_model=WriteOut)
def create_session(response: Response, body: NewSession, store: StoreDep) -> WriteOut:
    """An empty session; with `campaign` (a campaign folder on the server), it takes the
    campaign's state schema, card, lorebooks and title. (No `Idempotency-Key`: keys are
    kept per session.)"""
    campaign = Path(body.campaign) if body.campaign else None
    session = new_session(store, title=body.title, campaign=campaign)
    return answer(session, Outcome([result("create", None, session.head_id)]), response)


@router.get("/sessions/{session_id}", summary="Read a session", response_model=SessionOut)
def get_session(request: Request, session_id: str) -> Response:
    """The session (id or unique prefix); its ETag is its version."""
    session = context(request).store.session(session_id)
    return not_modified(request, session) or document(session.as_dict(), session)


@router.delete(
    "/sessions/{session_id}", summary="Move a session to the trash", response_model=WriteOut
)
def trash_session(
    response: Response, session_id: str, store: StoreDep, version: IfMatch
) -> WriteOut:
    """The session leaves the list and refuses changes; it stays whole and restorable
    (`POST /api/trash/sessions/{session_id}/restore`) until purged."""
    session = store.trash_session(session_id, expected_version=version)
    return answer(session, Outcome([result("trash", None, session.head_id)]), response)


@router.get(
    "/trash/sessions", summary="List the sessions in the trash", response_model=list[SessionOut]
)
def trashed_sessions(request: Request) -> Response:
    return document([s.as_dict() for s in context(request).store.sessions(trashed=True)])


@router.post(
    "/trash/sessions/{session_id}/restore",
    summary="Take a session out of the trash",
    response_model=WriteOut,
)
def restore_session(
    response: Response, session_id: str, store: StoreDep, version: IfMatch
) -> WriteOut:
    session = store.restore_session(session_id, expected_version=version)
    return answer(session, Outcome([result("restore", None, session.head_id)]), response)


@router.delete(
    "/trash/sessions/{session_id}",
    summary="Delete a session in the trash for good",
    status_code=204,
    response_class=Response,
)
def purge_session(session_id: str, store: StoreDep, version: IfMatch) -> Response:
    """Irreversible: the session, its nodes, traces and documents are gone (nothing is
    left to answer with: 204)."""
    store.purge_session(session_id, expected_version=version)
    return Response(status_code=204)
