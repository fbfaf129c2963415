"""The text forms of the log and the tree (no database needed: trees built by hand),
and the wrapping they rest on, at the widths a player's terminal has."""

from __future__ import annotations

import io
import itertools
import random
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.cells import cell_len

from clotho.cli import style
from clotho.cli.cells import clean, clip, wrap
from clotho.cli.playscreen import ChatScreen
from clotho.cli.render import log_lines, node_line, print_node, tree_lines
from mnemosyne import Node, NodeAmongSiblings, Session, Tree

NOW = datetime(2026, 1, 1, tzinfo=UTC)
WIDTHS = (80, 120)
PROSE = (
    "the lantern gutters as you step into the hall of the drowned king and a cold wind "
    "carries salt and ash from the stairs below where the old guard once kept watch"
)
CJK = "她笑了笑，说：「欢迎来到龙之谷。」旅人们围着篝火坐下，火光映红了每一张疲惫的脸。"


def node(
    node_id: str,
    parent: str | None,
    content: str,
    active: str | None = None,
    *,
    role: Any = "user",
    name: str | None = None,
    enabled: bool = True,
    metadata: dict[str, Any] | None = None,
) -> Node:
    return Node(
        node_id * 8,
        "s",
        parent and parent * 8,
        role,
        name,
        content,
        enabled,
        NOW,
        metadata or {},
        [],
        active and active * 8,
    )


def tree(head: str, *nodes: Node) -> Tree:
    return Tree(session(head), list(nodes))


def session(head: str) -> Session:
    return Session("s", None, head * 8, 1, NOW, NOW)


def words(count: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(PROSE.split()) for _ in range(count))


def turns(*nodes: Node) -> list[NodeAmongSiblings]:
    return [NodeAmongSiblings(n, [n.id], 0) for n in nodes]


def assert_fits(lines: list[str], width: int) -> None:
    too_wide = [line for line in lines if cell_len(line) > width]
    assert not too_wide, too_wide


# --- wrapping -------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_wrap_breaks_between_words_and_cuts_only_a_word_wider_than_the_line(width: int) -> None:
    text = words(400)
    lines = wrap(text, width)
    assert_fits(lines, width)
    assert " ".join(lines).split() == text.split()  # every word whole, in order
    assert all(len(a) + 1 + len(b.split()[0]) > width for a, b in itertools.pairwise(lines))
    url = "https://example.org/" + "x" * (width + 30)
    assert wrap(f"see {url} now", width) == ["see", url[:width], url[width:] + " now"]


@pytest.mark.parametrize("width", WIDTHS)
def test_wrap_measures_cjk_and_emoji_by_cells_and_breaks_cjk_between_characters(
    width: int,
) -> None:
    text = (CJK + "🐉✨ ") * 12
    lines = wrap(text, width)
    assert_fits(lines, width)
    assert max(cell_len(line) for line in lines) > width - 4  # filled, not half empty
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")  # nothing lost
    closing = "，。」、"
    assert not any(line[0] in closing for line in lines)  # no line starts with a closing mark
    mixed = wrap("我叫Alice，你好 hello", 12)
    assert mixed == ["我叫Alice，", "你好 hello"]


def test_wrap_keeps_paragraphs_and_lines_that_fit() -> None:
    assert wrap("one\n\ntwo  spaced\nthree", 80) == ["one", "", "two  spaced", "three"]


def test_stored_control_characters_never_reach_the_terminal() -> None:
    text = "red \x1b[31mtext\x1b[0m\r\nbell\x07 \x1b]8;;http://x\x07link\x1b]8;;\x07\n\n\n\nend"
    assert clean(text) == "red text\nbell link\n\nend"
    assert clip("你好世界你好", 7) == "你好世…" and cell_len(clip("你好世界你好", 7)) == 7
    assert clip("你好世界你好", 8) == "你好世…"  # a wide character never halved


