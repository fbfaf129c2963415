"""A session's cast over HTTP: its members (added from a card or written in place,
removed, muted, their talkativeness), the speaker order, members leaving and joining the
scene, their pictures, and who would answer a message (:mod:`clotho.cast`).

A member is named in the path by its name, percent-encoded (``/cast/Marla%20Voss``,
``/cast/AC%2FDC``: the server decodes ``%2F`` before routing, so the member routes take
the rest of the path, ``{name:path}``); its exact name, else the one name that matches it
ignoring case. A name no member has
is a 404. Every write takes ``If-Match`` (412 if the session has moved on) and answers
with the session's new version as ``ETag``; each is one transaction.
"""

from __future__ import annotations

from email.parser import BytesParser
from email.policy import HTTP
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from clotho.cast import (
    add_member,
    cast_view,
    remove_member,
    scene_change,
    session_cast,
    update_cast,
    update_member,
    written_card,
)
from clotho.lore import read_card
from clotho.stories import session_avatar
from mnemosyne import NotFoundError, Session, Store

from ._common import read_body
from .cast_schemas import (
    CastOut,
    CastPatch,
    MemberOut,
    MemberPatch,
    SceneChangeOut,
    SpeakersBody,
    SpeakersOut,
    WrittenMember,
)
from .deps import ContextDep, IfMatch, NoParameters, ReadSession, StoreDep
from .etags import ETAG_HEADER, etag
from .problems import ApiError
from .schemas import NodeOut
from .stories import AVATAR_MAX_AGE

if TYPE_CHECKING:
    from clotho.cast import SceneMove
    from planner.cards import Card

__all__ = ["router"]

router = APIRouter(tags=["cast"])

MemberPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        description="The member's name, percent-encoded (exact, else matched ignoring case).",
    ),
]
FileName = Annotated[
    str,
    Query(
        min_length=1,
        max_length=255,
        description="The card file's name, when the body is the file (a multipart part "
        "carries its own).",
    ),
]
#: A success that answers the session's new version as ETag.
TAGGED = {"headers": {"ETag": ETAG_HEADER}}


# -- reading --------------------------------------------------------------------------


def _member_view(store: Store, session: Session, name: str) -> dict[str, Any]:
    for member in cast_view(store, session)["members"]:
        if member["name"] == name:
            return member
    raise NotFoundError(f"{name} is no longer in the cast")  # removed meanwhile


def _member(store: Store, session_id: str, name: str) -> str:
    """The name of the member ``name`` names (an unknown one is a 404:
    :class:`clotho.cast.UnknownMemberError`)."""
    return session_cast(store, session_id).find(name).name


@router.get("/sessions/{session_id}/cast", summary="The cast", response_model=CastOut)
def get_cast(session: ReadSession, store: StoreDep, _: NoParameters) -> Any:
    """The members in the order they were added (the first is the session's character),
    each present or away at HEAD, muted or not, with its talkativeness, whether it has a
    picture, and its own books; the speaker order; the state's `present` at HEAD."""
    return cast_view(store, session)


@router.get(
    "/sessions/{session_id}/cast/{name:path}/avatar",
    summary="A member's picture",
    response_class=Response,
    responses={
        200: {
            "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The picture.",
        }
    },
)
def get_member_avatar(session_id: str, name: MemberPath, store: StoreDep) -> Response:
    """A PNG (its card's picture); 404 when the member has none. The browser keeps it for
    an hour (`Cache-Control`)."""
    session = store.session(session_id)
    found = _member(store, session.id, name)
    picture = session_avatar(store, session.id, found)
    if picture is None:
        raise NotFoundError(f"{found} has no picture")
    headers = {"Cache-Control": f"private, max-age={AVATAR_MAX_AGE}"}
    return Response(picture.png, media_type="image/png", headers=headers)


# -- members --------------------------------------------------------------------------


def _added(
    response: Response,
    store: Store,
    session_id: str,
    card: Card,
    picture: bytes | None,
    version: int | None,
) -> dict[str, Any]:
    member, session = add_member(store, session_id, card, avatar=picture, expected_version=version)
    response.headers["ETag"] = etag(session.version)
    return _member_view(store, session, member.name)


