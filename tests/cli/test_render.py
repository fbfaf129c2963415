"""The text form of the tree (no database needed: trees built by hand)."""

from __future__ import annotations

from datetime import UTC, datetime

from clotho.cli.render import tree_lines
from mnemosyne import Node, Session, Tree

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def node(node_id: str, parent: str | None, content: str, active: str | None = None) -> Node:
    return Node(
        node_id * 8,
        "s",
        parent and parent * 8,
        "user",
        None,
        content,
        True,
        NOW,
        {},
        [],
        active and active * 8,
    )


def tree(head: str, *nodes: Node) -> Tree:
    session = Session("s", None, head * 8, 1, NOW, NOW)
    return Tree(session, list(nodes))


def test_side_branches_open_lanes_and_the_path_stays_left() -> None:
    # a -> b -> c (HEAD); b has a second child d with its own fork e / f.
    lines = tree_lines(
        tree(
            "c",
            node("a", None, "root", "b"),
            node("b", "a", "fork", "c"),
            node("c", "b", "on the path"),
            node("d", "b", "side", "f"),
            node("e", "d", "side one"),
            node("f", "d", "side two"),
        )
    )
    expected = [
        "* aaaaaaaa",
        "* bbbbbbbb",
        "|\\",
        "| * dddddddd",  # the side branch, in the second column
        "| |\\",
        "| | * eeeeeeee",  # its own side branch, third column
        "| * ffffffff",  # d's lane goes on
        "* cccccccc",  # back on the path to HEAD
    ]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), (line, start)
    assert "(HEAD)" in lines[-1]
    assert "< 1/2 >" in lines[-1] and "< 2/2 >" in lines[3]


def test_several_roots_are_graphs_apart_in_their_order() -> None:
    # A first message edited as a fork: two roots, HEAD below the second. Each root is
    # a graph of its own (never one chain), a blank line between, in the roots' order.
    lines = tree_lines(
        tree(
            "q",
            node("x", None, "first greeting", "p"),
            node("p", "x", "the first story"),
            node("y", None, "second greeting", "q"),
            node("q", "y", "the edited story"),
        )
    )
    expected = ["* xxxxxxxx", "* pppppppp", "", "* yyyyyyyy", "* qqqqqqqq"]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), (line, start)
    assert "< 1/2 >" in lines[0] and "< 2/2 >" in lines[3]
    assert "(HEAD)" in lines[4] and not any("(HEAD)" in line for line in lines[:4])


def test_an_empty_session() -> None:
    assert tree_lines(tree("z")) == ["(empty session)"]
