"""Bad input: a clear error naming what was wrong, and nothing changed."""

from __future__ import annotations

import pytest
from sqlalchemy import text

import mnemosyne.store as store_module
from mnemosyne import (
    AmbiguousIdError,
    ForeignNodeError,
    InvalidDeltaError,
    InvalidOperationError,
    MnemosyneError,
    Store,
    UnknownNodeError,
    UnknownSessionError,
)


@pytest.fixture
def session_id(store: Store) -> str:
    sid = store.create_session().id
    store.append(sid, "user", "a")
    store.append(sid, "assistant", "b")
    return sid


@pytest.mark.parametrize("role", ["", "narrator", "USER", " user"])
def test_a_role_outside_the_three_is_refused(store: Store, session_id: str, role: str) -> None:
    before = store.tree(session_id)
    with pytest.raises(InvalidOperationError, match="role must be one of") as caught:
        store.append(session_id, role, "text")
    assert repr(role) in str(caught.value)
    assert store.tree(session_id) == before


def test_content_metadata_and_delta_are_checked(store: Store, session_id: str) -> None:
    before = store.tree(session_id)
    with pytest.raises(InvalidOperationError, match="content must be text"):
        store.append(session_id, "user", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="NUL"):
        store.append(session_id, "user", "a\x00b")
    with pytest.raises(InvalidOperationError, match="NUL"):
        store.append(session_id, "user", "x", name="\x00")
    with pytest.raises(InvalidOperationError, match="metadata must be a mapping"):
        store.append(session_id, "user", "x", metadata=["no"])  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="list of operations"):
        store.append(session_id, "user", "x", delta="hp+1")  # type: ignore[arg-type]
    with pytest.raises(InvalidOperationError, match="operation 1 must be an object"):
        store.append(session_id, "user", "x", delta=[{"op": "set"}, 3])  # type: ignore[list-item]
    assert store.tree(session_id) == before


def test_unknown_ids_are_named(store: Store, session_id: str) -> None:
    with pytest.raises(UnknownSessionError, match="'abcdef0123'"):
        store.append("abcdef0123", "user", "x")
    missing = "0" * 32
    with pytest.raises(UnknownNodeError, match=missing):
        store.checkout(session_id, missing)
    with pytest.raises(UnknownNodeError, match="'123456'"):
        store.add_sibling(session_id, "123456", "x")
    with pytest.raises(InvalidOperationError, match="too short"):
        store.checkout(session_id, "abc")
    with pytest.raises(InvalidOperationError, match="not a node name"):
        store.checkout(session_id, "not-hex!")


def test_a_node_of_another_session_is_refused(store: Store, session_id: str) -> None:
    other = store.create_session().id
    foreign, _ = store.append(other, "user", "elsewhere")
    before = store.tree(session_id)
    for ref in (foreign.id, foreign.id[:8]):
        with pytest.raises(ForeignNodeError) as caught:
            store.checkout(session_id, ref)
        assert foreign.id in str(caught.value) and other in str(caught.value)
        with pytest.raises(ForeignNodeError):
            store.add_sibling(session_id, ref, "x")
        with pytest.raises(ForeignNodeError):
            store.switch_sibling(session_id, "next", ref)
        with pytest.raises(ForeignNodeError):
            store.node(session_id, ref)
    assert store.tree(session_id) == before


def test_an_ambiguous_prefix_lists_the_matches(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = iter(["5" * 32, "abcdef" + "0" * 26, "abcdef" + "1" * 26])
    monkeypatch.setattr(store_module, "new_id", lambda: next(made))
    sid = store.create_session().id
    a, _ = store.append(sid, "user", "a")
    b, _ = store.append(sid, "user", "b")
    with pytest.raises(AmbiguousIdError) as caught:
        store.checkout(sid, "abcdef")
    assert a.id in str(caught.value) and b.id in str(caught.value)
    assert store.node(sid, "abcdef1").id == b.id
    assert store.session("555555").id == sid


def test_switching_in_an_empty_session_is_refused(store: Store) -> None:
    sid = store.create_session().id
    with pytest.raises(InvalidOperationError, match="empty"):
        store.switch_sibling(sid, "next")
    with pytest.raises(InvalidOperationError, match="empty"):
        store.turn(sid)
    with pytest.raises(InvalidOperationError, match="direction"):
        store.switch_sibling(sid, "up")  # type: ignore[arg-type]


def test_the_database_refuses_a_head_of_another_session(store: Store, session_id: str) -> None:
    """Even a write that bypasses the store cannot point HEAD into another session."""
    other = store.create_session().id
    foreign, _ = store.append(other, "user", "elsewhere")
    with pytest.raises(MnemosyneError, match="refused by the database"), store.write() as conn:
        conn.execute(
            text(
                "UPDATE sessions SET head_pk = (SELECT pk FROM nodes WHERE id = :h) WHERE id = :s"
            ),
            {"h": foreign.id, "s": session_id},
        )
    with pytest.raises(MnemosyneError, match="refused by the database"), store.write() as conn:
        conn.execute(
            text(
                "UPDATE nodes SET parent_pk = (SELECT pk FROM nodes WHERE id = :p) "
                "WHERE session_pk = (SELECT pk FROM sessions WHERE id = :s)"
            ),
            {"p": foreign.id, "s": session_id},
        )
    assert store.session(session_id).head_id != foreign.id


@pytest.mark.parametrize("number", [float("nan"), float("inf"), -float("inf")])
def test_a_delta_with_a_number_json_cannot_hold_is_refused(store: Store, number: float) -> None:
    sid = store.create_session().id
    with pytest.raises(InvalidDeltaError, match="finite"):
        store.append(
            sid, "user", "x", delta=[{"op": "set", "path": "hp", "value": [1, {"a": number}]}]
        )
    assert store.tree(sid).nodes == []


def test_values_nested_deeper_than_a_file_can_take_back_are_refused(store: Store) -> None:
    """A delta value or metadata nested past jsontext's limit would be stored, exported
    and then refused by the tree file's reader: refused when it is written instead."""
    from mnemosyne.errors import InvalidOperationError
    from mnemosyne.jsontext import MAX_DEPTH

    def nested(levels: int) -> object:
        value: object = 1
        for _ in range(levels):
            value = [value]
        return value

    sid = store.create_session().id
    within = [{"op": "set", "path": "hp", "value": nested(MAX_DEPTH - 1)}]
    assert store.append(sid, "user", "x", delta=within)[0].id
    with pytest.raises(InvalidDeltaError, match="nested more than"):
        store.append(sid, "user", "y", delta=[{"op": "set", "path": "hp", "value": nested(500)}])
    with pytest.raises(InvalidOperationError, match="metadata: nested more than"):
        store.append(sid, "user", "z", metadata={"deep": nested(MAX_DEPTH)})
    assert [n.content for n in store.tree(sid).nodes] == ["x"]
