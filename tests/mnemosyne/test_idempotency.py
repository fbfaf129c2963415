"""Idempotency keys: stored with their write, in its transaction; a retry reads the first
answer back; another request under the same key is refused; keys expire."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from mnemosyne import (
    IdempotencyKeyReusedError,
    InvalidOperationError,
    Session,
    Store,
    UnknownNodeError,
)
from mnemosyne._idempotency import KEEP
from mnemosyne._schema import idempotency_keys


def _answer(session: Session) -> str:
    return f'{{"version": {session.version}, "head_id": "{session.head_id}"}}'


def _append(store: Store, sid: str, key: str, request: str = "r1") -> str:
    with store.transaction(sid) as tx:
        tx.append("user", "Hello.")
        tx.remember(key, request, _answer)
    return _answer(tx.session)


def test_the_answer_is_stored_with_the_write(store: Store) -> None:
    sid = store.create_session().id
    first = _append(store, sid, "key-1")
    session = store.session(sid)
    assert first == _answer(session) and session.version == 1
    assert store.remembered(sid, "key-1", "r1") == first
    assert store.remembered(sid[:8], "key-1", "r1") == first  # a prefix names the session
    assert store.remembered(sid, "key-2", "r1") is None
    other = store.create_session().id
    assert store.remembered(other, "key-1", "r1") is None  # keys are per session


def test_a_refused_write_stores_no_key(store: Store) -> None:
    sid = store.create_session().id
    with pytest.raises(UnknownNodeError), store.transaction(sid) as tx:
        tx.remember("key-1", "r1", _answer)
        tx.checkout("ffffffffff")
    assert store.remembered(sid, "key-1", "r1") is None
    assert store.session(sid).version == 0


def test_the_same_key_for_another_request_is_refused(store: Store) -> None:
    sid = store.create_session().id
    _append(store, sid, "key-1", "r1")
    with pytest.raises(IdempotencyKeyReusedError) as refused:
        store.remembered(sid, "key-1", "r2")
    assert refused.value.code == "idempotency_key_reused" and "key-1" in str(refused.value)


def test_a_second_write_under_a_stored_key_is_rolled_back(store: Store) -> None:
    """A retry that raced the first one (both found no key) fails whole when it stores
    the key: its write is not applied twice."""
    sid = store.create_session().id
    _append(store, sid, "key-1")
    with pytest.raises(InvalidOperationError):
        _append(store, sid, "key-1")
    assert store.session(sid).version == 1
    assert len(store.tree(sid).nodes) == 1


def test_racing_retries_apply_once(store: Store) -> None:
    sid = store.create_session().id
    outcomes: list[str] = []
    start = threading.Barrier(4)

    def retry() -> None:
        start.wait()
        try:
            _append(store, sid, "key-1")
            outcomes.append("applied")
        except InvalidOperationError:
            outcomes.append("refused")

    threads = [threading.Thread(target=retry) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["applied", "refused", "refused", "refused"]
    assert len(store.tree(sid).nodes) == 1


def test_keys_expire(store: Store) -> None:
    sid = store.create_session().id
    _append(store, sid, "old")
    with store.write() as conn:
        conn.execute(update(idempotency_keys).values(created_at=datetime.now(UTC) - KEEP))
    assert store.remembered(sid, "old", "r1") is None  # expired: ignored
    _append(store, sid, "new")  # the next key stored deletes the expired ones
    with store.read() as conn:
        keys = conn.execute(select(idempotency_keys.c.key)).scalars().all()
    assert keys == ["new"]
    with store.write() as conn:  # a key younger than KEEP is still honoured
        almost = datetime.now(UTC) - KEEP + timedelta(minutes=1)
        conn.execute(update(idempotency_keys).values(created_at=almost))
    assert store.remembered(sid, "new", "r1") is not None


def test_purging_a_session_drops_its_keys(store: Store) -> None:
    sid = store.create_session().id
    _append(store, sid, "key-1")
    store.trash_session(sid)
    store.purge_session(sid)
    with store.read() as conn:
        assert conn.execute(select(idempotency_keys)).first() is None


@pytest.mark.parametrize("key", ["", "x" * 201, "naïve", "tab\there"])
def test_bad_keys_are_refused(store: Store, key: str) -> None:
    sid = store.create_session().id
    with pytest.raises(InvalidOperationError, match="idempotency key"):
        store.remembered(sid, key, "r1")
    refused = pytest.raises(InvalidOperationError, match="idempotency key")
    with refused, store.transaction(sid) as tx:
        tx.remember(key, "r1", _answer)
