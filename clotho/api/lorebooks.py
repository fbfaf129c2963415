"""A session's lore, for the lore manager: its books (switched on or off, removed,
exported as SillyTavern's World Info file), their entries with every field players edit
(changed, added, deleted), and which entries a text would fire (and why).

Every write names the version it read (If-Match), is one transaction, and answers a
``WriteOut`` like every other write; the next turn plays the lore as changed (the
session's engine is built again when its documents change). Books are named by their
name in the path (percent-encoded; a name with ``/`` cannot be named there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Path, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from clotho import lore
from clotho.lore_edits import (
    EntryFields,
    add_entry,
    book_view,
    books_listed,
    change_entry,
    delete_entry,
    entry_fields,
    remove_book,
    switch_book,
)
from clotho.wiring import NoModelError, preview_lore
from mnemosyne import SessionTransaction

from ._common import attachment
from .deps import ContextDep, NoParameters, ReadSession, StoreDep, Writer
from .etags import ETAG_HEADER, etag
from .idempotency import Outcome, result
from .schemas import LorebookOut, LoreHitOut, LoreTestBody, LoreTestOut, WriteOut

if TYPE_CHECKING:
    from orchestrator import Engine
    from planner.lorebook import Lorebook

__all__ = ["router"]

router = APIRouter(tags=["lore"])

BookName = Annotated[
    str, Path(min_length=1, max_length=200, description="The book's name (percent-encoded).")
]
Uid = Annotated[int, Path(ge=-(2**53), le=2**53, description="The entry's uid.")]


#: A World Info file's schema, as far as Clotho needs it (every other field kept as it came).
WORLD_INFO = {
    "type": "object",
    "required": ["entries"],
    "properties": {
        "entries": {
            "type": ["object", "array"],
            "description": "The entries by uid (older files: a list).",
        }
    },
}


class LoreEntryDetail(BaseModel):
    """An entry with every field the lore manager edits (:class:`EntryFields`)."""

    uid: int
    comment: str
    keys: list[str]
    secondary_keys: list[str]
    selective: bool
    selective_logic: int = Field(description="0 AND ANY, 1 NOT ALL, 2 NOT ANY, 3 AND ALL.")
    content: str
    constant: bool
    enabled: bool
    vectorized: bool
    position: int
    depth: int
    role: int | None
    order: int
    probability: float | None
    use_probability: bool
    sticky: int | None
    cooldown: int | None
    delay: int | None
    group: str
    scan_depth: int | None
    case_sensitive: bool | None
    match_whole_words: bool | None
    exclude_recursion: bool
    prevent_recursion: bool
    ignore_budget: bool
    outlet_name: str
    condition: str | None


class LorebookDetail(BaseModel):
    """A book of the session with every entry in full, in the file's order."""

    book: str
    enabled: bool = Field(description="Whether it plays (a book switched off stays).")
    kind: str = Field(description="`world_info`; a card's book is kept converted to it.")
    entries: list[LoreEntryDetail]


