"""Changing a session without a model: HEAD, swipes, messages, forks, the tree editor
(one or several operations in one request, atomically), undo and redo.

Every write answers a :class:`~clotho.api.schemas.WriteOut` (the session as the write
left it, what each operation did, the nodes it made or moved HEAD to) with the new
version as ETag. Every write takes ``If-Match: "<version>"``: if the session has moved
on since that version, the write is refused with 412 and the current version, and
changes nothing. Every write takes an ``Idempotency-Key`` (see
:mod:`clotho.api.idempotency`).
"""

from __future__ import annotations

from fastapi import APIRouter

from mnemosyne import JournalMismatchError, SessionTransaction

from .deps import Writer
from .idempotency import Outcome, result
from .schemas import (
    AppendBody,
    EditsBody,
    ForkBody,
    HeadBody,
    ResultOut,
    SwipeBody,
    WriteOut,
)

__all__ = ["router"]

router = APIRouter(tags=["writing"])


@router.put("/sessions/{session_id}/head", summary="Move HEAD", response_model=WriteOut)
def put_head(session_id: str, body: HeadBody, write: Writer) -> WriteOut:
    """Checkout: HEAD moves to the node (the state follows it). `nodes`: that node."""

    def act(tx: SessionTransaction) -> Outcome:
        before = tx.head_id
        node = tx.checkout(body.node_id)
        moved = node.id != before
        return Outcome([result("checkout", node.id, node.id, head_moved=moved)], [node])

    return write(session_id, act, body)


@router.post(
    "/sessions/{session_id}/swipe",
    summary="Switch to the next or previous alternative",
    response_model=WriteOut,
)
def swipe(session_id: str, body: SwipeBody, write: Writer) -> WriteOut:
    """The next/previous sibling of `node_id` (default HEAD), then down to the leaf last
    visited there, which becomes HEAD. `nodes`: that leaf."""

    def act(tx: SessionTransaction) -> Outcome:
        before = tx.head_id
        node = tx.switch_sibling(body.direction, body.node_id)
        moved = node.id != before
        return Outcome([result("swipe", node.id, node.id, head_moved=moved)], [node])

    return write(session_id, act, body)


@router.post(
    "/sessions/{session_id}/messages",
    summary="Add a message under HEAD (no model)",
    status_code=201,
    response_model=WriteOut,
)
def append(session_id: str, body: AppendBody, write: Writer) -> WriteOut:
    """A message under HEAD, which moves to it. `nodes`: the new message. One step of the
    undo journal (undo sends it to the trash, HEAD back)."""

    def act(tx: SessionTransaction) -> Outcome:
        with tx.journaled("append"):
            node = tx.append(body.role, body.content, name=body.name, delta=body.operations())
        made = result("append", node.id, node.id, head_moved=True, created=[node.id])
        return Outcome([made], [node])

    return write(session_id, act, body)


@router.post(
    "/sessions/{session_id}/nodes/{node_id}/fork",
    summary="A new alternative of a node, with its own text (no model)",
    status_code=201,
    response_model=WriteOut,
)
def fork(session_id: str, node_id: str, body: ForkBody, write: Writer) -> WriteOut:
    """A new sibling of `node_id` (same parent, same role) with its own text; HEAD moves
    to it. `nodes`: the new node. One step of the undo journal (undo sends it to the
    trash, HEAD back where it was)."""

    def act(tx: SessionTransaction) -> Outcome:
        with tx.journaled("fork"):
            node = tx.add_sibling(node_id, body.content, delta=body.operations())
        made = result("fork", node.id, node.id, head_moved=True, created=[node.id])
        return Outcome([made], [node])

    return write(session_id, act, body)


@router.post(
    "/sessions/{session_id}/edits",
    summary="Apply editor operations atomically",
    response_model=WriteOut,
)
def edits(session_id: str, body: EditsBody, write: Writer) -> WriteOut:
    """The operations run in order in one transaction: if one is refused, none happened
    (the problem names which one: `operation`, and `detail` starts `operations[i]`).
    They are one entry of the undo journal: one undo takes them all back. `results`:
    one per operation; `nodes`: the nodes they made (inject, copy)."""

    def act(tx: SessionTransaction) -> Outcome:
        done = tx.apply_all(body.operations)
        made = [tx.node(node_id) for one in done for node_id in one.created]
        return Outcome([ResultOut.model_validate(one.as_dict()) for one in done], made)

    return write(session_id, act, body)


def _travel(way: str, session_id: str, write: Writer) -> WriteOut:
    def act(tx: SessionTransaction) -> Outcome:
        done = tx.undo() if way == "undo" else tx.redo()
        return Outcome([ResultOut.model_validate(done.as_dict())])

    try:
        return write(session_id, act)
    except JournalMismatchError:  # the journal is cleared, as a change of its own
        with write.store.transaction(session_id) as tx:
            tx.drop_journal()
        raise


@router.post("/sessions/{session_id}/undo", summary="Undo the last edit", response_model=WriteOut)
def undo(session_id: str, write: Writer) -> WriteOut:
    """Take back the last entry of the journal (an edit batch, a turn...). `results`: one,
    whose `note` names what was taken back."""
    return _travel("undo", session_id, write)


@router.post(
    "/sessions/{session_id}/redo", summary="Redo the last undone edit", response_model=WriteOut
)
def redo(session_id: str, write: Writer) -> WriteOut:
    """Do again the last entry taken back. `results`: one."""
    return _travel("redo", session_id, write)


@router.delete(
    "/sessions/{session_id}/trash",
    summary="Empty the session's trash for good",
    response_model=WriteOut,
)
def purge(session_id: str, write: Writer) -> WriteOut:
    """Irreversible; it also clears the undo journal. `results[0].count`: how many nodes
    were deleted."""

    def act(tx: SessionTransaction) -> Outcome:
        count = tx.purge()
        return Outcome([result("purge", None, tx.head_id, count=count)])

    return write(session_id, act)
