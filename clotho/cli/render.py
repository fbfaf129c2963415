"""Text output of the CLI: nodes, the projection (the log), the tree as a graph.

A message's number is its depth on its path (a root is #1): the log and the tree show
the same number for the same message, so a player can say "message 42". A change of
scene (``Bram leaves the scene.``, :func:`clotho.cast.scene_change`) is narration: set
apart as ``~ Bram leaves the scene.``, dim and in italics, with no speaker. Marks:
``(empty)``, ``(incomplete)`` (a reply cut short), ``(disabled)`` (out of what the
model is sent), ``(HEAD)``, and ``< 2/3 >`` (its place among its alternatives).

The functions return styled lines (:func:`clotho.cli.style.paint`) of at most the
width they are given, measured in cells (:mod:`clotho.cli.cells`); they print nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from clotho.cast import SCENE
from mnemosyne import Node, NodeAmongSiblings, Session, Store, Tree
from mnemosyne.refs import RefMark

from .cells import MIN_WIDTH, cell_len, clean, clip, terminal_size, wrap
from .style import out, paint

__all__ = [
    "alternatives",
    "is_scene",
    "log_lines",
    "log_window",
    "node_line",
    "print_node",
    "print_sessions",
    "print_tree",
    "scene_label",
    "short",
    "tree_lines",
]

SHORT = 8
ROLE_STYLE = {"system": "magenta", "user": "green", "assistant": "cyan"}
NAME_CELLS = 24  # a speaker's name longer than this is cut in headers and labels
#: What a change of scene starts with where a message has its speaker.
SCENE_MARK = "~"
#: How a change of scene is painted: narration, set apart.
SCENE_STYLE = ("dim", "italic")


def short(node_id: str | None) -> str:
    return node_id[:SHORT] if node_id else "-"


def is_scene(node: Node) -> bool:
    """Whether a node is a change of scene (:func:`clotho.cast.scene_change`)."""
    return node.role == "system" and isinstance(node.metadata.get(SCENE), dict)


class SceneLabel(NamedTuple):
    """A change of scene as narration: its text and the styles to paint it in."""

    text: str
    """``~ Bram leaves the scene.``: on one line, spaces collapsed."""
    styles: tuple[str, ...]
    """Dim and italic; struck through too when it is disabled."""

    def painted(self) -> str:
        """The text in its styles (:func:`clotho.cli.style.paint`)."""
        return paint(self.text, *self.styles)


def scene_label(node: Node, width: int | None = None) -> SceneLabel | None:
    """A change of scene as every view shows it (``~ Bram leaves the scene.``), set
    apart from the characters' lines; cut to ``width`` cells when given (only the start
    of a long text read, as :func:`_first_line` does), whole when not (for a view that
    wraps it). ``None`` for any other node."""
    if not is_scene(node):
        return None
    lead = f"{SCENE_MARK} "
    if width is None:
        text = " ".join(clean(node.content).split())
    else:
        text = _first_line(node.content, width - len(lead))
    styles = ("strike", *SCENE_STYLE) if not node.enabled else SCENE_STYLE
    return SceneLabel(lead + text, styles)


def _first_line(text: str, width: int) -> str:
    """The start of ``text`` on one line (spaces collapsed), cut to ``width`` cells."""
    if width <= 0:
        return ""
    limit = width * 2 + 80  # enough to fill the width: a 4,000-character text is not
    line = " ".join(clean(text[:limit]).split())  # cleaned whole for one line
    if len(text) <= limit:
        return clip(line, width)
    line = clip(line, width - 1)
    return line if line.endswith("…") else line + "…"


def alternatives(turn: NodeAmongSiblings) -> str:
    """``< 2/5 >`` for a node with alternatives, else nothing."""
    if len(turn.siblings) < 2:
        return ""
    return f"< {turn.index + 1}/{len(turn.siblings)} >"


def node_line(node: Node, *, head_id: str | None, alternatives: str = "", width: int = 72) -> str:
    """``1a2b3c4d user Alice: Hello…`` with its marks (:func:`_marks`): ``(empty)`` (a
    reply with no text, which older versions stored when interrupted before its first
    word; the model is not sent it), ``(incomplete)`` (a reply cut short),
    ``(disabled)``, ``(HEAD)``, ``< i/n >``. ``width``: the cells the text may take.
    A change of scene: ``1a2b3c4d ~ Bram leaves the scene.``, as narration."""
    marks = "".join(" " + mark for _, mark in _marks(node, head_id, alternatives))
    scene = scene_label(node, width)
    if scene is not None:
        return f"{paint(short(node.id), 'dim')} {scene.painted()}" + marks
    speaker = f" {_speaker(node.name)}:" if node.name else ":"
    text = _first_line(node.content, width)
    if not node.enabled:
        text = paint(text, "dim", "strike")
    role = paint(node.role, ROLE_STYLE[node.role])
    return f"{paint(short(node.id), 'dim')} {role}{speaker} {text}".rstrip() + marks


def _speaker(name: str) -> str:
    """A stored speaker's name as printed: on one line, no control character."""
    return " ".join(clean(name).split())


