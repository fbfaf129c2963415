"""The conformance suite of the conversation tree, run on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from mnemosyne import (
    ConflictError,
    InvalidOperationError,
    Node,
    Store,
    UnknownSessionError,
)
from mnemosyne.edits import Toggle


def ids(nodes: list[Node]) -> list[str]:
    return [n.id for n in nodes]


def chain(store: Store, session_id: str, *texts: str) -> list[Node]:
    """Append alternating user/assistant nodes; return them."""
    out = []
    for i, text in enumerate(texts):
        node, _ = store.append(session_id, "user" if i % 2 == 0 else "assistant", text)
        out.append(node)
    return out


def test_a_new_session_is_empty_at_version_zero(store: Store) -> None:
    session = store.create_session(title="Goblins", metadata={"tag": "x"})
    assert (session.head_id, session.version, session.title) == (None, 0, "Goblins")
    again = store.session(session.id)
    assert again == session
    assert store.projection(session.id) == []
    assert store.children(session.id) == []
    assert store.tree(session.id).nodes == []
    assert session.id in [s.id for s in store.sessions()]


def test_append_grows_the_path_and_moves_head(store: Store) -> None:
    sid = store.create_session().id
    root, s1 = store.append(sid, "system", "You are the narrator.")
    user, s2 = store.append(sid, "user", "Hello", name="Alice", metadata={"k": 1})
    reply, s3 = store.append(
        sid, "assistant", "Hi!", delta=[{"op": "inc", "path": "hp", "value": 1}]
    )
    assert (s1.version, s2.version, s3.version) == (1, 2, 3)
    assert s3.head_id == reply.id
    assert root.parent_id is None and user.parent_id == root.id and reply.parent_id == user.id
    assert ids(store.projection(sid)) == [root.id, user.id, reply.id]
    stored = store.node(sid, user.id)
    assert (stored.name, stored.metadata, stored.role, stored.content) == (
        "Alice",
        {"k": 1},
        "user",
        "Hello",
    )
    assert store.node(sid, reply.id).delta == [{"op": "inc", "path": "hp", "value": 1}]
    assert store.node(sid, root.id).active_child_id == user.id
    assert stored.created_at.tzinfo is not None


def test_disabled_nodes_leave_the_projection_but_not_the_path(store: Store) -> None:
    sid = store.create_session().id
    a, _ = store.append(sid, "user", "a")
    hidden, _ = store.append(sid, "system", "hidden", enabled=False)
    c, _ = store.append(sid, "assistant", "c")
    assert ids(store.projection(sid)) == [a.id, c.id]
    assert ids(store.projection(sid, at=hidden.id)) == [a.id]
    store.checkout(sid, hidden.id)
    assert store.session(sid).head_id == hidden.id
    assert ids(store.projection(sid)) == [a.id]


def test_a_sibling_keeps_the_other_replies(store: Store) -> None:
    sid = store.create_session().id
    user, first = chain(store, sid, "I attack", "You miss")
    second, session = store.add_sibling(sid, first.id, "You hit")
    assert (second.parent_id, second.role) == (user.id, "assistant")
    assert session.head_id == second.id
    assert ids(store.children(sid, user.id)) == [first.id, second.id]
    assert ids(store.projection(sid)) == [user.id, second.id]
    assert store.node(sid, user.id).active_child_id == second.id
    turn = store.turn(sid)
    assert (turn.node.id, turn.siblings, turn.index) == (second.id, [first.id, second.id], 1)
    assert store.turn(sid, first.id).index == 0


def test_roots_are_each_others_siblings(store: Store) -> None:
    sid = store.create_session().id
    greeting, _ = store.append(sid, "assistant", "Welcome, traveller.")
    alternate, _ = store.add_sibling(sid, greeting.id, "The tavern is loud tonight.")
    assert alternate.parent_id is None
    assert ids(store.children(sid)) == [greeting.id, alternate.id]
    assert store.turn(sid).siblings == [greeting.id, alternate.id]
    back, _ = store.switch_sibling(sid, "prev")
    assert back.id == greeting.id
    assert ids(store.projection(sid)) == [greeting.id]


def test_switching_lands_on_the_leaf_left_there(store: Store) -> None:
    sid = store.create_session().id
    user, first = chain(store, sid, "Open the door", "It creaks open")
    deeper, _ = store.append(sid, "user", "I go in")
    deepest, _ = store.append(sid, "assistant", "Darkness")
    second, _ = store.add_sibling(sid, first.id, "It is locked")
    # prev from the second reply: back to the first, and down to where we were.
    node, session = store.switch_sibling(sid, "prev")
    assert node.id == deepest.id == session.head_id
    assert ids(store.projection(sid)) == [user.id, first.id, deeper.id, deepest.id]
    # next of a node that is not HEAD: its next sibling (a leaf itself).
    node, _ = store.switch_sibling(sid, "next", first.id)
    assert node.id == second.id
    with pytest.raises(InvalidOperationError, match="last of its 2"):
        store.switch_sibling(sid, "next")
    with pytest.raises(InvalidOperationError, match="first of its 2"):
        store.switch_sibling(sid, "prev", first.id)


def test_checkout_repoints_the_path_above(store: Store) -> None:
    sid = store.create_session().id
    user, first = chain(store, sid, "q", "a1")
    second, _ = store.add_sibling(sid, first.id, "a2")
    under_second, _ = store.append(sid, "user", "q2")
    node, session = store.checkout(sid, first.id[:8])
    assert node.id == first.id == session.head_id
    assert store.node(sid, user.id).active_child_id == first.id
    # Switching forward again follows the pointers of the second branch down.
    node, _ = store.switch_sibling(sid, "next")
    assert node.id == under_second.id
    assert second.id in ids(store.projection(sid))


def test_tree_lists_parents_before_children_in_sibling_order(store: Store) -> None:
    sid = store.create_session().id
    a, b = chain(store, sid, "a", "b")
    b2, _ = store.add_sibling(sid, b.id, "b2")
    c, _ = store.append(sid, "user", "c")
    b3, _ = store.add_sibling(sid, b.id, "b3")
    tree = store.tree(sid)
    assert tree.head_id == b3.id
    assert ids(tree.nodes) == [a.id, b.id, b2.id, c.id, b3.id]
    assert [n.id for n in tree.children()[a.id]] == [b.id, b2.id, b3.id]


def test_a_transaction_is_all_or_nothing(store: Store) -> None:
    sid = store.create_session().id
    chain(store, sid, "a", "b")
    before = store.tree(sid)
    with pytest.raises(InvalidOperationError), store.transaction(sid) as tx:
        tx.append("user", "c")
        tx.append("assistant", "d")
        tx.append("narrator", "refused")
    assert store.tree(sid) == before
    with pytest.raises(RuntimeError), store.transaction(sid) as tx:
        tx.append("user", "e")
        raise RuntimeError("the caller failed half-way")
    assert store.tree(sid) == before


def test_one_transaction_bumps_the_version_once(store: Store) -> None:
    sid = store.create_session().id
    with store.transaction(sid, expected_version=0) as tx:
        a = tx.append("user", "a")
        b = tx.append("assistant", "b")
        assert tx.head_id == b.id
        assert ids(tx.projection()) == [a.id, b.id]
    assert tx.session.version == 1
    assert tx.session.head_id == b.id


def test_a_stale_write_is_refused_and_changes_nothing(store: Store) -> None:
    sid = store.create_session().id
    a, session = store.append(sid, "user", "a")
    store.append(sid, "assistant", "b", expected_version=session.version)
    before = store.tree(sid)
    stale = session.version
    with pytest.raises(ConflictError) as caught:
        store.append(sid, "user", "c", expected_version=stale)
    assert caught.value.current_version == stale + 1
    assert sid in str(caught.value)
    for write in (
        lambda: store.add_sibling(sid, a.id, "x", expected_version=stale),
        lambda: store.checkout(sid, a.id, expected_version=stale),
        lambda: store.switch_sibling(sid, "next", expected_version=stale),
    ):
        with pytest.raises(ConflictError):
            write()
    assert store.tree(sid) == before


def test_preferences_are_replaced(store: Store) -> None:
    assert store.preference("last_session_id") is None
    store.set_preference("last_session_id", "a")
    store.set_preference("last_session_id", "b")
    assert store.preference("last_session_id") == "b"


def test_node_counts(store: Store) -> None:
    one, two = store.create_session().id, store.create_session().id
    chain(store, one, "a", "b", "c")
    chain(store, two, "a")
    counts = store.node_counts()
    assert (counts[one], counts[two]) == (3, 1)


def test_sessions_resolve_by_prefix(store: Store) -> None:
    session = store.create_session(title="x")
    assert store.session(session.id[:6]).id == session.id
    missing = "ffffff" if not session.id.startswith("ffffff") else "eeeeee"
    with pytest.raises(UnknownSessionError, match=missing):
        store.session(missing)


def test_messages_are_the_projection_as_the_model_sees_it(store: Store) -> None:
    sid = store.create_session().id
    assert store.messages(sid) == []
    store.append(sid, "system", "You narrate.")
    store.append(sid, "user", "psst", name="Alice", enabled=False)
    user, _ = store.append(sid, "user", "Hello", name="Alice")
    store.append(sid, "assistant", "Hi", metadata={"model": "m"})
    expected = [(n.id, n.role, n.name, n.content) for n in store.projection(sid)]
    assert [(m.id, m.role, m.name, m.content) for m in store.messages(sid)] == expected
    assert len(expected) == 3
    assert [m.content for m in store.messages(sid, at=user.id[:6])] == ["You narrate.", "Hello"]


def test_projection_turns_carry_the_alternatives_of_every_message(store: Store) -> None:
    sid = store.create_session().id
    greeting, _ = store.append(sid, "assistant", "Welcome")
    other_greeting, _ = store.add_sibling(sid, greeting.id, "Hello there")
    user, _ = store.append(sid, "user", "Hi")
    first, _ = store.append(sid, "assistant", "One")
    second, _ = store.add_sibling(sid, first.id, "Two")
    third, _ = store.add_sibling(sid, first.id, "Three")
    store.checkout(sid, second.id)
    session, turns = store.projection_turns(sid)
    assert session.head_id == second.id
    assert [(t.node.id, t.siblings, t.index) for t in turns] == [
        (other_greeting.id, [greeting.id, other_greeting.id], 1),
        (user.id, [user.id], 0),
        (second.id, [first.id, second.id, third.id], 1),
    ]
    empty = store.create_session().id
    assert store.projection_turns(empty)[1] == []


def test_projection_turns_can_keep_the_disabled_nodes(store: Store) -> None:
    sid = store.create_session().id
    store.append(sid, "user", "Hi")
    ooc, _ = store.append(sid, "user", "(OOC: shorter please)")
    store.append(sid, "assistant", "Sure.")
    store.edit(sid, Toggle(node_id=ooc.id))
    _, model_view = store.projection_turns(sid)
    assert [t.node.content for t in model_view] == ["Hi", "Sure."]
    _, chat_view = store.projection_turns(sid, disabled=True)
    assert [(t.node.content, t.node.enabled) for t in chat_view] == [
        ("Hi", True),
        ("(OOC: shorter please)", False),
        ("Sure.", True),
    ]


def test_node_fields_survive_the_round_trip(store: Store) -> None:
    sid = store.create_session().id
    metadata = {"model": "gpt", "usage": {"prompt": 10}, "text": "ünïcødé ✓"}
    delta = [{"op": "set", "path": "flags", "value": ["a", "b"]}]
    node, _ = store.append(sid, "assistant", "multi\nline ✓", metadata=metadata, delta=delta)
    stored = store.node(sid, node.id)
    assert stored == node
    assert (stored.metadata, stored.delta, stored.content) == (metadata, delta, "multi\nline ✓")
    assert stored.created_at == node.created_at
    assert stored.as_dict()["created_at"] == node.created_at.isoformat()