# --- the log --------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_the_log_shows_each_message_once_wrapped_to_the_width(width: int) -> None:
    long = "\n\n".join(words(300, seed) for seed in (1, 2))
    nodes = (
        node("a", None, "You narrate.", role="system"),
        node("b", "a", "I open the door " + "and look around " * 10, name="Alice"),
        node("c", "b", long, role="assistant", name="Seraphina"),
        node("d", "c", CJK * 6, role="assistant", name="Seraphina"),
        node("e", "d", "A name as long as a line", name="Bartholomew " * 8),
    )
    lines = log_lines(session("e"), turns(*nodes), width=width)
    assert_fits(lines, width)
    headers = [line for line in lines if line.startswith("#")]
    assert [h.split()[:2] for h in headers] == [[f"#{i}", n.id[:8]] for i, n in enumerate(nodes, 1)]
    assert headers[1].split()[2] == "Alice" and headers[2].split()[2] == "Seraphina"
    assert headers[0].split()[2] == "system"  # no name: the role
    assert headers[4].endswith("(HEAD)")
    # The long reply: every word once, whole, in order; its paragraphs kept.
    start, end = lines.index(headers[2]) + 1, lines.index(headers[3]) - 1
    body = lines[start:end]
    assert " ".join(body).split() == long.split()
    assert "" in body and len(body) > len(long) // width
    assert "".join(lines[end + 2 : lines.index(headers[4]) - 1]) == CJK * 6
    assert sum("I open the door" in line for line in lines) == 1  # said once, not twice


def test_the_log_marks_and_numbers() -> None:
    nodes = (
        node("a", None, "hello"),
        node("b", "a", "cut sh", role="assistant", metadata={"incomplete": True}),
        node("c", "b", "hidden", enabled=False),
        node("d", "c", "", role="assistant"),
    )
    views = [
        NodeAmongSiblings(nodes[0], ["a" * 8], 0),
        NodeAmongSiblings(nodes[1], ["x" * 8, "b" * 8, "y" * 8], 1),
        NodeAmongSiblings(nodes[2], ["c" * 8], 0),
        NodeAmongSiblings(nodes[3], ["d" * 8], 0),
    ]
    lines = log_lines(session("d"), views, width=80, first_number=41)
    headers = [line for line in lines if line.startswith("#")]
    assert headers == [
        "#41 aaaaaaaa user",
        "#42 bbbbbbbb assistant (incomplete) < 2/3 >",
        "#43 cccccccc user (disabled)",
        "#44 dddddddd assistant (empty) (HEAD)",
    ]
    assert lines[-1] == headers[-1]  # an empty message: its header alone
    assert log_lines(session("z"), [], width=80) == ["(empty session)"]


# --- the tree -------------------------------------------------------------------------


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
        ),
        width=120,
        all=True,
    )
    expected = [
        "* #1 aaaaaaaa",
        "* #2 bbbbbbbb",
        "|\\",
        "| * #3 dddddddd",  # the side branch, in the second column
        "| |\\",
        "| | * #4 eeeeeeee",  # its own side branch, third column
        "| * #4 ffffffff",  # d's lane goes on
        "* #3 cccccccc",  # back on the path to HEAD
    ]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), (line, start)
    assert "(HEAD)" in lines[-1]
    assert "< 1/2 >" in lines[-1] and "< 2/2 >" in lines[3]


def forked() -> Tree:
    """a -> b -> c -> g (HEAD); b has two other children: d (with a fork of its own
    under it: e, f -> h) and i (one message)."""
    return tree(
        "g",
        node("a", None, "root", "b"),
        node("b", "a", "fork", "c"),
        node("c", "b", "on the path", "g"),
        node("d", "b", "side", "f"),
        node("e", "d", "side one"),
        node("f", "d", "side two", "h"),
        node("h", "f", "deeper"),
        node("i", "b", "another side"),
        node("g", "c", "head"),
    )


def test_side_branches_fold_to_a_line_saying_what_they_hold() -> None:
    lines = tree_lines(forked(), width=80)
    assert [line[:14] for line in lines] == [
        "* #1 aaaaaaaa ",
        "* #2 bbbbbbbb ",
        "| + 2 other al",
        "* #3 cccccccc ",
        "* #4 gggggggg ",
    ]
    assert lines[2] == "| + 2 other alternatives, 5 messages"  # d, e, f, h and i
    assert "< 1/3 >" in lines[3] and lines[4].endswith("(HEAD)")