class BookSwitch(BaseModel):
    """Switch a book on or off."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"enabled": False}]})
    enabled: bool = Field(description="`false`: the book stays with the session, unplayed.")


def _detail(book: Lorebook, enabled: bool) -> LorebookDetail:
    entries = [LoreEntryDetail.model_validate(entry_fields(entry)) for entry in book.entries]
    return LorebookDetail(book=book.name, enabled=enabled, kind=book.kind, entries=entries)


@router.get(
    "/sessions/{session_id}/lore",
    summary="The session's lorebooks",
    response_model=list[LorebookOut],
)
def lorebooks(store: StoreDep, session: ReadSession, _: NoParameters) -> Any:
    """Every book, switched on or off (`enabled`), its entries in short."""
    listed = books_listed(store, session.id)
    documents = lore.lorebooks_document([view.book for view in listed])
    for document, view in zip(documents, listed, strict=True):
        document["enabled"] = view.enabled
    return documents


@router.get(
    "/sessions/{session_id}/lore/books/{book}",
    summary="A lorebook with its entries in full",
    response_model=LorebookDetail,
)
def lorebook(store: StoreDep, session: ReadSession, book: BookName, _: NoParameters) -> Any:
    """Every entry with every field the lore manager edits (`PATCH .../entries/{uid}`)."""
    view = book_view(store, session.id, book)
    return _detail(view.book, view.enabled)


@router.get(
    "/sessions/{session_id}/lore/books/{book}/export",
    summary="A lorebook as a SillyTavern World Info file",
    responses={
        200: {"content": {"application/json": {"schema": WORLD_INFO}}, "description": "The file."}
    },
)
def export_lorebook(
    store: StoreDep, session: ReadSession, book: BookName, _: NoParameters
) -> Response:
    """The book as SillyTavern writes World Info files: fields Clotho does not know, and
    those the file left out, as they came; the lore manager's changes written in (a
    book read from a file and not changed comes back byte for byte)."""
    from planner.lorebook import dump_world_info

    view = book_view(store, session.id, book)
    return Response(
        dump_world_info(view.book),
        media_type="application/json",
        headers={
            "ETag": etag(session.version),
            "Content-Disposition": attachment(view.book.name, "json"),
        },
    )


@router.patch(
    "/sessions/{session_id}/lore/books/{book}",
    summary="Switch a lorebook on or off",
    response_model=WriteOut,
)
def switch_lorebook(
    session_id: str, book: BookName, body: BookSwitch, write: Writer, _: NoParameters
) -> WriteOut:
    """A book switched off stays with the session, unchanged, and plays no more until it
    is switched on. `results[0].count`: 1 if it changed, 0 if it already was so."""

    def act(tx: SessionTransaction) -> Outcome:
        changed = switch_book(tx, book, body.enabled)
        state = "on" if body.enabled else "off"
        note = f"the lorebook {book!r} switched {state}" if changed else ""
        return Outcome([result("lore_book", None, tx.head_id, note=note, count=int(changed))])

    return write(session_id, act, body)


@router.delete(
    "/sessions/{session_id}/lore/books/{book}",
    summary="Remove a lorebook",
    response_model=WriteOut,
)
def remove_lorebook(session_id: str, book: BookName, write: Writer, _: NoParameters) -> WriteOut:
    """The book leaves the session (export it first to keep it). `results[0].count`: how
    many entries it had."""

    def act(tx: SessionTransaction) -> Outcome:
        count = remove_book(tx, book)
        note = f"the lorebook {book!r} removed"
        return Outcome([result("lore_remove", None, tx.head_id, note=note, count=count)])

    return write(session_id, act)


@router.post(
    "/sessions/{session_id}/lore/books/{book}/entries",
    summary="Add an entry to a lorebook",
    status_code=201,
    response_model=WriteOut,
)
def add_lore_entry(
    session_id: str, book: BookName, body: EntryFields, write: Writer, _: NoParameters
) -> WriteOut:
    """SillyTavern's new entry (every field at its default) with the fields given, its
    uid the next free one: `results[0].count`."""

    def act(tx: SessionTransaction) -> Outcome:
        entry = add_entry(tx, book, body)
        note = f"entry {entry.uid} added to {book!r}"
        return Outcome([result("lore_add", None, tx.head_id, note=note, count=entry.uid)])

    return write(session_id, act, body)


@router.patch(
    "/sessions/{session_id}/lore/books/{book}/entries/{uid}",
    summary="Change a lorebook entry",
    response_model=WriteOut,
)
def change_lore_entry(
    session_id: str,
    book: BookName,
    uid: Uid,
    body: EntryFields,
    write: Writer,
    _: NoParameters,
) -> WriteOut:
    """Only the fields given change; the entry as changed is checked as an imported one
    is (and its condition parsed), else nothing changes (422 naming the field). The
    entry's sticky, cooldown and delay timers in force end (it is another entry now).
    Fields given as they already are change nothing: the version stays, `note` is empty."""

    def act(tx: SessionTransaction) -> Outcome:
        _, changed = change_entry(tx, book, uid, body)
        note = f"entry {uid} of {book!r} changed" if changed else ""
        return Outcome([result("lore_change", None, tx.head_id, note=note, count=uid)])

    return write(session_id, act, body)


@router.delete(
    "/sessions/{session_id}/lore/books/{book}/entries/{uid}",
    summary="Delete a lorebook entry",
    response_model=WriteOut,
)
def delete_lore_entry(
    session_id: str, book: BookName, uid: Uid, write: Writer, _: NoParameters
) -> WriteOut:
    """The other entries keep their uids."""

    def act(tx: SessionTransaction) -> Outcome:
        delete_entry(tx, book, uid)
        note = f"entry {uid} of {book!r} deleted"
        return Outcome([result("lore_delete", None, tx.head_id, note=note, count=uid)])

    return write(session_id, act)


@router.post(
    "/sessions/{session_id}/lore/test",
    summary="Which lore would fire for a message",
    response_model=list[LoreHitOut] | LoreTestOut,
    responses={200: {"headers": {"ETag": ETAG_HEADER}}},
)
async def lore_test(
    response: Response,
    ctx: ContextDep,
    session_id: str,
    body: LoreTestBody,
    skipped: bool = False,
) -> Any:
    """The entries that would fire if `text` were the next message at HEAD, and why
    (`via`, `reason`, `similarity` for an entry found by meaning; nothing is generated or
    stored). `?skipped=true`: `{"fired": [...], "skipped": [...], "budget", "tokens"}`,
    the skipped being the entries that could have fired and did not, each with why (a
    rule, a roll, the budget, a regex key that took too long and was skipped), `budget`
    the lore's budget in tokens and `tokens` what the entries that fired spent of it."""
    session = await run_in_threadpool(ctx.store.session, session_id)
    try:  # the session's engine as its turns use it (kept), else one for the preview
        engine: Engine | None = await ctx.engine(session.id)
    except NoModelError:
        engine = None
    preview = await preview_lore(ctx.settings, ctx.store, session.id, body.text, engine=engine)
    response.headers["ETag"] = etag(session.version)
    if skipped:
        return {
            "fired": preview["fired"],
            "skipped": preview["skipped"],
            "budget": preview["budget"],
            "tokens": preview["tokens"],
        }
    return preview["fired"]
