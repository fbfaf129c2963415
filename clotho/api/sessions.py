"""Sessions: list, create, read, rename and set up, delete to the trash, restore, purge."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from clotho.sessionconfig import updated_metadata
from clotho.sessions import new_session
from mnemosyne import Store

from ._common import page_after
from .deps import IfMatch, NoParameters, ReadSession, SessionDep, StoreDep
from .idempotency import Outcome, answer, result
from .schemas import ListedSession, NewSession, SessionPatch, SessionsPage, SessionsQuery, WriteOut
from .stories import listed

router = APIRouter(tags=["sessions"])


def _sessions_page(
    request: Request, store: Store, query: SessionsQuery, *, trashed: bool, route: str
) -> dict[str, Any]:
    page = store.sessions_page(trashed=trashed, limit=query.limit, after=query.after)
    return {
        "sessions": [listed(s) for s in page.items],
        "total": page.total,
        "next": page_after(request, route, page.after, query.limit),
    }


@router.get("/sessions", summary="List the sessions, a page at a time", response_model=SessionsPage)
def list_sessions(
    request: Request, store: StoreDep, query: Annotated[SessionsQuery, Query()]
) -> Any:
    """The sessions not in the trash, most recently changed first (ties: newest first),
    `limit` of them after the cursor `after`; `next` reads the page after this one
    (null at the end). A session changed while a client pages moves to the first page:
    the pages after do not show it twice."""
    return _sessions_page(request, store, query, trashed=False, route="list_sessions")


@router.post("/sessions", summary="Create a session", status_code=201, response_model=WriteOut)
def create_session(response: Response, body: NewSession, store: StoreDep) -> WriteOut:
    """A new session; with `campaign` (a campaign folder on the server), it takes the
    campaign's state schema, card, lorebooks and title, and a card's greeting starts it
    (its alternate greetings as alternatives); else it is empty. (No `Idempotency-Key`: keys are
    kept per session.)"""
    campaign = Path(body.campaign) if body.campaign else None
    session = new_session(store, title=body.title, campaign=campaign)
    return answer(session, Outcome([result("create", None, session.head_id)]), response)


@router.get("/sessions/{session_id}", summary="Read a session", response_model=ListedSession)
def get_session(session: ReadSession, _: NoParameters) -> Any:
    """The session (id or unique prefix), as the list shows it (its character, its
    avatar); its ETag is its version."""
    return listed(session)


@router.patch(
    "/sessions/{session_id}",
    summary="Rename a session, change its settings",
    response_model=WriteOut,
)
def patch_session(
    response: Response, body: SessionPatch, session: SessionDep, store: StoreDep, version: IfMatch
) -> WriteOut:
    """Its `title`, and/or the fields given of its `settings` (the connection profile its
    turns use, the player's persona, the system prompt), kept in its metadata under
    `settings`; one write, the version bumped. The story and its world state are not
    touched."""
    changes: dict[str, Any] = {}
    if "title" in body.model_fields_set:
        changes["title"] = body.title
    if body.settings is not None:
        changes["metadata"] = updated_metadata(session.metadata, body.settings)
    expected = (
        version if version is not None else session.version
    )  # the metadata merged is that one's
    updated = store.update_session(session.id, expected_version=expected, **changes)
    return answer(updated, Outcome([result("update", None, updated.head_id)]), response)


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
    "/trash/sessions",
    summary="List the sessions in the trash, a page at a time",
    response_model=SessionsPage,
)
def trashed_sessions(
    request: Request, store: StoreDep, query: Annotated[SessionsQuery, Query()]
) -> Any:
    """Paged as `GET /api/sessions` is."""
    return _sessions_page(request, store, query, trashed=True, route="trashed_sessions")


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
