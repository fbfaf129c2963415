"""Names on nodes, git's way: tags and branches (``clotho tag``, ``clotho branch``).

- A **tag** names one node for good (a bookmark: ``first-meeting``).
- A **branch** names the tip of a story. It follows the story: while HEAD is at a
  branch's tip, a node added under the tip (a turn played, a node appended) or beside
  it (the tip rerolled) takes the branch with it, as git's checked-out branch moves with
  a commit; so ``clotho checkout my-branch`` brings the player back to where that story
  stands now. Every branch at HEAD's node moves (git moves only the one checked out;
  here being at the tip is being on it). HEAD elsewhere, or a fork above the tip (the
  player's last message edited: a new version beside it), the branch stays.

A name is unique in its session, whatever its kind, and is taken wherever a node is
(:mod:`mnemosyne.nodenames`: ``first-meeting~2``); what a name may be is
:func:`mnemosyne.nodenames.check_ref_name`. Names follow their node into a fragment or
the trash (they name it there, and come back with it); a purge that deletes the node
deletes its names (the database's cascade).

Every change (tag, untag, branch, rename, delete) is one transaction and one undo step
of the editor's journal, which keeps the session's names before and after (the
``refs`` of an entry's payload; a turn that moved a branch keeps them too).

This module is the way in from a :class:`~mnemosyne.Store` (a transaction's own are
:meth:`~mnemosyne.SessionTransaction.name_node` and its neighbours); the rows are
``mnemosyne._refs``'s.
"""

from __future__ import annotations

from . import _queries as q
from ._refs import RefKind, RefMark, RefView, marks, views
from .editor import EditResult
from .models import Session
from .store import Store

__all__ = [
    "RefKind",
    "RefMark",
    "RefView",
    "listed",
    "marked",
    "name_node",
    "rename_name",
    "unname",
]


# --- the way in from the store ---------------------------------------------------------


def listed(store: Store, session_id: str, kind: str | None = None) -> list[RefView]:
    """A session's tags and branches (``kind``: only those), by name, with their nodes'
    text and where those are: what a list of them shows."""
    with store.read() as conn:
        record = q.session_record(conn, session_id)
        return views(conn, record.pk, record.head_pk, kind)


def marked(store: Store, session_id: str) -> list[RefMark]:
    """A session's tags and branches by name, each with its node's id only: what the
    marks of a log or a tree need (lighter than :func:`listed`)."""
    with store.read() as conn:
        return marks(conn, q.session_record(conn, session_id).pk)


def name_node(
    store: Store,
    session_id: str,
    name: str,
    kind: str,
    ref: str = "HEAD",
    *,
    force: bool = False,
    expected_version: int | None = None,
) -> tuple[EditResult, Session]:
    """Name node ``ref`` in one transaction, one undo step (see :func:`mnemosyne._refs.put`)."""
    with store.transaction(session_id, expected_version=expected_version) as tx:
        result = tx.name_node(name, kind, ref, force=force)
    return result, tx.session


def unname(
    store: Store,
    session_id: str,
    name: str,
    kind: str | None = None,
    *,
    expected_version: int | None = None,
) -> tuple[EditResult, Session]:
    """Delete a tag or branch in one transaction, one undo step."""
    with store.transaction(session_id, expected_version=expected_version) as tx:
        result = tx.unname(name, kind)
    return result, tx.session


def rename_name(
    store: Store,
    session_id: str,
    old: str,
    new: str,
    kind: str | None = None,
    *,
    expected_version: int | None = None,
) -> tuple[EditResult, Session]:
    """Rename a tag or branch (``kind``: it must be one) in one transaction, one undo step."""
    with store.transaction(session_id, expected_version=expected_version) as tx:
        result = tx.change_name(old, new=new, kind=kind)
    return result, tx.session