#: A node's tags and branches, each ``(name, kind)``, by node id (:func:`names_by_node`).
Names = Mapping[str, Sequence[tuple[str, str]]]


def names_by_node(refs: Iterable[RefMark]) -> dict[str, list[tuple[str, str]]]:
    """The session's tags and branches (:func:`mnemosyne.refs.marked`) by node id, for
    the marks of the log and the tree."""
    out: dict[str, list[tuple[str, str]]] = {}
    for ref in refs:
        out.setdefault(ref.node_id, []).append((ref.name, ref.kind))
    return out


def names_mark(names: Sequence[tuple[str, str]]) -> str:
    """``(main, tag: first-meeting)``: a node's names as git decorates a commit
    (branches by name, then tags)."""
    ordered = sorted(names, key=lambda item: (item[1] != "branch", item[0]))
    shown = [name if kind == "branch" else f"tag: {name}" for name, kind in ordered]
    return f"({', '.join(shown)})"


def _marks(
    node: Node, head_id: str | None, alternatives: str, names: Names | None = None
) -> list[tuple[str, str]]:
    """A node's marks, each ``(plain, painted)``."""
    marks: list[tuple[str, str]] = []
    if not node.content.strip():
        marks.append(("(empty)", paint("(empty)", "dim")))
    if node.metadata.get("incomplete"):
        marks.append(("(incomplete)", paint("(incomplete)", "yellow")))
    if not node.enabled:
        marks.append(("(disabled)", paint("(disabled)", "dim")))
    if node.id == head_id:
        marks.append(("(HEAD)", paint("(HEAD)", "bold", "yellow")))
    if names and node.id in names:
        mark = names_mark(names[node.id])
        marks.append((mark, paint(mark, "bold", "green")))
    if alternatives:
        marks.append((alternatives, paint(alternatives, "blue")))
    return marks


def _header(
    node: Node, number: int, width: int, *, reserve: int = 0, colon: str = ""
) -> tuple[str, int]:
    """``#12 1a2b3c4d Seraphina`` (the name, else the role), and the cells it takes: the
    name cut so that the header leaves ``reserve`` of ``width`` cells free."""
    lead = len(f"#{number} ") + SHORT + 1
    room = max(min(NAME_CELLS, width - lead - len(colon) - reserve), 1)
    speaker = clip(_speaker(node.name or node.role), room) + colon
    painted = (
        f"{paint(f'#{number}', 'bold')} {paint(short(node.id), 'dim')} "
        f"{paint(speaker, ROLE_STYLE.get(node.role, 'bold'), 'bold')}"
    )
    return painted, lead + cell_len(speaker)


def _cells(marks: list[tuple[str, str]]) -> int:
    """The cells ``marks`` take, a space before each."""
    return sum(len(plain) + 1 for plain, _ in marks)


# --- the log ---------------------------------------------------------------------


def log_window(
    store: Store, session_id: str, last: int | None = None, *, disabled: bool = True
) -> tuple[Session, list[NodeAmongSiblings], int]:
    """What a log shows: the path root → HEAD, its disabled messages too unless
    ``disabled`` is false (the last ``last`` of them, ``None``: all), and the number of
    the first (its depth)."""
    if last is None:
        session, turns = store.projection_turns(session_id, disabled=disabled)
        return session, list(turns), 1
    window = store.projection_page(session_id, limit=last, disabled=disabled)
    return window.session, list(window.turns), window.earlier + 1


