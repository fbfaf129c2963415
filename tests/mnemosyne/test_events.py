"""A session's events: one per committed write, in its transaction, pruned, resumable."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text

from mnemosyne import ConflictError, InvalidDeltaError, NodeRecord, Store, events
from mnemosyne.edits import Delete, Inject, Rewrite


def _kinds(store: Store, sid: str, after: int = 0) -> list[tuple[int, str, str | None]]:
    read = store.events(sid, after=after)
    assert not read.reset
    return [(e.version, e.kind, e.payload["action"]) for e in read.events]


def test_every_write_appends_one_event_named_by_its_version(store: Store) -> None:
    session = store.create_session(title="log")
    sid = session.id
    assert store.events(sid).events == [] and store.events(sid).version == 0
    user, _ = store.append(sid, "user", "hello")
    reply, _ = store.append(sid, "assistant", "hi")
    store.checkout(sid, user.id)
    store.edit(sid, Rewrite(node_id=user.id, content="hello there"))
    store.undo(sid)
    store.redo(sid)
    with store.transaction(sid) as tx, tx.journaled("say"):
        said = tx.append("user", "again")
        tx.append("assistant", "yes")
    store.update_session(sid, title="renamed")
    store.trash_session(sid)
    store.restore_session(sid)
    assert _kinds(store, sid) == [
        (1, "grow", None),
        (2, "grow", None),
        (3, "head", None),
        (4, "edit", "rewrite"),
        (5, "undo", "rewrite"),
        (6, "redo", "rewrite"),
        (7, "turn", "say"),
        (8, "session", None),
        (9, "trash", None),
        (10, "restore", None),
    ]
    assert store.session(sid).version == 10
    log = store.events(sid, after=0).events
    assert log[1].payload["added"] == [reply.id] and log[1].payload["head"] == reply.id
    assert log[2].payload["head"] == user.id and log[2].payload["added"] == []
    assert log[3].payload["changed"] == [user.id]  # the node edited; no text in the event
    assert "hello there" not in str(log[3].as_dict())
    assert log[6].payload["added_count"] == 2 and log[6].payload["added"][0] == said.id
    assert log[6].payload["changed"] == [user.id]  # where the turn hung; not the new nodes
    assert log[7].payload["title"] == "renamed"
    # resumable from any version kept
    assert [e.version for e in store.events(sid, after=7).events] == [8, 9, 10]
    assert store.events(sid, after=10).events == []


def test_nodes_an_edit_creates_are_added_not_changed(store: Store) -> None:
    sid = store.create_session().id
    user, _ = store.append(sid, "user", "hello")
    reply, _ = store.append(sid, "assistant", "hi")
    done, _ = store.edit(sid, Inject(parent_id=user.id, role="system", content="Night falls."))
    (new,) = done.created
    store.undo(sid)
    store.redo(sid)
    edit, undo, redo = store.events(sid, after=2).events
    assert (edit.kind, edit.payload["added"], edit.payload["added_count"]) == ("edit", [new], 1)
    assert sorted(edit.payload["changed"]) == sorted([user.id, reply.id])  # relinked
    assert undo.payload["added"] == [] and new not in undo.payload["changed"]  # gone
    assert (redo.kind, redo.payload["added"]) == ("redo", [new])  # back: added again
    assert new not in redo.payload["changed"]


def test_a_refused_write_leaves_no_event(store: Store) -> None:
    sid = store.create_session().id
    node, _ = store.append(sid, "user", "hello")
    with pytest.raises(ConflictError):
        store.append(sid, "user", "stale", expected_version=0)
    with pytest.raises(InvalidDeltaError):
        store.append(sid, "user", "bad", delta=[{"op": "inc", "path": "hp", "value": "x"}])
    with pytest.raises(RuntimeError), store.transaction(sid) as tx:
        tx.append("user", "rolled back")
        raise RuntimeError("the caller failed before the commit")
    assert _kinds(store, sid) == [(1, "grow", None)]
    assert store.events(sid, after=0).events[0].payload["head"] == node.id


def test_an_import_and_a_purge_are_one_event_each(store: Store) -> None:
    def fill(tx: object) -> None:
        tx.insert_nodes(  # type: ignore[attr-defined]
            [NodeRecord("user", f"line {i}", parent=i - 1 if i else None) for i in range(150)]
        )

    sid = store.create_session(fill=fill).id
    [imported] = store.events(sid, after=0).events
    assert imported.kind == "import" and imported.version == 1
    assert imported.payload["added_count"] == 150
    assert len(imported.payload["added"]) == events.MAX_IDS  # ids bounded, count whole
    tail = store.projection(sid)[-1]
    store.edit(sid, Delete(node_id=tail.id))
    with store.transaction(sid) as tx:
        tx.purge()
    assert _kinds(store, sid, after=1) == [(2, "edit", "delete"), (3, "purge", None)]


def test_old_events_are_pruned_and_an_old_reader_is_told_to_reset(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(events, "KEPT", 5)
    sid = store.create_session().id
    for i in range(12):
        store.append(sid, "user", f"line {i}")
    with store.read() as conn:
        count = conn.execute(text("SELECT count(*) FROM session_events")).scalar_one()
    assert count == 5  # the bound
    assert [e.version for e in store.events(sid, after=7).events] == [8, 9, 10, 11, 12]
    for after in (0, 6):  # older than what is kept
        old = store.events(sid, after=after)
        assert old.reset and old.events == [] and old.version == 12
    assert store.events(sid, after=13).reset  # a version the session never had


def test_postgresql_notifies_listeners_at_the_commit_only(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's (SQLite readers poll)")
    sid = store.create_session().id
    heard: list[tuple[str, int]] = []
    listening, stop = threading.Event(), threading.Event()

    def on_notify(session_id: str, version: int) -> None:
        if session_id:
            heard.append((session_id, version))
        else:
            listening.set()

    thread = threading.Thread(target=events.listen, args=(store.engine, on_notify, stop))
    thread.start()
    try:
        assert listening.wait(10)
        with pytest.raises(RuntimeError), store.transaction(sid) as tx:
            tx.append("user", "rolled back")
            raise RuntimeError("no commit")
        store.append(sid, "user", "committed")
        deadline = time.monotonic() + 10
        while not heard and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)
        assert heard == [(sid, 1)]
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


def test_a_write_committed_in_this_process_is_announced_after_its_commit(store: Store) -> None:
    sid = store.create_session().id
    seen: list[int] = []
    written: list[dict[str, int]] = []

    def committed(sessions: dict[str, int]) -> None:  # done: another connection reads it
        seen.append(store.session(sid).version)
        written.append(sessions)

    remove = events.on_write_commit(store.engine, committed)
    try:
        store.append(sid, "user", "hello")
        store.projection(sid)  # a read announces nothing
        with pytest.raises(RuntimeError), store.transaction(sid) as tx:
            tx.append("user", "rolled back")
            raise RuntimeError("no commit")
        store.append(sid, "user", "again")
    finally:
        remove()
    store.append(sid, "user", "after")
    assert seen == [1, 2]
    assert written == [{sid: 1}, {sid: 2}]  # the sessions written, at their versions


def test_the_versions_of_many_sessions_in_one_read(store: Store) -> None:
    one, two = store.create_session().id, store.create_session().id
    store.append(two, "user", "hello")
    found = events.versions(store.engine, [one, two, "fedcba987654"])
    assert found == {one: 0, two: 1}  # a session that does not exist is absent


def test_an_events_read_gives_the_head_of_its_version(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "hello")
    read = store.events(sid)
    assert (read.version, read.head) == (1, store.session(sid).head_id)
    assert read.head is not None
