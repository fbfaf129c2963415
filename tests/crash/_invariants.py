"""What must hold in a database after any writer was killed at any moment.

Every check reads the database afresh (a new :class:`Store`, raw SQL for what the store
would refuse to read) and fails with what it found. Used by the crash tests after each
SIGKILL, and by the writer (``tree_digest``, ``user_turns``) to log what it committed.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.engine import make_url

from mnemosyne import ROLES, SessionDump, Store
from mnemosyne.editor import JournalMismatchError
from mnemosyne.errors import InvalidOperationError

#: The text of every player message a crash test's turn writes starts with this.
TURN_MARK = "turn-"

#: Rows that point at nothing (each query returns the offending keys).
ORPHANS = {
    "a node's parent is not a node of its session": """
        SELECT n.pk FROM nodes n WHERE n.parent_pk IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM nodes p WHERE p.pk = n.parent_pk AND p.session_pk = n.session_pk)""",
    "a node's active child is not a node of its session": """
        SELECT n.pk FROM nodes n WHERE n.active_child_pk IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM nodes c WHERE c.pk = n.active_child_pk
            AND c.session_pk = n.session_pk)""",
    "a session's HEAD is not a node of it": """
        SELECT s.pk FROM sessions s WHERE s.head_pk IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM nodes n WHERE n.pk = s.head_pk AND n.session_pk = s.pk)""",
    "a node of no session": """
        SELECT n.pk FROM nodes n WHERE NOT EXISTS (
            SELECT 1 FROM sessions s WHERE s.pk = n.session_pk)""",
    "a trace of no node": """
        SELECT t.node_pk FROM traces t WHERE NOT EXISTS (
            SELECT 1 FROM nodes n WHERE n.pk = t.node_pk)""",
    "a keyframe of no node": """
        SELECT k.node_pk FROM keyframes k WHERE NOT EXISTS (
            SELECT 1 FROM nodes n WHERE n.pk = k.node_pk)""",
    "a journal entry of no session": """
        SELECT j.pk FROM journal j WHERE NOT EXISTS (
            SELECT 1 FROM sessions s WHERE s.pk = j.session_pk)""",
    "a detached top that still has a parent": """
        SELECT n.pk FROM nodes n WHERE n.detached IS NOT NULL AND n.parent_pk IS NOT NULL""",
}


def tree_digest(dump: SessionDump) -> str:
    """A hash of everything an edit or a turn changes: every node as stored (text,
    place, flags, delta, metadata), HEAD, the traces."""
    nodes = [
        [
            n.id,
            n.parent,
            n.role,
            n.name,
            n.content,
            n.enabled,
            list(n.delta or []),
            dict(n.metadata or {}),
            n.active_child,
            n.detached,
            n.detached_from,
        ]
        for n in dump.nodes
    ]
    traces = [[t.node_id, t.messages_hash] for t in dump.traces]
    document = {"head": dump.session.head_id, "nodes": nodes, "traces": traces}
    return hashlib.sha256(json.dumps(document, sort_keys=True, default=str).encode()).hexdigest()


def user_turns(dump: SessionDump) -> int:
    """How many player messages the turn writer has committed."""
    return sum(1 for n in dump.nodes if n.role == "user" and n.content.startswith(TURN_MARK))


@dataclass(frozen=True)
class Logged:
    """The last commit a writer logged: ``VERSION USERS HASH``."""

    version: int
    users: int
    digest: str

    @classmethod
    def last(cls, path: str, initial: Logged) -> Logged:
        try:
            with open(path) as log:
                lines = [line.split() for line in log if line.strip()]
        except FileNotFoundError:
            return initial
        for parts in reversed(lines):
            if len(parts) == 3:  # a line cut by the kill has fewer parts
                return cls(int(parts[0]), int(parts[1]), parts[2])
        return initial


def database_integrity(url: str) -> None:
    """SQLite's own checks of the file, then references that point at nothing (on both
    databases: PostgreSQL checks its deferred keys at commit; this checks they were)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        with sqlite3.connect(parsed.database) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    with Store.open(url) as store, store.engine.connect() as conn:
        for problem, query in ORPHANS.items():
            rows = conn.execute(text(query)).fetchall()
            assert rows == [], f"{problem}: {rows}"


def check_session(url: str, session_id: str, *, turns: bool) -> SessionDump:
    """The session's tree, HEAD, nodes, turns, state and journal are whole; returns
    the session as stored."""
    database_integrity(url)
    with Store.open(url) as store:
        dump = store.dump(session_id)
        by_id = {n.id: n for n in dump.nodes}
        children: dict[str | None, list[str]] = {}
        for n in dump.nodes:
            assert n.role in ROLES, n
            assert isinstance(n.content, str), n
            assert isinstance(dict(n.metadata or {}), dict), n
            assert all(isinstance(op, dict) for op in n.delta or []), n
            children.setdefault(n.parent, []).append(n.id)
            if n.active_child is not None:
                assert by_id[n.active_child].parent == n.id, f"active child of {n.id} elsewhere"

        # HEAD: a node of the session, in the tree (its path reaches an attached root).
        head = dump.session.head_id
        if head is None:
            assert all(n.detached for n in dump.nodes if n.parent is None), "nodes but no HEAD"
        else:
            at, seen = by_id[head], 0
            while at.parent is not None:
                at, seen = by_id[at.parent], seen + 1
                assert seen <= len(by_id), "a cycle above HEAD"
            assert at.detached is None, f"HEAD {head} is in a {at.detached}"
        store.state(session_id)  # the world state at HEAD computes (keyframes + deltas)

        traced = {t.node_id for t in dump.traces}
        if turns:
            for n in dump.nodes:
                if n.role == "user" and n.content.startswith(TURN_MARK):
                    replies = [c for c in children.get(n.id, []) if by_id[c].role == "assistant"]
                    assert replies, f"a turn's player message {n.id} was stored without reply"
                if n.id in traced:
                    trace = store.trace(session_id, n.id)
                    assert trace is not None and trace.verified, (n.id, trace and trace.problems)
                    assert n.content, f"a generated node {n.id} with no text"
            generated = [n for n in dump.nodes if (n.metadata or {}).get("model")]
            assert all(n.id in traced for n in generated), "a generated node without trace"

        # The journal: positions 1..n, the session's position within them, readable.
        with store.engine.connect() as conn:
            positions = [
                row[0]
                for row in conn.execute(
                    text(
                        "SELECT j.position FROM journal j JOIN sessions s ON s.pk = j.session_pk"
                        " WHERE s.id = :sid ORDER BY j.position"
                    ),
                    {"sid": dump.session.id},
                )
            ]
            position = conn.execute(
                text("SELECT journal_position FROM sessions WHERE id = :sid"),
                {"sid": dump.session.id},
            ).scalar_one()
        assert positions == sorted(set(positions)), positions
        if positions:
            assert positions[0] >= 1 and positions == list(range(positions[0], positions[-1] + 1))
            assert positions[0] - 1 <= position <= positions[-1], (position, positions)
        store.history(session_id)
    return dump


def undo_redo_round_trip(url: str, session_id: str) -> None:
    """The journal agrees with the tree: undo then redo gives the same tree back (or
    there is nothing to undo). A journal that disagrees is a failure, not a refusal."""
    with Store.open(url) as store:
        before = tree_digest(store.dump(session_id))
        try:
            store.undo(session_id)
        except JournalMismatchError as error:
            raise AssertionError(f"the journal disagrees with the tree: {error}") from error
        except InvalidOperationError:
            return  # nothing to undo
        store.redo(session_id)
        assert tree_digest(store.dump(session_id)) == before
