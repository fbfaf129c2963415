"""Node names (``HEAD``, ``@``, ``HEAD~N``, ``HEAD^``, ``ID~N``) wherever the store takes
a node, on SQLite and PostgreSQL; and the grammar's refusals."""

from __future__ import annotations

import pytest

from mnemosyne import InvalidOperationError, Node, Store, UnknownNodeError
from mnemosyne.edits import Checkout, Prune, Rewrite, parse
from mnemosyne.nodenames import parse as parse_name


def story(store: Store, length: int = 5) -> tuple[str, list[Node]]:
    sid = store.create_session().id
    nodes = [
        store.append(sid, "user" if i % 2 == 0 else "assistant", f"message {i}")[0]
        for i in range(length)
    ]
    return sid, nodes


def test_head_and_its_ancestors_by_name(store: Store) -> None:
    sid, nodes = story(store)
    for name, expected in [
        ("HEAD", 4),
        ("@", 4),
        ("HEAD~0", 4),
        ("HEAD~", 3),
        ("HEAD^", 3),
        ("HEAD~1", 3),
        ("@~2", 2),
        ("HEAD^^", 2),
        ("HEAD~1^~1", 1),
        ("HEAD~4", 0),
        (f"{nodes[3].id[:6]}~2", 1),
        (f"{nodes[3].id.upper()}^", 2),
    ]:
        assert store.node(sid, name).id == nodes[expected].id, name


def test_every_read_and_write_takes_a_name(store: Store) -> None:
    sid, nodes = story(store)
    store.append(sid, "assistant", "hurt", delta=[{"op": "inc", "path": "hp", "value": -5}])
    assert store.state(sid, "HEAD").variables == {"hp": -5}
    assert store.state(sid, "HEAD~1").variables == {}
    assert [n.id for n in store.projection(sid, "HEAD~3")] == [n.id for n in nodes[:3]]
    assert [n.id for n in store.children(sid, "HEAD~2")] == [nodes[4].id]
    moved, _ = store.checkout(sid, "HEAD~2")
    assert moved.id == nodes[3].id
    sibling, _ = store.add_sibling(sid, "@", "another reply")
    assert sibling.parent_id == nodes[2].id
    result, _ = store.edit(sid, Rewrite(node_id="HEAD^", content="rewritten"))
    assert result.node_id == nodes[2].id
    assert store.node(sid, nodes[2].id).content == "rewritten"


def test_head_in_a_batch_is_where_the_batch_left_it(store: Store) -> None:
    sid, nodes = story(store)
    # the checkout moves HEAD inside the transaction; the prune after it takes that HEAD
    results, session = store.edits(sid, [Checkout(node_id=nodes[2].id), Prune(node_id="HEAD")])
    assert results[1].node_id == nodes[2].id
    assert session.head_id == nodes[1].id
    assert [n.id for n in store.fragments(sid)[0]] == [n.id for n in nodes[2:]]


def test_a_name_that_leads_above_the_root_says_how_long_the_path_is(store: Store) -> None:
    sid, nodes = story(store)
    version = store.session(sid).version
    with pytest.raises(UnknownNodeError) as caught:
        store.checkout(sid, "HEAD~9")
    assert str(caught.value) == (
        f"HEAD~9: the path from the root to HEAD has 5 nodes (HEAD~4 is {nodes[0].id[:8]})"
    )
    assert caught.value.code == "unknown_node"
    with pytest.raises(UnknownNodeError, match=f"to node {nodes[2].id} has 3 nodes"):
        store.node(sid, f"{nodes[2].id[:8]}~3")
    assert store.session(sid).version == version  # refused: nothing written
    store.edit(sid, Prune(node_id=nodes[3].id))
    with pytest.raises(UnknownNodeError, match=r"from the top of its fragment to node .* 2 nodes"):
        store.node(sid, f"{nodes[4].id}~2")


def test_head_of_an_empty_session_is_no_node(store: Store) -> None:
    sid = store.create_session().id
    with pytest.raises(UnknownNodeError, match=f"HEAD: session {sid} is empty"):
        store.node(sid, "HEAD")
    with pytest.raises(UnknownNodeError, match=r"@~1: session .* is empty"):
        store.children(sid, "@~1")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("head", "'head' is not a node name: HEAD is written in capitals"),
        ("HEAD~x", "'HEAD~x' is not a node name: give a node id or a prefix"),
        ("HEAD~2 ", None),
        ("abc", "node id prefix 'abc' is too short: give at least 6 characters"),
        ("zz zz", "'zz zz' is not a node name"),
        ("9lives", "'9lives' is not a node name: '9lives' cannot be a tag"),
        ("HEAD^2", "'HEAD^2': a node has one parent, so ^2 names nothing (~2 is 2 steps up)"),
        ("a" * 33, "is not a node name"),
        ("HEAD" + "~" * 70, "is not a node name"),
    ],
)
def test_the_grammar_refuses_by_name(name: str, message: str | None) -> None:
    if message is None:
        assert parse_name(name).up == 2  # surrounding spaces are dropped
        return
    with pytest.raises(InvalidOperationError) as caught:
        parse_name(name)
    assert message in str(caught.value)


def test_an_edit_operation_takes_names_and_refuses_others_by_field() -> None:
    assert parse({"op": "checkout", "node_id": "HEAD~2"}) == Checkout(node_id="HEAD~2")
    with pytest.raises(InvalidOperationError, match="checkout: node_id"):
        parse({"op": "checkout", "node_id": "HEAD-2"})