def log_lines(
    session: Session,
    turns: Sequence[NodeAmongSiblings],
    *,
    width: int,
    first_number: int = 1,
    names: Names | None = None,
) -> list[str]:
    """The projection, one message after another, each once: a header (its number,
    short id, speaker, marks) then its text word-wrapped to ``width`` cells, paragraphs
    kept, a blank line between messages. ``first_number``: the number of ``turns[0]``
    (its depth on the path: 1 unless the log starts further down). ``names``: the
    tags and branches to mark (:func:`names_by_node`)."""
    if not turns:
        return [paint("(empty session)", "dim")]
    width = max(width, MIN_WIDTH)
    lines: list[str] = []
    for number, turn in enumerate(turns, first_number):
        node = turn.node
        if lines:
            lines.append("")
        marks = _marks(node, session.head_id, alternatives(turn), names)
        scene = scene_label(node)
        if scene is not None:  # narration: set apart, no speaker
            lead = f"{paint(f'#{number}', 'bold')} {paint(short(node.id), 'dim')} "
            room = width - len(f"#{number} ") - SHORT - 1 - _cells(marks)
            told = wrap(scene.text, max(room, MIN_WIDTH // 2))
            lines.append(lead + paint(told[0], *scene.styles))
            lines.extend(paint(line, *scene.styles) for line in told[1:])
            if marks:
                lines[-1] += "".join(" " + mark for _, mark in marks)
            continue
        header, _ = _header(node, number, width, reserve=_cells(marks))
        lines.append(header + "".join(" " + mark for _, mark in marks))
        text = clean(node.content)
        body = wrap(text, width) if text.strip() else []  # (empty) said in the header
        if not node.enabled:
            body = [paint(line, "dim") for line in body]
        lines.extend(body)
    return lines


# --- the tree --------------------------------------------------------------------


def tree_lines(
    tree: Tree,
    *,
    width: int,
    depth: int = 0,
    all: bool = False,
    last: int | None = None,
    names: Names | None = None,
) -> list[str]:
    """The tree as a graph in the manner of ``git log --graph``, root at the top, each
    line at most ``width`` cells.

    The path to HEAD (and on below HEAD along the active children) runs down the left
    column and is drawn whole. Each other alternative is a side branch: it opens a lane
    to the right (``|\\``) just below its fork and is drawn whole before the path goes
    on, or is folded into one line saying what it holds (``| + 2 other alternatives,
    14 messages``). ``depth``: side branches are unfolded that many levels (a side
    branch of a side branch is the second level; default 0: all folded); ``all``:
    everything drawn. Several roots (a first message edited as a fork) are several
    graphs in their order, a blank line between them, the other roots folded as side
    branches are. ``last``: the graph starts that many messages above HEAD (HEAD
    included), after a line saying how many are above. ``names``: the tags and branches
    to mark (:func:`names_by_node`).
    """
    if not tree.nodes:
        return [paint("(empty session)", "dim")]
    return _Graph(tree, width, math.inf if all else depth, names).lines(last)


def print_tree(tree: Tree) -> None:
    """The whole tree, every branch drawn, at the terminal's width."""
    out(*tree_lines(tree, width=terminal_size().columns, all=True))


class _Graph:
    """The drawing of one tree (see :func:`tree_lines`)."""

    def __init__(self, tree: Tree, width: int, unfold: float, names: Names | None = None) -> None:
        self.names = names
        self.width = max(width, MIN_WIDTH)
        self.unfold = unfold
        self.head = tree.head_id
        self.kids = tree.children()
        self.path = tree.path()  # HEAD first
        self.on_path = {node.id for node in self.path}
        # Depths and subtree sizes, in one pass each (parents come before children).
        self.number: dict[str, int] = {}
        for node in tree.nodes:
            parent = node.parent_id
            self.number[node.id] = self.number[parent] + 1 if parent in self.number else 1
        self.size: dict[str, int] = dict.fromkeys(self.number, 1)
        for node in reversed(tree.nodes):
            if node.parent_id in self.size:
                self.size[node.parent_id] += self.size[node.id]

    def lines(self, last: int | None) -> list[str]:
        roots = self.kids.get(None, [])
        if last is not None and self.path:
            top = self.path[min(last, len(self.path)) - 1]
            siblings = self.kids.get(top.parent_id, [])
            above = self.number[top.id] - 1
            lines = []
            if above:
                note = f"⋮ {above:,} earlier message{'s' * (above != 1)} above #{above + 1}"
                lines.append(paint(clip(note, self.width), "dim"))
            return lines + self._draw(top, _alt(top, siblings), 0)
        trunk = _trunk_last(roots, self.on_path)[-1]
        if self.unfold < 1:
            lines = self._folded([r for r in roots if r is not trunk], 0, top=True)
            return lines + self._draw(trunk, _alt(trunk, roots), 0)
        lines = []
        for root in roots:
            if lines:
                lines.append("")
            lines.extend(self._draw(root, _alt(root, roots), 0 if root is trunk else 1))
        return lines

    def _draw(self, top: Node, alt: str, level: int) -> list[str]:
        """The graph from ``top`` down; ``level``: how many forks off the path it is."""
        lines: list[str] = []
        # Entries: (node, column, open a lane first, its "< i/n >", its level).
        stack = [(top, 0, False, alt, level)]
        while stack:
            node, column, fork, alt, level = stack.pop()
            if fork:
                lines.append(self._lanes(column - 1) + "|\\")
            prefix = self._lanes(column) + "* "
            lines.append(prefix + self._label(node, alt, self.width - len(prefix)))
            children = self.kids.get(node.id)
            if not children:
                continue
            ordered = _trunk_last(children, self.on_path, node.active_child_id)
            trunk, sides = ordered[-1], ordered[:-1]
            # Pushed in reverse: the sides pop first (each in the next column), the trunk last.
            stack.append((trunk, column, False, _alt(trunk, children), level))
            if level + 1 > self.unfold:
                lines.extend(self._folded(sides, column + 1))
            else:
                stack.extend(
                    (side, column + 1, True, _alt(side, children), level + 1)
                    for side in reversed(sides)
                )
        return lines

    def _folded(self, sides: Sequence[Node], lanes: int, *, top: bool = False) -> list[str]:
        """``| + 2 other alternatives, 14 messages``: side branches folded (none: no line)."""
        if not sides:
            return []
        messages = sum(self.size[side.id] for side in sides)
        alt = "alternative" if len(sides) == 1 else "alternatives"
        where = " of the first message" if top else ""
        text = f"+ {len(sides)} other {alt}{where}, {messages:,} message{'s' * (messages != 1)}"
        prefix = self._lanes(lanes)
        return [prefix + paint(clip(text, self.width - len(prefix)), "dim")]

    def _lanes(self, count: int) -> str:
        """``| | `` for ``count`` open lanes; past half the width, the deeper ones as
        a number (``| | [7] ``), so that the label keeps room."""
        most = max((self.width // 2 - 6) // 2, 1)
        if count <= most:
            return "| " * count
        return "| " * (most - 2) + f"[{count - most + 2}] "

    def _label(self, node: Node, alt: str, width: int) -> str:
        """``#12 1a2b3c4d Seraphina: text… (HEAD) < 2/3 >`` in ``width`` cells."""
        marks = _marks(node, self.head, alt, self.names)
        number = self.number[node.id]
        lead = len(f"#{number} ") + SHORT + 1
        scene = scene_label(node, max(width - lead - _cells(marks), 1))
        if scene is not None:  # ``#12 1a2b3c4d ~ Bram leaves the scene.``
            told = scene.painted()
            return f"{paint(f'#{number}', 'bold')} {paint(short(node.id), 'dim')} {told}" + "".join(
                " " + mark for _, mark in marks
            )
        reserve = _cells(marks) + min(12, width // 4)  # the text keeps some room
        header, used = _header(node, number, width, reserve=reserve, colon=":")
        used += _cells(marks)
        text = _first_line(node.content, width - used - 1)
        if text:
            header += " " + (paint(text, "dim") if not node.enabled else text)
        return header + "".join(" " + mark for _, mark in marks)


def _alt(node: Node, siblings: Sequence[Node]) -> str:
    if len(siblings) < 2:
        return ""
    return f"< {[s.id for s in siblings].index(node.id) + 1}/{len(siblings)} >"


def _trunk_last(nodes: Sequence[Node], on_path: set[str], active: str | None = None) -> list[Node]:
    trunk = next((n for n in nodes if n.id in on_path), None)
    if trunk is None:
        trunk = next((n for n in nodes if n.id == active), nodes[-1])
    return [n for n in nodes if n is not trunk] + [trunk]


# --- other commands' text ----------------------------------------------------------


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


def print_node(turn: NodeAmongSiblings, head_id: str | None) -> None:
    node = turn.node
    rows = [
        ("id", node.id),
        ("parent", node.parent_id or "(root)"),
        ("role", node.role + (f" ({_speaker(node.name)})" if node.name else "")),
        ("created", node.created_at.isoformat(timespec="seconds")),
        ("enabled", "yes" if node.enabled else "no"),
        ("alternative", f"< {turn.index + 1}/{len(turn.siblings)} >"),
    ]
    if node.id == head_id:
        rows.append(("HEAD", "yes"))
    scene = scene_label(node, max(terminal_size().columns - 12, MIN_WIDTH // 2))
    if scene is not None:
        rows.append(("scene", scene.painted()))
    if node.metadata:
        rows.append(("metadata", json.dumps(node.metadata, ensure_ascii=False)))
    if node.delta:
        rows.append(("delta", json.dumps(node.delta, ensure_ascii=False)))
    body = wrap(clean(node.content), terminal_size().columns)
    out(*(f"{paint(f'{label:>11}', 'dim')} {value}" for label, value in rows), "", *body)
