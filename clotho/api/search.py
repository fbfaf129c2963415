"""Search every branch over HTTP (:meth:`mnemosyne.Store.search`).

- ``GET /api/search?q=...``: every live session (or ``session=``), newest first.
- ``GET /api/sessions/{session_id}/search?q=...``: one session's, with its version
  as ``ETag`` (304 for ``If-None-Match``): its hits change only when it does.

``q`` is a user's text, never search syntax; each hit says where it is (``on_trunk``:
on the path root -> HEAD) so that a client can jump to it or check it out. Filters:
``role``, ``trunk`` (the path root -> HEAD only), ``under`` (a node and its subtree;
needs the session), ``since`` / ``until`` (an ISO date, date and time, or an age such
as ``2d``), each refused with a 422 naming it when it cannot be used.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from mnemosyne import ForeignNodeError, NotFoundError, SearchHit, Store, UnknownNodeError
from mnemosyne._search import MAX_LIMIT, MAX_QUERY_LENGTH, is_age, parse_moment

from .deps import SessionDep, StoreDep, read_session
from .etags import ETAG_HEADER
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
    trunk: bool = Field(
        default=False, description="Only the path root -> HEAD (of each session searched)."
    )
    under: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Only this node and the nodes below it: a node name of the session "
        "(an id or prefix, `HEAD~2`, a tag); needs the session.",
    )
    since: str | None = Field(
        default=None,
        max_length=40,
        description="Only messages written from then on: an ISO date (`2026-11-20`), a date "
        "and time (`2026-11-20T18:30`, UTC unless a zone is named), or an age (`30m`, `12h`, "
        "`2d`, `1w`).",
    )
    until: str | None = Field(
        default=None,
        max_length=40,
        description="Only messages written before then, as `since` (a bare date counts its "
        "whole day).",
    )
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="At most this many.")

    @field_validator("since", "until")
    @classmethod
    def _a_moment(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None:  # refused here (422) when it is not one, or out of range
            parse_moment(value, end=info.field_name == "until", what=info.field_name)
        return value

    def moments(self) -> tuple[datetime | None, datetime | None]:
        """``since`` and ``until`` as moments (now, for ages)."""
        now = datetime.now(UTC)
        since = None if self.since is None else parse_moment(self.since, now=now)
        until = None if self.until is None else parse_moment(self.until, end=True, now=now)
        return since, until

    def run(self, store: Store, session_id: str | None) -> SearchOut:
        """The search these parameters ask for; a ``under`` naming no node of the session
        is a 422."""
        since, until = self.moments()
        try:
            hits = store.search(
                self.q,
                session_id=session_id,
                role=self.role,
                trunk=self.trunk,
                under=self.under,
                since=since,
                until=until,
                limit=self.limit,
            )
        except (UnknownNodeError, ForeignNodeError) as error:
            raise ApiError(422, "invalid_request", f"under: {error}") from error
        return _out(hits)


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
    if query.under is not None and query.session is None:
        raise ApiError(422, "invalid_request", "under: a node of a session: name the session")
    try:
        return query.run(store, query.session)
    except NotFoundError as error:  # an unknown session (run answers for the node)
        raise ApiError(422, "invalid_request", f"session: {error}") from error


#: The session's version as the answer's ETag, but only when no age is in the query.
_TAGGED_UNLESS_AGED = {
    200: {
        "headers": {
            "ETag": {
                **ETAG_HEADER,
                "description": f"{ETAG_HEADER['description']} Not sent when `since` or "
                "`until` is an age: that answer changes as time passes.",
            }
        }
    },
    304: {
        "description": "Not modified: the session is at the version `If-None-Match` named "
        "(never when `since` or `until` is an age).",
        "headers": {"ETag": ETAG_HEADER},
    },
}


@router.get(
    "/sessions/{session_id}/search",
    summary="Search a session",
    response_model=SearchOut,
    responses=_TAGGED_UNLESS_AGED,  # type: ignore[arg-type]
)
def search_session(
    request: Request,
    response: Response,
    session: SessionDep,
    store: StoreDep,
    query: Annotated[SessionSearchQuery, Query()],
) -> Any:
    """The messages of this session holding every word of `q`, over every branch,
    newest first (as `GET /api/search` with `session`). Tagged with the session's
    version (`ETag`, 304 for `If-None-Match`) unless `since` or `until` is an age,
    whose answer changes as time passes."""
    if not any(value is not None and is_age(value) for value in (query.since, query.until)):
        read_session(request, response, session)
    return query.run(store, session.id)
