"""Session documents (lorebooks, cards): kept whole, replaced on re-import, one transaction."""

from __future__ import annotations

import json

import pytest

from mnemosyne import InvalidOperationError, NotFoundError, SessionTransaction, Store

BOOK = json.dumps({"entries": {"0": {"uid": 0, "key": ["wolf"], "content": "Wolves. é"}}})


def test_a_document_comes_back_exactly_and_bumps_the_version(store: Store) -> None:
    sid = store.create_session(title="lore").id
    with store.transaction(sid, expected_version=0) as tx:
        put = tx.put_document("lorebook", "Eldoria", BOOK)
    assert tx.session.version == 1
    (stored,) = store.documents(sid, "lorebook")
    assert (stored.name, stored.content, stored.hash) == ("Eldoria", BOOK, put.hash)
    assert store.documents(sid, "card") == []


def test_putting_the_same_name_again_replaces_it_in_place(store: Store) -> None:
    sid = store.create_session().id
    other = json.dumps({"entries": {}})
    with store.transaction(sid) as tx:
        tx.put_document("lorebook", "A", BOOK)
        tx.put_document("lorebook", "B", other)
    with store.transaction(sid) as tx:
        tx.put_document("lorebook", "A", other)
    listed = store.documents(sid)
    assert [(d.name, d.content) for d in listed] == [("A", other), ("B", other)]
    assert listed[0].hash == listed[1].hash


def test_bad_documents_are_refused_and_nothing_is_stored(store: Store) -> None:
    sid = store.create_session().id
    with pytest.raises(InvalidOperationError, match="not JSON"), store.transaction(sid) as tx:
        tx.put_document("lorebook", "ok", BOOK)
        tx.put_document("lorebook", "broken", "{nope")
    for kind, name in (("Lore Book", "x"), ("lorebook", ""), ("lorebook", "x" * 201)):
        with pytest.raises(InvalidOperationError), store.transaction(sid) as tx:
            tx.put_document(kind, name, BOOK)
    assert store.documents(sid) == []
    assert store.session(sid).version == 0


def test_removing_a_document(store: Store) -> None:
    sid = store.create_session().id
    with store.transaction(sid) as tx:
        tx.put_document("card", "Seraphina", "{}")
    with pytest.raises(NotFoundError, match="no card named 'Nobody'"), store.transaction(sid) as tx:
        tx.remove_document("card", "Nobody")
    with store.transaction(sid) as tx:
        tx.remove_document("card", "Seraphina")
    assert store.documents(sid) == []


def test_documents_go_with_their_session(store: Store) -> None:
    first, second = store.create_session().id, store.create_session().id
    with store.transaction(first) as tx:
        tx.put_document("lorebook", "A", BOOK)
    assert store.documents(second) == []
    assert [d.name for d in store.documents(first)] == ["A"]


def test_a_session_is_created_with_its_documents_or_not_at_all(store: Store) -> None:
    session = store.create_session(title="with lore", documents=[("lorebook", "A", BOOK)])
    assert [d.content for d in store.documents(session.id)] == [BOOK]
    before = len(store.sessions())
    with pytest.raises(InvalidOperationError, match="not JSON"):
        store.create_session(documents=[("lorebook", "A", BOOK), ("card", "B", "{")])
    assert len(store.sessions()) == before


def test_a_session_filled_at_creation_is_all_or_nothing(store: Store) -> None:
    def grow(tx: SessionTransaction) -> None:
        tx.append("user", "Hello.")
        tx.append("assistant", "Welcome.")

    session = store.create_session(fill=grow)
    assert [m.content for m in store.messages(session.id)] == ["Hello.", "Welcome."]
    assert session.head_id == store.session(session.id).head_id is not None

    def broken(tx: SessionTransaction) -> None:
        tx.append("user", "Hello.")
        tx.append("wizard", "?")

    before = len(store.sessions())
    with pytest.raises(InvalidOperationError, match="wizard"):
        store.create_session(fill=broken)
    assert len(store.sessions()) == before
