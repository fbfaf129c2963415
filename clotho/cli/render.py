"""Text output of the CLI: nodes, the projection, the tree as a graph."""

from __future__ import annotations

import json
from collections.abc import Sequence

from mnemosyne import Node, NodeAmongSiblings, Session, Tree

from .style import out, paint

__all__ = ["node_line", "print_log", "print_node", "print_sessions", "print_tree", "tree_lines"]

SHORT = 8
ROLE_STYLE = {"system": "magenta", "user": "green", "assistant": "cyan"}


def short(node_id: str | None) -> str:
    return node_id[:SHORT] if node_id else "-"


def _first_line(text: str, width: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: max(width - 1, 1)] + "…"


def alternatives(turn: NodeAmongSiblings) -> str:
    """``< 2/5 >`` for a node with alternatives, else nothing."""
    if len(turn.siblings) < 2:
        return ""
    return f"< {turn.index + 1}/{len(turn.siblings)} >"


def node_line(node: Node, *, head_id: str | None, alternatives: str = "", width: int = 72) -> str:
    """``1a2b3c4d user Alice: Hello…`` with its markers: ``(empty)`` (a reply with no
    text, which older versions stored when interrupted before its first word; the model
    is not sent it), ``(incomplete)`` (a reply cut short), ``(disabled)``, ``(HEAD)``."""
    speaker = f" {node.name}:" if node.name else ":"
    text = _first_line(node.content, width)
    if not text:
        text = paint("(empty)", "dim")
    if node.metadata.get("incomplete"):
        text += " " + paint("(incomplete)", "yellow")
    if not node.enabled:
        text = paint(text, "dim", "strike") + " " + paint("(disabled)", "dim")
    line = (
        f"{paint(short(node.id), 'dim')} {paint(node.role, ROLE_STYLE[node.role])}{speaker} {text}"
    )
    if node.id == head_id:
        line += " " + paint("(HEAD)", "bold", "yellow")
    if alternatives:
        line += " " + paint(alternatives, "blue")
    return line


def print_sessions(
    sessions: Sequence[Session], counts: dict[str, int], current: str | None
) -> None:
    if not sessions:
        out("No sessions yet: create one with `clotho session new`.")
        return
    for s in sessions:
        mark = paint("*", "bold", "yellow") if s.id == current else " "
        title = s.title or paint("(untitled)", "dim")
        details = f"{counts.get(s.id, 0)} nodes, v{s.version}, {s.updated_at:%Y-%m-%d %H:%M}"
        out(f"{mark} {paint(short(s.id), 'dim')} {title}  {paint(details, 'dim')}")


def print_log(session: Session, turns: Sequence[NodeAmongSiblings]) -> None:
    """The projection, one message after another, long texts in full below their line."""
    if not turns:
        out(paint("(empty session)", "dim"))
        return
    lines = []
    bar = paint("│", "dim")
    for turn in turns:
        node = turn.node
        lines.append(node_line(node, head_id=session.head_id, alternatives=alternatives(turn)))
        body = node.content.strip()
        if "\n" in body or len(body) > 72:
            lines.extend(f"         {bar} {line}" for line in body.splitlines())
    out(*lines)


def print_node(turn: NodeAmongSiblings, head_id: str | None) -> None:
    node = turn.node
    rows = [
        ("id", node.id),
        ("parent", node.parent_id or "(root)"),
        ("role", node.role + (f" ({node.name})" if node.name else "")),
        ("created", node.created_at.isoformat(timespec="seconds")),
        ("enabled", "yes" if node.enabled else "no"),
        ("alternative", f"< {turn.index + 1}/{len(turn.siblings)} >"),
    ]
    if node.id == head_id:
        rows.append(("HEAD", "yes"))
    if node.metadata:
        rows.append(("metadata", json.dumps(node.metadata, ensure_ascii=False)))
    if node.delta:
        rows.append(("delta", json.dumps(node.delta, ensure_ascii=False)))
    out(*(f"{paint(f'{label:>11}', 'dim')} {value}" for label, value in rows), "", node.content)


def print_tree(tree: Tree) -> None:
    out(*tree_lines(tree))


def tree_lines(tree: Tree) -> list[str]:
    """The tree as a graph in the manner of ``git log --graph``, root at the top.

    The path to HEAD runs down the left column; every other alternative opens a
    lane to the right (``|\\``) just below its fork and is drawn whole before the
    path goes on. Several roots (a first message edited as a fork) are several
    graphs, in their order, a blank line between them: each is a story of its own.
    """
    if not tree.nodes:
        return [paint("(empty session)", "dim")]
    kids = tree.children()
    on_path = _path_ids(tree)
    roots = kids.get(None, [])
    lines: list[str] = []
    for root in roots:
        if lines:
            lines.append("")
        lines.extend(_graph(root, _alt(root, roots), kids, on_path, tree.head_id))
    return lines


def _graph(
    root: Node,
    alt: str,
    kids: dict[str | None, list[Node]],
    on_path: set[str],
    head: str | None,
) -> list[str]:
    """One root's graph (see :func:`tree_lines`)."""
    lines: list[str] = []
    # Entries: (node, column, open a lane first, its "< i/n >").
    stack = [(root, 0, False, alt)]
    while stack:
        node, column, fork, alt = stack.pop()
        if fork:
            lines.append("| " * (column - 1) + "|\\")
        lines.append("| " * column + "* " + node_line(node, head_id=head, alternatives=alt))
        children = kids.get(node.id)
        if not children:
            continue
        ordered = _trunk_last(children, on_path, node.active_child_id)
        trunk, sides = ordered[-1], ordered[:-1]
        # Pushed in reverse: the sides pop first (each in the next column), the trunk last.
        stack.append((trunk, column, False, _alt(trunk, children)))
        stack.extend((side, column + 1, True, _alt(side, children)) for side in reversed(sides))
    return lines


def _alt(node: Node, siblings: Sequence[Node]) -> str:
    if len(siblings) < 2:
        return ""
    return f"< {[s.id for s in siblings].index(node.id) + 1}/{len(siblings)} >"


def _trunk_last(nodes: Sequence[Node], on_path: set[str], active: str | None = None) -> list[Node]:
    trunk = next((n for n in nodes if n.id in on_path), None)
    if trunk is None:
        trunk = next((n for n in nodes if n.id == active), nodes[-1])
    return [n for n in nodes if n is not trunk] + [trunk]


def _path_ids(tree: Tree) -> set[str]:
    parents = {n.id: n.parent_id for n in tree.nodes}
    path: set[str] = set()
    current = tree.head_id
    while current is not None and current not in path:
        path.add(current)
        current = parents.get(current)
    return path
