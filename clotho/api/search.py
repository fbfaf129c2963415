"""Search every branch over HTTP (:meth:`mnemosyne.Store.search`).

- ``GET /api/search?q=...``: every live session (or ``session=``), newest first.
- ``GET /api/sessions/{session_id}/search?q=...``: one session's, with its version
  as ``ETag`` (304 for ``If-None-Match``): its hits change only when it does.

``q`` is a user's text, never search syntax; each hit says where it is (``on_trunk``:
on the path root -> HEAD) so that a client can jump to it or check it out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from mnemosyne import NotFoundError, SearchHit
from mnemosyne._search import MAX_LIMIT, MAX_QUERY_LENGTH

from .deps import ReadSession, StoreDep
from .problems import ApiError

__all__ = ["SearchHitOut", "SearchOut", "SearchQuery", "SessionSearchQuery", "router"]

router = APIRouter(tags=["reading"])

DEFAULT_LIMIT = 50


class SessionSearchQuery(BaseModel):
    """A search of one session; any other parameter is refused (422)."""

    model_config = ConfigDict(extra="forbid")

    q: str = Field(
        min_length=1,
        max_length=MAX_QUERY_LENGTH,
        description="Words to find, every one (plain text: quotes, `*`, `NEAR`, `-` are "
        "text). SQLite finds them inside words too, PostgreSQL as whole words.",
    )
    role: Literal["system", "user", "assistant"] | None = Field(
        default=None, description="Only messages of this role."
    )
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="At most this many.")


class SearchQuery(SessionSearchQuery):
    """A search of every session, or of one; any other parameter is refused (422)."""

    session: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Only this session (an id or unique prefix); an unknown one is a 422.",
    )


class SearchHitOut(BaseModel):
    node_id: str
    session_id: str
    role: Literal["system", "user", "assistant"]
    name: str | None
    snippet: str = Field(description="The text around the first match (`…` where cut).")
    matches: list[tuple[int, int]] = Field(
        description="Where the words are in `snippet`: [start, end) offsets."
    )
    on_trunk: bool = Field(description="On the path root -> HEAD (else a side branch).")
    enabled: bool = Field(description="False: a disabled message (out of the projection).")
    created_at: datetime


class SearchOut(BaseModel):
    hits: list[SearchHitOut] = Field(description="Newest first.")


def _out(hits: list[SearchHit]) -> SearchOut:
    return SearchOut(hits=[SearchHitOut.model_validate(hit.as_dict()) for hit in hits])


@router.get("/search", summary="Search every session", response_model=SearchOut)
def search_all(store: StoreDep, query: Annotated[SearchQuery, Query()]) -> Any:
    """The messages holding every word of `q`, over every branch of every live session
    (or of `session`), newest first: disabled ones and pruned fragments too (marked);
    sessions and subtrees in the trash are not searched."""
    try:
        hits = store.search(query.q, session_id=query.session, role=query.role, limit=query.limit)
    except NotFoundError as error:
        raise ApiError(422, "invalid_request", f"session: {error}") from error
    return _out(hits)


@router.get("/sessions/{session_id}/search", summary="Search a session", response_model=SearchOut)
def search_session(
    session: ReadSession, store: StoreDep, query: Annotated[SessionSearchQuery, Query()]
) -> Any:
    """The messages of this session holding every word of `q`, over every branch,
    newest first (as `GET /api/search` with `session`)."""
    return _out(store.search(query.q, session_id=session.id, role=query.role, limit=query.limit))