def test_depth_unfolds_side_branches_level_by_level_and_all_draws_everything() -> None:
    one = tree_lines(forked(), width=80, depth=1)
    assert [line[:16] for line in one] == [
        "* #1 aaaaaaaa us",
        "* #2 bbbbbbbb us",
        "|\\",
        "| * #3 dddddddd ",
        "| | + 1 other al",  # d's own fork, a second level: folded
        "| * #4 ffffffff ",
        "| * #5 hhhhhhhh ",
        "|\\",
        "| * #3 iiiiiiii ",
        "* #3 cccccccc us",
        "* #4 gggggggg us",
    ]
    assert one[4] == "| | + 1 other alternative, 1 message"
    every = tree_lines(forked(), width=80, all=True)
    assert every == tree_lines(forked(), width=80, depth=2)
    assert len(every) == 12 and not any("+ " in line for line in every)
    assert every[4:6] == [line for line in every if line.startswith("| |")]  # e's lane


def test_last_starts_the_graph_above_head() -> None:
    lines = tree_lines(forked(), width=80, last=2)
    assert lines[0] == "⋮ 2 earlier messages above #3"
    assert [line[:13] for line in lines[1:]] == ["* #3 cccccccc", "* #4 gggggggg"]


def test_below_head_the_path_goes_on_along_the_active_children() -> None:
    # HEAD checked out back at c: what lies below it (the story to redo) stays drawn.
    whole = forked()
    moved = Tree(session("c"), whole.nodes)
    lines = tree_lines(moved, width=80)
    assert [line[:13] for line in lines] == [
        "* #1 aaaaaaaa",
        "* #2 bbbbbbbb",
        "| + 2 other a",
        "* #3 cccccccc",
        "* #4 gggggggg",
    ]
    assert lines[3].endswith("(HEAD) < 1/3 >") and "(HEAD)" not in lines[4]


def test_several_roots_are_graphs_apart_in_their_order() -> None:
    # A first message edited as a fork: two roots, HEAD below the second. Each root is
    # a graph of its own (never one chain), a blank line between, in the roots' order.
    whole = tree(
        "q",
        node("x", None, "first greeting", "p"),
        node("p", "x", "the first story"),
        node("y", None, "second greeting", "q"),
        node("q", "y", "the edited story"),
    )
    lines = tree_lines(whole, width=80, all=True)
    expected = ["* #1 xxxxxxxx", "* #2 pppppppp", "", "* #1 yyyyyyyy", "* #2 qqqqqqqq"]
    assert len(lines) == len(expected)
    for line, start in zip(lines, expected, strict=True):
        assert line.startswith(start), (line, start)
    assert "< 1/2 >" in lines[0] and "< 2/2 >" in lines[3]
    assert "(HEAD)" in lines[4] and not any("(HEAD)" in line for line in lines[:4])
    folded = tree_lines(whole, width=80)
    assert folded[0] == "+ 1 other alternative of the first message, 2 messages"
    assert [line[:13] for line in folded[1:]] == ["* #1 yyyyyyyy", "* #2 qqqqqqqq"]


@pytest.mark.parametrize("width", WIDTHS)
def test_tree_labels_fill_the_width_with_their_marks_whole(width: int) -> None:
    whole = tree(
        "c",
        node("a", None, words(200), "b", role="system"),
        node("b", "a", CJK * 5, "c", role="assistant", name="Seraphina"),
        node("c", "b", words(200), role="assistant", metadata={"incomplete": True}),
        node("d", "b", "x" * 500, enabled=False, name="Bartholomew " * 8),
    )
    for lines in (tree_lines(whole, width=width), tree_lines(whole, width=width, all=True)):
        assert_fits(lines, width)
        assert all(cell_len(line) >= width - 2 for line in lines if line.startswith("*"))
    drawn = tree_lines(whole, width=width, all=True)
    assert drawn[0].startswith("* #1 aaaaaaaa system: " + words(200)[:20])
    assert drawn[0].endswith("…")
    assert drawn[1].startswith("* #2 bbbbbbbb Seraphina: 她笑了笑")
    assert drawn[3].startswith("| * #3 dddddddd Bartholomew") and drawn[3].endswith(
        "… (disabled) < 2/2 >"
    )
    assert drawn[4].endswith("… (incomplete) (HEAD) < 1/2 >")