@router.post(
    "/sessions/{session_id}/cast",
    summary="Add a character written in place",
    status_code=201,
    response_model=MemberOut,
    responses={201: TAGGED},
)
def add_written(
    response: Response, session_id: str, body: WrittenMember, store: StoreDep, version: IfMatch
) -> Any:
    """A character from its name and fields, kept as a small card. A name the cast has
    already is a 422 (`cast`). While everyone is present it is too; once someone has come
    or gone, it is away until it joins."""
    card = written_card(body.name, body.description, body.personality, body.scenario)
    return _added(response, store, session_id, card, None, version)


_CARD_BODY = {
    "requestBody": {
        "required": True,
        "description": "The card (PNG or JSON): the body itself (`filename` in the query), "
        "or a `multipart/form-data` part named `file`.",
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"}},
                }
            },
        },
    }
}


def _form_file(content_type: str, body: bytes) -> tuple[bytes, str | None]:
    """The part named ``file`` of a ``multipart/form-data`` body, and its file name.

    Raises:
        ApiError: the body has no such part (422 ``invalid_request``).
    """
    head = f"Content-Type: {content_type}\r\n\r\n".encode("latin-1", "replace")
    message = BytesParser(policy=HTTP).parsebytes(head + body)
    if message.is_multipart():
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                data = part.get_payload(decode=True)
                if isinstance(data, bytes) and data:
                    return data, part.get_filename()
    raise ApiError(
        422,
        "invalid_request",
        "the form has no file: send the card as its part `file` (or as the body)",
        errors=[{"field": "body.file", "problem": "no file was sent"}],
    )


@router.post(
    "/sessions/{session_id}/cast/card",
    summary="Add a character from its card",
    status_code=201,
    response_model=MemberOut,
    responses={201: TAGGED},
    openapi_extra=_CARD_BODY,
)
async def add_card(
    request: Request,
    response: Response,
    session_id: str,
    ctx: ContextDep,
    version: IfMatch,
    filename: FileName = "card",
) -> Any:
    """A character card (V1/V2/V3, PNG or JSON), read as `POST .../imports/card` reads
    it: its book comes along as the member's own lore (kept once), a PNG's picture is
    its avatar. A name the cast has already is a 422 (`cast`); a file that is no card, a
    422 naming why. Its greeting is not played (the story has begun)."""
    body = await read_body(request)
    content_type = request.headers.get("content-type", "")

    def work() -> dict[str, Any]:  # in a thread: reading a large file blocks no one
        data, named = body, filename
        if content_type.lower().startswith("multipart/form-data"):
            data, given = _form_file(content_type, body)
            named = given or filename
        card, picture = read_card(data, named)
        added = _added(response, ctx.store, session_id, card, picture, version)
        if card.book is not None and ctx.settings.vectors:
            from clotho import lore

            lore.lore_index(ctx.settings, [card.book])
        return added

    return await run_in_threadpool(work)


@router.delete(
    "/sessions/{session_id}/cast/{name:path}",
    summary="Remove a member",
    response_model=CastOut,
    responses={200: TAGGED},
)
def remove(
    response: Response, session_id: str, name: MemberPath, store: StoreDep, version: IfMatch
) -> Any:
    """Its card and picture go; its book stays with the session's lore (switch it off in
    the lore manager), its messages stay in the story. Answers the cast after."""
    session = remove_member(store, session_id, name, expected_version=version)
    response.headers["ETag"] = etag(session.version)
    return cast_view(store, session)


@router.patch(
    "/sessions/{session_id}/cast/{name:path}",
    summary="Mute a member, set its talkativeness",
    response_model=MemberOut,
    responses={200: TAGGED},
)
def patch_member(
    response: Response,
    session_id: str,
    name: MemberPath,
    body: MemberPatch,
    store: StoreDep,
    version: IfMatch,
) -> Any:
    """Kept in the session's settings (`settings.cast`: `muted`, `talkativeness`), as
    `PATCH /api/sessions/{id}` would; the story is not touched. Fields left out, or
    given as they are, change nothing (the version stays)."""
    member, updated = update_member(
        store,
        session_id,
        name,
        muted=body.muted,
        talkativeness=body.talkativeness,
        expected_version=version,
    )
    response.headers["ETag"] = etag(updated.version)
    return _member_view(store, updated, member.name)


