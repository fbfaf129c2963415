"""Files in and out: SillyTavern chats, lorebooks and cards in; chats and lossless tree
files out (and in). An upload is the request's body (no multipart), limited in size
(``CLOTHO_MAX_UPLOAD_BYTES``); every import is one transaction."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from clotho import lore
from clotho.formats.stchat import export_chat, import_chat
from clotho.wiring import preview_lore
from mnemosyne import Node, Session
from planner.cards import Card
from planner.lorebook import Lorebook

from ._common import context, document, read_body
from .context import etag, expected_version
from .schemas import CardOut, ChatImportOut, LorebookOut, LoreHitOut, LoreTestBody
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
    response_model=ChatImportOut,
    openapi_extra=_body_doc("application/jsonl", "The chat file (.jsonl) as the body."),
)
async def import_chat_file(
    request: Request,
    filename: Annotated[str, Query(min_length=1, max_length=255)] = "chat.jsonl",
    title: Annotated[str | None, Query(max_length=500)] = None,
) -> Response:
    """Swipes become alternatives (siblings), hidden messages disabled nodes; every field
    is kept, so exporting it unchanged gives the same file back."""
    data = await read_body(request)
    store = context(request).store

    def inline() -> str:
        return import_chat(store, data, filename, title=title).id

    session_id = await importing(store, data, inline, import_chat_at, filename, title)

    def answer() -> Response:
        session = store.session(session_id)
        nodes = len(store.tree(session.id).nodes)
        return document({"session": session.as_dict(), "nodes": nodes}, session, 201)

    return await run_in_threadpool(answer)


@router.get(
    "/sessions/{session_id}/exports/chat",
    summary="A branch as a SillyTavern chat",
    responses={200: {"content": {"application/jsonl": {}}, "description": "The chat file."}},
)
def export_chat_file(
    request: Request,
    session_id: str,
    head: Annotated[
        str | None, Query(min_length=6, max_length=32, description="Default: HEAD.")
    ] = None,
) -> Response:
    """The path to `head` with each fork's alternatives as swipes. `X-Clotho-Dropped`
    counts the nodes below other alternatives, which the format cannot hold."""
    store = context(request).store
    session = store.session(session_id)
    exported = export_chat(store, session.id, head)
    name = (session.title or session.id[:8]).replace('"', "")
    return Response(
        exported.text.encode(),
        media_type="application/jsonl",
        headers={
            "ETag": etag(session.version),
            "X-Clotho-Messages": str(exported.messages),
            "X-Clotho-Dropped": str(exported.dropped),
            "Content-Disposition": f'attachment; filename="{name}.jsonl"',
        },
    )


@router.post(
    "/imports/tree",
    summary="A session from a Clotho tree file",
    status_code=201,
    openapi_extra=_body_doc("application/json", "The tree file (JSON) as the body."),
)
async def import_tree_file(
    request: Request,
    filename: Annotated[str, Query(min_length=1, max_length=255)] = "tree.json",
    new_ids: Annotated[
        bool, Query(description="Give the session and its nodes fresh ids (a copy).")
    ] = False,
) -> Response:
    from clotho.formats.treefile import import_tree

    data = await read_body(request)
    store = context(request).store

    def inline() -> str:
        return import_tree(store, data, filename, new_ids=new_ids).id

    session_id = await importing(store, data, inline, import_tree_at, filename, new_ids)
    session = await run_in_threadpool(store.session, session_id)
    return document(session.as_dict(), session, 201)


@router.get("/sessions/{session_id}/exports/tree", summary="The whole session, lossless")
def export_tree_file(request: Request, session_id: str) -> Response:
    """Every node (fragments and trash too), deltas, traces, documents and HEAD, as one
    versioned JSON document that `POST /api/imports/tree` takes back."""
    from clotho.formats.treefile import export_tree

    store = context(request).store
    session = store.session(session_id)
    return document(export_tree(store, session.id), session)


@router.post(
    "/sessions/{session_id}/imports/lorebook",
    summary="Add a World Info lorebook",
    response_model=LorebookOut,
    openapi_extra=_body_doc("application/json", "The World Info file as the body."),
)
async def import_lorebook_file(request: Request, session_id: str, name: FileName) -> Response:
    """A book of the same name is replaced."""
    data = await read_body(request)
    ctx = context(request)
    expected = expected_version(request)

    book_name = name.removesuffix(".json")

    def inline() -> tuple[Lorebook, Session]:
        return lore.import_lorebook(
            ctx.store, session_id, data, book_name, expected_version=expected
        )

    book, session = await importing(
        ctx.store, data, inline, import_lorebook_at, session_id, book_name, expected
    )

    def work() -> Response:
        if ctx.settings.vectors:
            lore.lore_index(ctx.settings, [book])
        enabled = sum(1 for entry in book.entries if not entry.disable)
        body = {"book": book.name, "entries": len(book.entries), "enabled": enabled}
        return document(body, session)

    return await run_in_threadpool(work)


@router.post(
    "/sessions/{session_id}/imports/card",
    summary="Make a character card the session's character",
    response_model=CardOut,
    openapi_extra=_body_doc("application/octet-stream", "The card (PNG or JSON) as the body."),
)
async def import_card_file(request: Request, session_id: str, filename: FileName) -> Response:
    """V1/V2/V3, PNG or JSON; its lorebook comes along, and an empty session starts with
    its greeting (alternate greetings as alternatives)."""
    data = await read_body(request)
    ctx = context(request)
    expected = expected_version(request)

    def inline() -> tuple[Card, list[Node], Session]:
        return lore.import_card(ctx.store, session_id, data, filename, expected_version=expected)

    card, greetings, session = await importing(
        ctx.store, data, inline, import_card_at, session_id, filename, expected
    )

    def work() -> Response:
        if card.book is not None and ctx.settings.vectors:
            lore.lore_index(ctx.settings, [card.book])
        body = {
            "name": card.name,
            "spec": card.spec,
            "book": card.book.name if card.book else None,
            "book_entries": len(card.book.entries) if card.book else 0,
            "greetings": [node.id for node in greetings],
            "session": session.as_dict(),
        }
        return document(body, session)

    return await run_in_threadpool(work)


@router.get("/sessions/{session_id}/lore", summary="The session's lorebooks")
def lorebooks(request: Request, session_id: str) -> Response:
    store = context(request).store
    session = store.session(session_id)
    books = lore.lorebooks_document(lore.session_books(store, session.id))
    return document(books, session)


@router.post(
    "/sessions/{session_id}/lore/test",
    summary="Which lore would fire for a message",
    response_model=list[LoreHitOut] | dict[str, list[dict]],
)
def lore_test(
    request: Request, session_id: str, body: LoreTestBody, skipped: bool = False
) -> Response:
    """The entries that would fire if `text` were the next message at HEAD, and why
    (nothing is generated or stored). `?skipped=true`: `{"fired": [...], "skipped":
    [...]}`, the skipped being the entries that could have fired and did not, each with
    why (a rule, a roll, the budget, a regex key that took too long and was skipped)."""
    ctx = context(request)
    session = ctx.store.session(session_id)
    preview = preview_lore(ctx.settings, ctx.store, session.id, body.text)
    if skipped:
        return document({"fired": preview["fired"], "skipped": preview["skipped"]}, session)
    return document(preview["fired"], session)