@pytest.mark.parametrize("width", WIDTHS)
def test_deep_nesting_keeps_every_line_within_the_width(width: int) -> None:
    # Each fork's side branch forks again: with --all, lanes pile up to the right until
    # the deeper ones are drawn as a number ([n]).
    nodes = [node("c0", None, "start", "l0")]
    for i in range(1, 60):  # c{i} is the side branch of c{i-1}, beside its leaf l{i-1}
        nodes.append(node(f"c{i}", f"c{i - 1}", words(30, i), f"l{i}"))
    nodes += [node(f"l{i}", f"c{i}", words(5, i)) for i in range(60)]
    lines = tree_lines(tree("l0", *nodes), width=width, all=True)
    assert_fits(lines, width)
    assert len(lines) >= 2 * 60 and any("] * #" in line for line in lines)


def test_an_empty_session() -> None:
    assert tree_lines(tree("z"), width=80) == ["(empty session)"]


def test_show_prints_a_stored_text_wrapped_and_without_escape_sequences(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    shown = node("a", None, PROSE + "\x1b[2J\x1b]0;pwned\x07 end", name="Mal\x1b[31mlory")
    print_node(NodeAmongSiblings(shown, [shown], 0), head_id=None)
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "pwned" not in printed
    assert "Mallory:" in node_line(shown, head_id=None)
    assert "role user (Mallory)" in " ".join(printed.split())
    body = printed.split("\n\n", 1)[1].splitlines()
    assert max(cell_len(line) for line in body) <= 40
    assert " ".join(body) == PROSE + " end"


# --- a change of scene ----------------------------------------------------------------


def _scene(content: str, *, enabled: bool = True) -> Node:
    return node(
        "b",
        "a",
        content,
        role="system",
        enabled=enabled,
        metadata={"scene": {"leaves": "Bram"}},
    )


def _codes(text: str) -> set[str]:
    """The style codes of the escape sequences in ``text``."""
    return {code for codes in re.findall(r"\x1b\[([\d;]*)m", text) for code in codes.split(";")}


def test_a_change_of_scene_reads_alike_in_every_view_a_disabled_one_struck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(style, "COLOR", True)
    first = node("a", None, "We camp here.")
    for enabled in (True, False):
        scene = _scene("Bram  leaves\nthe scene.", enabled=enabled)
        views = {
            "node": [node_line(scene, head_id=None)],
            "log": log_lines(session("b"), turns(first, scene), width=80)[-1:],
            "tree": tree_lines(tree("b", first, scene), width=80, all=True)[1:],
        }
        screen = io.StringIO()
        ChatScreen(screen, io.StringIO(), terminal=True, color=True).message(
            NodeAmongSiblings(scene, [scene.id], 0), details=False
        )
        views["play"] = screen.getvalue().splitlines()
        for view, lines in views.items():
            line = lines[0]  # (a disabled one's footer follows it in play)
            plain = re.sub(r"\x1b\[[\d;]*m", "", line)
            assert "~ Bram leaves the scene." in plain, view  # one line, spaces collapsed
            assert {"2", "3"} <= _codes(line), view  # dim, italic: narration
            assert ("9" in _codes(line)) is not enabled, view  # struck when disabled


def test_a_long_change_of_scene_is_cut_to_one_line() -> None:
    scene = _scene("Bram leaves the scene, " + words(3000))
    line = node_line(scene, head_id=None, width=40)
    assert line.startswith("bbbbbbbb ~ Bram leaves the scene,") and line.endswith("…")
    assert cell_len(line) <= len("bbbbbbbb ") + 40
    (label,) = tree_lines(tree("b", node("a", None, "We camp."), scene), width=60)[1:]
    assert cell_len(label) <= 60 and label.endswith("… (HEAD)")