@router.patch(
    "/sessions/{session_id}/cast",
    summary="Set how the cast plays",
    response_model=CastOut,
    responses={200: TAGGED},
)
def patch_cast(
    response: Response, session_id: str, body: CastPatch, store: StoreDep, version: IfMatch
) -> Any:
    """The speaker order, and whether a member back from away is told what it missed
    (`recap_missed`: a recap in each gap of its prompt, a call to the summary model).
    Kept in the session's settings (`settings.cast`); fields left out, or given as they
    are, change nothing (the version stays)."""
    updated = update_cast(
        store,
        session_id,
        order=body.order,
        recap_missed=body.recap_missed,
        expected_version=version,
    )
    response.headers["ETag"] = etag(updated.version)
    return cast_view(store, updated)


# -- the scene ------------------------------------------------------------------------


def _scene(
    response: Response,
    store: Store,
    session_id: str,
    name: str,
    move: SceneMove,
    version: int | None,
) -> dict[str, Any]:
    node, session = scene_change(store, session_id, name, move, expected_version=version)
    response.headers["ETag"] = etag(session.version)
    return {"node": NodeOut.model_validate(node.as_dict()), "cast": cast_view(store, session)}


@router.post(
    "/sessions/{session_id}/cast/{name:path}/leave",
    summary="A member leaves the scene",
    status_code=201,
    response_model=SceneChangeOut,
    responses={201: TAGGED},
)
def leave(
    response: Response, session_id: str, name: MemberPath, store: StoreDep, version: IfMatch
) -> Any:
    """A narration node under HEAD (`Bram leaves the scene.`, role `system`, its metadata
    `{"scene": {"leaves": "Bram"}}`), HEAD on it; the state's `present` loses the member.
    One step of the undo journal (`leave`): undo, a checkout or a reroll before it brings
    the cast back as it was. It sees nothing of the story until it joins. Leaving while
    away is a 422 (`cast`)."""
    return _scene(response, store, session_id, name, "leaves", version)


@router.post(
    "/sessions/{session_id}/cast/{name:path}/join",
    summary="A member joins the scene",
    status_code=201,
    response_model=SceneChangeOut,
    responses={201: TAGGED},
)
def join(
    response: Response, session_id: str, name: MemberPath, store: StoreDep, version: IfMatch
) -> Any:
    """A narration node under HEAD (`Bram joins the scene.`, metadata `{"scene":
    {"joins": "Bram"}}`), HEAD on it; the state's `present` gains the member. One step
    of the undo journal (`join`). Joining while present is a 422 (`cast`)."""
    return _scene(response, store, session_id, name, "joins", version)


# -- who speaks -----------------------------------------------------------------------


@router.post(
    "/sessions/{session_id}/speakers",
    summary="Who would answer a message",
    response_model=SpeakersOut,
    responses={503: {"description": "No model is configured to play the session's turns."}},
)
async def speakers(session_id: str, ctx: ContextDep, body: SpeakersBody) -> Any:
    """Who would answer the player's message `text` at HEAD (`{}`: who speaks next with
    no message), in order, by the session's speaker order: only members present
    and not muted (none: an empty list); a session of one character, always that one;
    the narrator order, `Narrator`. Play one turn per name: the first a `say` with its
    `speaker`, each next a `reply` with its `speaker`. Nothing is stored (a POST only
    as the message is a body: it may be longer than a URL may be)."""
    session = await run_in_threadpool(ctx.store.session, session_id)
    engine = await ctx.engine(session.id)  # the session's, as its turns get it
    names = await run_in_threadpool(engine.next_speakers, session.id, body.text)
    return {"speakers": names}
