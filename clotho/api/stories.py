"""A new story from the page, and what its dialog picks from: the cards and lorebooks
already kept with sessions, a session's avatar, and what kind a file brought to
Import… is (:mod:`clotho.formats.kinds`, the one rule)."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator
from starlette.concurrency import run_in_threadpool

from clotho import lore, stories
from clotho.formats.kinds import ImportKind, import_kind
from clotho.formats.names import NAMES
from clotho.sessionconfig import Persona
from mnemosyne import NotFoundError, Session, Store
from planner.filekinds import file_kind

from ._common import read_body
from .deps import ContextDep, NoParameters, StoreDep
from .idempotency import Outcome, answer, result
from .schemas import ImportedOut, WriteOut

__all__ = [
    "MAX_BOOKS",
    "MAX_FILE_BYTES",
    "FileKindOut",
    "NewStory",
    "StoredBookOut",
    "StoredCardOut",
    "avatar_url",
    "listed",
    "router",
]

router = APIRouter(tags=["stories"])

MAX_FILE_BYTES = 16 * 1024 * 1024
"""A card or a lorebook sent in a new story's body (decoded); the body as a whole is
held to the server's upload limit too."""
MAX_BOOKS = 20
"""Lorebooks one new story may bring."""
AVATAR_MAX_AGE = 3600
"""How long a browser keeps a session's avatar without asking again (seconds)."""

FileName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=255)]
SessionRef = Annotated[str, StringConstraints(min_length=6, max_length=64)]


class UploadedFile(BaseModel):
    """A file sent in the body: its name and its bytes in base64."""

    model_config = ConfigDict(extra="forbid")

    filename: FileName
    data: Annotated[
        bytes,
        Field(description="The file's bytes, base64 (at most 16 MiB once decoded)."),
    ]

    @field_validator("data", mode="before")
    @classmethod
    def _decoded(cls, value: Any) -> bytes:
        if not isinstance(value, str):
            raise ValueError("the file's bytes as base64 text")
        if len(value) > (MAX_FILE_BYTES // 3 + 1) * 4:
            raise ValueError(f"the file is larger than {MAX_FILE_BYTES} bytes")
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("not base64") from None
        if not data:
            raise ValueError("the file is empty")
        return data


class StoredCard(BaseModel):
    """The card kept with another session (see `GET /api/cards`)."""

    model_config = ConfigDict(extra="forbid")

    session_id: SessionRef
    name: Annotated[str | None, StringConstraints(min_length=1, max_length=200)] = Field(
        default=None,
        description="A member of its cast (`GET .../cast`); default: its character, the "
        "first member.",
    )


class StoredBook(BaseModel):
    """A lorebook kept with another session (see `GET /api/lorebooks`)."""

    model_config = ConfigDict(extra="forbid")

    session_id: SessionRef
    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class NewStory(BaseModel):
    """A new story: its character card, persona, ready campaign and lorebooks."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "card": {"filename": "Seraphina.png", "data": "iVBORw0KGgo..."},
                    "persona": {"name": "Aria", "description": "A wandering bard."},
                    "campaign": "rpg",
                    "lorebooks": [{"session_id": "0193c2a1", "name": "Eldoria"}],
                }
            ]
        },
    )

    card: UploadedFile | StoredCard = Field(
        description="A card file (PNG or JSON), or the card of another session."
    )
    persona: Persona | None = Field(default=None, description="Who the player is.")
    campaign: stories.ReadyCampaign = Field(
        default="rpg",
        description="`rpg`: HP (0..max_hp), gold (>= 0) and an inventory; `none`: any "
        "variable, untyped.",
    )
    lorebooks: Annotated[list[UploadedFile | StoredBook], Field(max_length=MAX_BOOKS)] = Field(
        default_factory=list,
        description="World Info files, or books kept with other sessions.",
    )
    title: Annotated[str | None, Field(max_length=500)] = Field(
        default=None, description="Default: the character's name."
    )


class StoredCardOut(BaseModel):
    name: str = Field(description="The character's name.")
    session_id: str = Field(description="The session that keeps it (the newest one).")
    avatar_url: str | None = Field(
        description="Its picture, if it has one (the member's own: `GET .../cast/{name}/avatar`)."
    )


class StoredBookOut(BaseModel):
    name: str
    session_id: str = Field(description="The session that keeps it (the newest one).")
    entries: int


class FileKindOut(BaseModel):
    kind: ImportKind = Field(
        description="`card` and `lorebook`: ask whether to start a new story or add it to "
        "the current one; `chat`: `POST /api/imports/chat`; `tree`: `POST /api/imports/tree`."
    )
    name: str | None = Field(default=None, description="A card's character.")


def avatar_url(session_id: str) -> str:
    return f"/api/sessions/{session_id}/avatar"


def member_avatar_url(session_id: str, name: str) -> str:
    """The picture of the member ``name`` of a session's cast (its own, never another's)."""
    return f"/api/sessions/{session_id}/cast/{quote(name, safe='')}/avatar"


def listed(session: Session) -> dict[str, Any]:
    """A session as the lists show it (:class:`~clotho.api.schemas.ListedSession`): its
    character's name as the session was given it, and its avatar's URL when it has one,
    both from its metadata (a list reads no document)."""
    named = session.metadata.get(NAMES)
    character = named.get("character") if isinstance(named, dict) else None
    has_avatar = session.metadata.get(lore.AVATAR_KEY) is True
    return {
        **session.as_dict(),
        "character": character if isinstance(character, str) else None,
        "avatar_url": avatar_url(session.id) if has_avatar else None,
    }


@router.get(
    "/cards", summary="The character cards kept with sessions", response_model=list[StoredCardOut]
)
def stored_cards(store: StoreDep, _: NoParameters) -> Any:
    """One per character name (the session that changed last keeps it), for the new-story
    dialog's picker; the sessions in the trash are left out."""
    found: dict[str, dict[str, Any]] = {}
    for session in store.sessions():
        named = session.metadata.get(NAMES)
        hint = named.get("character") if isinstance(named, dict) else None
        if isinstance(hint, str) and hint in found:
            continue
        cards = store.documents(session.id, lore.CARD)
        if not cards or cards[0].name in found:  # its character: the cast's first member
            continue
        name = cards[0].name
        has_avatar = session.metadata.get(lore.AVATAR_KEY) is True
        found[name] = {
            "name": name,
            "session_id": session.id,
            # that member's own picture (a 404 if its metadata is behind), not the story's
            "avatar_url": member_avatar_url(session.id, name) if has_avatar else None,
        }
    return sorted(found.values(), key=lambda card: card["name"].casefold())


