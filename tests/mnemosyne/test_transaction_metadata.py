"""A write transaction may replace the session's metadata with its commit
(``SessionTransaction.set_metadata``): one version, nothing of it kept if the
transaction fails. On SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from mnemosyne import InvalidOperationError, Store


def test_metadata_set_in_a_transaction_commits_with_it(store: Store) -> None:
    session = store.create_session(title="t", metadata={"keep": 1})
    with store.transaction(session.id) as tx:
        tx.append("user", "hello")
        assert tx.metadata == {"keep": 1}
        tx.set_metadata({**tx.metadata, "avatar": True})
        assert tx.metadata == {"keep": 1, "avatar": True}
    assert tx.session.version == session.version + 1  # one write, one version
    assert tx.session.metadata == {"keep": 1, "avatar": True}
    assert store.session(session.id).metadata == {"keep": 1, "avatar": True}

    # refused: nothing of it stored
    with pytest.raises(InvalidOperationError), store.transaction(session.id) as tx:
        tx.set_metadata({"gone": True})
        tx.append("nobody", "a role that is not one")
    assert store.session(session.id).metadata == {"keep": 1, "avatar": True}
    with pytest.raises(InvalidOperationError), store.transaction(session.id) as tx:
        tx.set_metadata({"bad": float("nan")})
    assert store.session(session.id).version == session.version + 1
