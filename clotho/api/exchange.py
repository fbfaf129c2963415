"""Files in and out: SillyTavern chats, lorebooks and cards in; chats, the story (as
Markdown or one HTML page) and lossless tree files out (tree files in too); a lorebook's
own export and the rest of the lore are in :mod:`.lorebooks`. An upload is the
request's body (no multipart), limited in size (``CLOTHO_MAX_UPLOAD_BYTES``); every
import is one transaction."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from clotho import lore
from clotho.formats.stchat import export_chat, import_chat
from clotho.formats.story import StoryFormat
from clotho.formats.treefile import TreeFile, export_tree
from clotho.sessions import session_names
from clotho.stories import session_book
from mnemosyne import Node, Session, Store
from planner.cards import Card

from ._common import attachment, json_chunks, line_chunks, read_body
from .deps import ContextDep, IfMatch, ReadSession, StoreDep
from .etags import etag
from .idempotency import Outcome, answer, result
from .schemas import ImportedOut, NodeId, WriteOut
from .worker import (
    import_card_at,
    import_chat_at,
    import_lorebook_at,
    import_tree_at,
    importing,
)

__all__ = ["router"]

router = APIRouter(tags=["exchange"])

FileName = Annotated[
    str, Query(min_length=1, max_length=255, description="The file's name (names the book).")
]


def _body_doc(media: str, description: str) -> dict[str, object]:
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {media: {"schema": {"type": "string", "format": "binary"}}},
        }
    }


@router.post(
    "/imports/chat",
    summary="A new session from a SillyTavern chat",
    status_code=201,
    response_model=WriteOut,
    openapi_extra=_body_doc("application/jsonl", "The chat file (.jsonl) as the body."),
)
async def import_chat_file(
    request: Request,
    response: Response,
    store: StoreDep,
    filename: Annotated[str, Query(min_length=1, max_length=255)] = "chat.jsonl",
    title: Annotated[str | None, Query(max_length=500)] = None,
) -> WriteOut:
    """Swipes become alternatives (siblings), hidden messages disabled nodes; every field
    is kept, so exporting it unchanged gives the same file back. A group chat may have
    no header line; an empty file is an empty chat (`imported.nodes` 0). `imported.nodes`:
    how many nodes it made."""
    data = await read_body(request)

    def inline() -> str:
        return import_chat(store, data, filename, title=title).id

    session_id = await importing(store, data, inline, import_chat_at, filename, title)
    return await run_in_threadpool(_imported_session, store, session_id, "chat", response)


def _imported_session(store: Store, session_id: str, kind: str, response: Response) -> WriteOut:
    """The answer of an import that made a session: `imported.nodes` counts its tree."""
    session = store.session(session_id)
    count = len(store.tree(session.id).nodes)
    made = result("import", None, session.head_id, head_moved=True, count=count)
    imported = ImportedOut.model_validate({"kind": kind, "nodes": count})
    return answer(session, Outcome([made], imported=imported), response)


@router.get(
    "/sessions/{session_id}/exports/chat",
    summary="A branch as a SillyTavern chat",
    responses={200: {"content": {"application/jsonl": {}}, "description": "The chat file."}},
)
def export_chat_file(
    store: StoreDep,
    session: ReadSession,
    head_id: Annotated[
        NodeId | None, Query(description="The branch's last node. Default: HEAD.")
    ] = None,
) -> Response:
    """The path to `head_id` with each fork's alternatives as swipes, a message with no
    name of its own named by the session's names (its campaign's player, its card's
    character). An imported chat comes back as it came: its header (a group chat may
    have none), line endings and final newline. `X-Clotho-Dropped` counts the nodes
    below other alternatives, which the format cannot hold."""
    exported = export_chat(store, session.id, head_id, names=session_names(store, session.id))
    return StreamingResponse(
        line_chunks(exported.lines, newline=exported.newline, final=exported.final_newline),
        media_type="application/jsonl",
        headers={
            "ETag": etag(session.version),
            "X-Clotho-Messages": str(exported.messages),
            "X-Clotho-Dropped": str(exported.dropped),
            "Content-Disposition": attachment(session.title or session.id[:8], "jsonl"),
        },
    )


#: The media type of each format of the story as a book.
STORY_MEDIA = {"md": "text/markdown; charset=utf-8", "html": "text/html; charset=utf-8"}


@router.get(
    "/sessions/{session_id}/exports/story",
    summary="A branch as a book (Markdown or one HTML page)",
    responses={
        200: {
            "content": {
                "text/markdown": {"schema": {"type": "string"}},
                "text/html": {"schema": {"type": "string"}},
            },
            "description": "The book, as a download.",
        }
    },
)
def export_story_file(
    store: StoreDep,
    session: ReadSession,
    format: Annotated[StoryFormat, Query(description="md or html.")] = "md",
    head_id: Annotated[
        NodeId | None, Query(description="The branch's last node. Default: HEAD.")
    ] = None,
    state_every: Annotated[
        int, Query(ge=0, le=100_000, description="A note of what changed every N messages.")
    ] = 0,
    state_at: Annotated[
        list[NodeId] | None,
        Query(max_length=1000, description="Nodes after which a note says what changed."),
    ] = None,
    pictures: Annotated[
        bool, Query(description="The cast's pictures beside their names (html), inline.")
    ] = False,
) -> Response:
    """The path root -> `head_id` as a book: each message under its speaker's name (the
    session's names for a message with none), roleplay formatting kept, scene changes as
    narration lines, hidden messages left out. `html` is one self-contained page (inline
    CSS, no script, no external URL; every text escaped). A node of `state_at` not on
    the branch is `invalid_story_export`. `pictures=true`: the cast's pictures beside
    their names in the HTML page (inline `data:` images; Markdown has none).
    `X-Clotho-Messages` counts the messages told."""
    book = session_book(
        store,
        session.id,
        head_id,
        format,
        state_every=state_every,
        state_at=state_at or (),
        pictures=pictures,
    )
    return Response(
        book.render(format),
        media_type=STORY_MEDIA[format],
        headers={
            "ETag": etag(session.version),
            "X-Clotho-Messages": str(book.messages),
            "Content-Disposition": attachment(session.title or session.id[:8], format),
        },
    )


@router.post(
    "/imports/tree",
    summary="A session from a Clotho tree file",
    status_code=201,
    response_model=WriteOut,
    openapi_extra=_body_doc("application/json", "The tree file (JSON) as the body."),
)
async def import_tree_file(
    request: Request,
    response: Response,
    store: StoreDep,
    filename: Annotated[str, Query(min_length=1, max_length=255)] = "tree.json",
    new_ids: Annotated[
        bool, Query(description="Give the session and its nodes fresh ids (a copy).")
    ] = False,
) -> WriteOut:
    """The session as it was exported, HEAD, fragments and trash included.
    `imported.nodes`: how many nodes its tree has."""
    from clotho.formats.treefile import import_tree

    data = await read_body(request)

    def inline() -> str:
        return import_tree(store, data, filename, new_ids=new_ids).id

    session_id = await importing(store, data, inline, import_tree_at, filename, new_ids)
    return await run_in_threadpool(_imported_session, store, session_id, "tree", response)


@router.get(
    "/sessions/{session_id}/exports/tree",
    summary="The whole session, lossless",
    response_model=TreeFile,
)
def export_tree_file(store: StoreDep, session: ReadSession) -> Response:
    """Every node (fragments and trash too), deltas, traces, documents and HEAD, as one
    versioned JSON document that `POST /api/imports/tree` takes back. Read in one
    snapshot, then sent as it is encoded (a large tree is never one string whole)."""
    return StreamingResponse(
        json_chunks(export_tree(store, session.id)),
        media_type="application/json",
        headers={"ETag": etag(session.version)},
    )


@router.post(
    "/sessions/{session_id}/imports/lorebook",
    summary="Add a World Info lorebook",
    response_model=WriteOut,
    openapi_extra=_body_doc("application/json", "The World Info file as the body."),
)
async def import_lorebook_file(
    request: Request,
    response: Response,
    session_id: str,
    name: FileName,
    ctx: ContextDep,
    expected: IfMatch,
) -> WriteOut:
    """The same lore twice (the same book, or a card's own book) is kept once
    (`imported.same_as` names the book that holds it, nothing is added); a different book
    of a taken name is kept as "Name (2)" (`imported.renamed_from`). `imported`: the book,
    its entries and how many are enabled."""
    data = await read_body(request)

    book_name = name.removesuffix(".json")

    def inline() -> tuple[lore.KeptBook, Session]:
        return lore.import_lorebook(
            ctx.store, session_id, data, book_name, expected_version=expected
        )

    kept, session = await importing(
        ctx.store, data, inline, import_lorebook_at, session_id, book_name, expected
    )

    def work() -> WriteOut:
        book = kept.book
        if ctx.settings.vectors and kept.same_as is None:
            lore.lore_index(ctx.settings, [book])
        enabled = sum(1 for entry in book.entries if not entry.disable)
        entries = len(book.entries)
        imported = ImportedOut(
            kind="lorebook",
            name=book.name,
            book=book.name,
            entries=entries,
            enabled=enabled,
            same_as=kept.same_as,
            renamed_from=kept.asked if kept.renamed else None,
        )
        note = kept.note() or book.name
        made = result("import", None, session.head_id, count=entries, note=note)
        return answer(session, Outcome([made], imported=imported), response)

    return await run_in_threadpool(work)


@router.post(
    "/sessions/{session_id}/imports/card",
    summary="Make a character card the session's character",
    response_model=WriteOut,
    openapi_extra=_body_doc("application/octet-stream", "The card (PNG or JSON) as the body."),
)
async def import_card_file(
    request: Request,
    response: Response,
    session_id: str,
    filename: FileName,
    ctx: ContextDep,
    expected: IfMatch,
) -> WriteOut:
    """V1/V2/V3, PNG or JSON; its lorebook comes along, and an empty session starts with
    its greeting (alternate greetings as alternatives). `nodes`: the greetings;
    `imported`: the character's name, the card's spec, its book and entries."""
    data = await read_body(request)

    def inline() -> tuple[Card, list[Node], Session]:
        return lore.import_card(ctx.store, session_id, data, filename, expected_version=expected)

    card, greetings, session = await importing(
        ctx.store, data, inline, import_card_at, session_id, filename, expected
    )

    def work() -> WriteOut:
        if card.book is not None and ctx.settings.vectors:
            lore.lore_index(ctx.settings, [card.book])
        book = card.book
        entries = len(book.entries) if book else 0
        imported = ImportedOut(
            kind="card",
            name=card.name,
            spec=card.spec,
            book=book.name if book else None,
            nodes=len(greetings),
            entries=entries,
            enabled=sum(1 for entry in book.entries if not entry.disable) if book else 0,
        )
        made = result(
            "import",
            None,
            session.head_id,
            head_moved=bool(greetings),
            created=[node.id for node in greetings],
            count=entries,
            note=card.name,
        )
        return answer(session, Outcome([made], greetings, imported), response)

    return await run_in_threadpool(work)