@router.get(
    "/lorebooks", summary="The lorebooks kept with sessions", response_model=list[StoredBookOut]
)
def stored_books(store: StoreDep, _: NoParameters) -> Any:
    """One per book (the same lore kept by several sessions is listed once, from the one
    that changed last); the sessions in the trash are left out."""
    from planner.lorebook import load_world_info

    found: dict[str, dict[str, Any]] = {}
    for session in store.sessions():
        for document in store.documents(session.id, lore.LOREBOOK):
            if document.hash in found:
                continue
            book = load_world_info(document.content, document.name)
            found[document.hash] = {
                "name": document.name,
                "session_id": session.id,
                "entries": len(book.entries),
            }
    return sorted(found.values(), key=lambda book: (book["name"].casefold(), book["session_id"]))


@router.get(
    "/sessions/{session_id}/avatar",
    summary="The session's avatar (its card's picture)",
    response_class=Response,
    responses={
        200: {
            "content": {"image/png": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The picture.",
        }
    },
)
def session_avatar(session_id: str, store: StoreDep) -> Response:
    """A PNG; 404 when the session has none. The browser keeps it for an hour
    (`Cache-Control`)."""
    session = store.session(session_id)
    found = stories.session_avatar(store, session.id)
    if found is None:
        raise NotFoundError(f"session {session.id} has no avatar")
    headers = {"Cache-Control": f"private, max-age={AVATAR_MAX_AGE}"}
    return Response(found.png, media_type="image/png", headers=headers)


@router.post(
    "/imports/kind",
    summary="What kind of file this is (for Import…)",
    response_model=FileKindOut,
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "The file as the body.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def file_kind_of(
    request: Request,
    filename: Annotated[str, Query(min_length=1, max_length=255)] = "file",
) -> Any:
    """Told by its content, never its name: a card (PNG or JSON), a World Info lorebook,
    a SillyTavern chat (JSON Lines) or a Clotho tree file; anything else is a 422 naming
    the kinds. A card is read whole (a broken one is refused here, with its reason), and
    its character named. Nothing is stored."""
    data = await read_body(request)

    def work() -> dict[str, Any]:
        kind = import_kind(data, filename)
        name = None
        if kind == "card":
            from planner.cards import load_card

            name = load_card(data, filename).name
        return {"kind": kind, "name": name}

    return await run_in_threadpool(work)


def _card(store: Store, given: UploadedFile | StoredCard) -> tuple[Any, bytes | None]:
    from clotho.lore import read_card

    if isinstance(given, StoredCard):
        return stories.stored_card(store, given.session_id, given.name)
    return read_card(given.data, given.filename)


def _book(store: Store, given: UploadedFile | StoredBook) -> Any:
    from planner.lorebook import load_world_info

    if isinstance(given, StoredBook):
        return stories.stored_book(store, given.session_id, given.name)
    if file_kind(given.data) == "card":
        raise stories.StoryError(
            f"{given.filename}: this is a character card, not a lorebook: give it as the card"
        )
    return load_world_info(given.data, given.filename.removesuffix(".json"))


@router.post(
    "/stories",
    summary="A new story from a character card",
    status_code=201,
    response_model=WriteOut,
)
async def create_story(response: Response, body: NewStory, ctx: ContextDep) -> WriteOut:
    """One transaction: the card (its own book a lorebook, its picture the session's
    avatar), the lorebooks (each lore once), the persona (`settings.persona`), the ready
    campaign's state schema, and the card's greeting as the first reply with its
    alternate greetings as swipes. A card or a book that cannot be read is a 422 naming
    it, and nothing is made. `imported`: the character, its card's spec and book."""
    store = ctx.store

    def work() -> WriteOut:
        card, picture = _card(store, body.card)
        books = [_book(store, given) for given in body.lorebooks]
        session, greetings = stories.new_story(
            store,
            card,
            picture=picture,
            books=books,
            persona=body.persona,
            campaign=body.campaign,
            title=body.title,
        )
        if ctx.settings.vectors:
            lore.lore_index(ctx.settings, lore.session_books(store, session.id))
        made = result(
            "create",
            None,
            session.head_id,
            head_moved=bool(greetings),
            created=[node.id for node in greetings],
            note=card.name,
        )
        imported = ImportedOut(
            kind="card",
            name=card.name,
            spec=card.spec,
            book=card.book.name if card.book else None,
            nodes=len(greetings),
            entries=len(card.book.entries) if card.book else 0,
        )
        return answer(session, Outcome([made], greetings, imported), response)

    return await run_in_threadpool(work)
