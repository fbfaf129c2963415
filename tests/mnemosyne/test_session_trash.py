"""Sessions in the trash: out of the list, unchangeable, restorable, purged for good."""

from __future__ import annotations

import pytest

from mnemosyne import ConflictError, InvalidOperationError, Store, UnknownSessionError


def _grown(store: Store) -> str:
    session = store.create_session(title="doomed")
    store.append(session.id, "user", "hello", delta=[{"op": "set", "path": "hp", "value": 3}])
    store.append(session.id, "assistant", "hi")
    return session.id


def test_trash_hides_the_session_and_refuses_changes(store: Store) -> None:
    sid = _grown(store)
    kept = store.create_session(title="kept")
    before = store.session(sid)
    trashed = store.trash_session(sid, expected_version=before.version)
    assert trashed.trashed_at is not None
    assert trashed.version == before.version + 1
    assert [s.id for s in store.sessions()] == [kept.id]
    assert [s.id for s in store.sessions(trashed=True)] == [sid]
    # still readable, whole
    assert [n.content for n in store.projection(sid)] == ["hello", "hi"]
    with pytest.raises(InvalidOperationError, match="in the trash"):
        store.append(sid, "user", "more")
    with pytest.raises(InvalidOperationError, match="already in the trash"):
        store.trash_session(sid)
    assert store.session(sid).version == trashed.version


def test_restore_gives_it_back_unchanged(store: Store) -> None:
    sid = _grown(store)
    trashed = store.trash_session(sid)
    with pytest.raises(ConflictError):
        store.restore_session(sid, expected_version=trashed.version - 1)
    restored = store.restore_session(sid, expected_version=trashed.version)
    assert restored.trashed_at is None
    assert store.session(sid).trashed_at is None
    assert store.state(sid).variables["hp"] == 3
    store.append(sid, "user", "back again")
    with pytest.raises(InvalidOperationError, match="not in the trash"):
        store.restore_session(sid)


def test_purge_only_from_the_trash_and_for_good(store: Store) -> None:
    sid = _grown(store)
    other = _grown(store)
    with pytest.raises(InvalidOperationError, match="not in the trash"):
        store.purge_session(sid)
    assert len(store.projection(sid)) == 2
    store.trash_session(sid)
    store.purge_session(sid)
    with pytest.raises(UnknownSessionError):
        store.session(sid)
    assert store.sessions(trashed=True) == []
    assert [n.content for n in store.projection(other)] == ["hello", "hi"]
    assert store.node_counts() == {other: 2}
