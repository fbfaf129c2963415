"""What the player reads while playing (clotho.cli.playscreen): the streaming writer
(clotho.cli.streamtext) at 80 and 120 columns, cells for CJK and emoji, `*actions*`
across chunks, plain text off a terminal, the footer and one message; and, through a
pseudo-terminal, the recap `clotho play` opens with, the spinner and a resize."""

from __future__ import annotations

import io
import itertools
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

from clotho.cli.playscreen import ChatScreen, footer_text, state_changes
from clotho.cli.streamtext import TextWrapper
from mnemosyne import Node, NodeAmongSiblings
from mnemosyne.state.delta import diff_states
from orchestrator.loopback import ModelServer, Reply

from .terminal import Terminal
from .test_cli import Run
from .test_play import HIT, campaign_session, model, play  # noqa: F401  (fixtures)

STORY = (
    '*Marla narrows her eyes and steps closer, her hand on the hilt of her sword.* "You '
    'have some nerve, coming back here after what happened at the northern gate," she '
    "says. The elders still talk about it: the Thornwood-Ashcombe-Vallombrosa accord, "
    "broken in one night, and the watchtower that burned until morning.\n\n"
    "She waits. *Torchlight flickers across the wet stone.*"
)
CJK = (
    "她低声说：“你好，旅行者。这里很危险，请小心。”🗡️守卫转过身去，👨‍👩‍👧 一家人在洞口等着。"
    "「快走吧」，她说。"
)
SGR = re.compile(r"\x1b\[[0-9;]*m")


def chunks(text: str, seed: int) -> list[str]:
    """``text`` cut at random places (inside words too), as a model's stream may be."""
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(text)), len(text) // 4))
    return [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]


def streamed(text: str, width: int, *, color: bool = False, seed: int = 1) -> str:
    written: list[str] = []
    wrapper = TextWrapper(written.append, lambda: width, color=color, actions=True)
    for chunk in chunks(text, seed):
        wrapper.feed(chunk)
    wrapper.end_line()
    return "".join(written)


@pytest.mark.parametrize("width", [80, 120])
def test_a_streamed_reply_wraps_at_the_width_and_never_cuts_a_word(width: int) -> None:
    lines = streamed(STORY, width).split("\n")[:-1]
    assert max(cell_len(line) for line in lines) <= width
    assert " ".join(lines).split() == STORY.split()  # every word whole, none cut
    assert "" in lines  # the paragraph break kept
    for line, following in itertools.pairwise(lines):
        if line and following:  # greedy: the next word did not fit on the line
            assert cell_len(line) + 1 + cell_len(following.split()[0]) > width


@pytest.mark.parametrize("width", [11, 18, 20])
def test_cjk_and_emoji_are_measured_in_cells_and_break_between_characters(width: int) -> None:
    lines = streamed(CJK, width).split("\n")[:-1]
    assert all(cell_len(line) <= width for line in lines), lines
    assert "".join(lines).replace(" ", "") == CJK.replace(" ", "")  # nothing lost
    assert max(cell_len(line) for line in lines) >= width - 2  # full lines, not word by word
    assert not any(line[0] in "，。”" for line in lines)  # no closing mark starts a line
    assert not any(line[-1] in "“「" for line in lines)  # no opening mark ends one
    assert any("👨‍👩‍👧" in line for line in lines)  # the family emoji whole


def test_a_word_wider_than_the_line_is_cut_at_the_width() -> None:
    word = "Thornwood-Ashcombe-Vallombrosa"
    assert streamed(f"the {word} accord", 12).split("\n")[:-1] == [
        "the",
        "Thornwood-As",
        "hcombe-Vallo",
        "mbrosa",
        "accord",
    ]


def test_actions_are_in_italics_across_chunks() -> None:
    written: list[str] = []
    wrapper = TextWrapper(written.append, lambda: 80, color=True, actions=True)
    for chunk in ["She ", "*", "smi", "les and", " wa", "ves", "*", " at you. *no", "ds*"]:
        wrapper.feed(chunk)
    wrapper.end_line()
    text = "".join(written)
    italic = re.findall(r"\x1b\[3m([^\x1b]*)\x1b\[0m", text)
    assert italic == ["*smiles", "and", "waves*", "*nods*"]
    assert SGR.sub("", text) == "She *smiles and waves* at you. *nods*\n"


def test_the_width_is_read_again_for_what_follows_a_resize() -> None:
    width = [80]
    written: list[str] = []
    wrapper = TextWrapper(written.append, lambda: width[0], color=False)
    wrapper.feed("word " * 30)
    width[0] = 30  # the terminal narrowed
    wrapper.feed("more " * 30)
    wrapper.end_line()
    lines = "".join(written).split("\n")[:-1]
    assert cell_len(lines[0]) > 30
    assert all(cell_len(line) <= 30 for line in lines[-5:])


def test_off_a_terminal_the_reply_is_the_text_as_the_model_wrote_it() -> None:
    out, err = io.StringIO(), io.StringIO()
    screen = ChatScreen(out, err, terminal=False)
    screen.expect_reply("Marla")
    screen.on_event("progress", "waiting for the model")
    for chunk in chunks(STORY + " \x1b[2J", 3):
        screen.on_event("token", chunk)
    screen.on_event("status", "updating the world state")
    screen.end_turn()
    assert out.getvalue() == STORY + " \x1b[2J\n"  # no name, no wrap, no styles
    assert err.getvalue() == "… updating the world state\n"


def test_on_a_terminal_a_reply_starts_with_its_speaker_and_control_characters_go() -> None:
    out, err = io.StringIO(), io.StringIO()
    screen = ChatScreen(out, err, terminal=True, color=False, width=lambda: 40)
    screen.expect_reply("Marla")
    screen.on_event("reasoning", "\n She distrusts him.")
    screen.on_event("token", "\n\n")  # blanks before the reply's first word: left out
    for chunk in chunks(" Marla shrugs.\x1b[2J Go away.", 2):
        screen.on_event("token", chunk)
    screen.on_event("warning", "the reply is incomplete (interrupted by the player): kept as is")
    screen.end_turn()
    assert out.getvalue() == "thinking\nShe distrusts him.\nMarla: Marla shrugs.[2J Go away.\n"
    assert err.getvalue() == (  # on a line of its own, wrapped too
        "warning: the reply is incomplete\n(interrupted by the player): kept as is\n"
    )


def node(role: str, content: str, name: str | None, **metadata: object) -> Node:
    return Node(
        id="0123456789abcdef",
        session_id="s",
        parent_id=None,
        role=role,  # type: ignore[arg-type]
        name=name,
        content=content,
        enabled=True,
        created_at="2026-01-01T00:00:00+00:00",
        metadata=dict(metadata),
    )


def test_the_footer_and_one_message() -> None:
    base = {"summary": "", "lore_timers": {}, "author_note": None}
    before = {
        **base,
        "variables": {"hp": 90, "gold": 5, "inventory": ["torch"], "affinity": {"marla": 0}},
        "active_lore_ids": [],
    }
    after = {
        **base,
        "variables": {
            "hp": 80,
            "gold": 5,
            "inventory": ["torch", "rope"],
            "affinity": {"marla": 10},
        },
        "active_lore_ids": ["cave"],  # not a variable: not in the footer
    }
    changes = state_changes(diff_states(before, after))  # as Store.diff gives it
    reply = NodeAmongSiblings(node("assistant", STORY, "Marla"), ["a", "b"], 1)
    parts = footer_text(reply, changes, prompt_tokens=3120, window=8192)
    assert " · ".join(text for text, _ in parts) == (
        "reply 2/2 · affinity.marla 0 → 10 · hp 90 → 80 · inventory +rope · "
        "3,120/8,192 tokens · 01234567"
    )
    out = io.StringIO()
    screen = ChatScreen(out, io.StringIO(), terminal=True, color=False, width=lambda: 40)
    screen.message(reply, head_id=reply.node.id, max_lines=4)
    lines = out.getvalue().split("\n")[:-1]
    assert lines[0].startswith("Marla: *Marla narrows")
    assert lines[3] == "… 9 more lines (/log shows it whole)"  # 12 in all
    assert lines[4] == "reply 2/2 · HEAD · 01234567"
    assert all(cell_len(line) <= 40 for line in lines)


def test_play_opens_with_the_last_messages_of_the_story(play: Run) -> None:  # noqa: F811
    for text in ["Hello.", "I greet the guard.", "I attack the guard.", "I attack again."]:
        play("say", text)
    with Terminal(["play"], play.env, columns=80) as term:
        term.wait_prompt()
        shown, cut = term.display(), term.wrapped()
        term.press("Ctrl+D")
        assert term.wait_exit() == 0
    opened = "\n".join(shown)
    assert "… 2 earlier messages" in opened  # 8 messages, the last 6 shown
    assert "Tom: Hello." not in opened and "Tom: I greet the guard." in opened
    assert "Tom: I attack the guard.\nMarla: Marla slashes your arm." in opened
    assert "Tom: I attack again.\nMarla: Marla slashes your arm.\nreply 1/1 · HEAD" in opened
    assert "/help for commands" in opened
    assert cut == []  # no line written past the edge (the terminal wrapped none)


#: A reply long enough to be streaming while the window is resized.
LONG_REPLY = " ".join(f"word{i}" for i in range(300))


def slow(request: dict[str, Any]) -> Reply:
    """A model that takes a second before the reply, and another before the delta; a
    long reply, a word every 10 ms, when asked to "go on"."""
    if "response_format" in request:
        return Reply(HIT, delay=1.0)
    if "go on" in request["messages"][-1]["content"]:
        return Reply(LONG_REPLY, chunk_delay=0.01)
    return Reply("Marla slashes your arm.", delay=1.0)


@pytest.fixture
def slow_play(tmp_path: Path) -> Iterator[Run]:
    with ModelServer(slow) as server:
        yield campaign_session(server, tmp_path)


def test_a_spinner_until_the_first_word_and_while_the_state_is_updated(slow_play: Run) -> None:
    with Terminal(["play"], slow_play.env, columns=80) as term:
        term.line("I attack the guard.")
        term.wait_for("waiting for the model")
        term.wait_for("updating the world state")
        shown = term.display()
        term.wait_prompt()
        played = term.display()
        term.press("Ctrl+D")
        assert term.wait_exit() == 0
    status = next(i for i, line in enumerate(shown) if "updating the world state" in line)
    assert shown[status - 1] == "Marla: Marla slashes your arm."  # the reply's line, whole
    assert not any("waiting" in line or "updating" in line for line in played)  # erased
    reply = played.index("Marla: Marla slashes your arm.")
    assert played[reply - 1].endswith("> I attack the guard.")
    assert re.fullmatch(
        r"reply 1/1 · hp 100 → 90 · [\d,]+/[\d,]+ tokens · [0-9a-f]{8}", played[reply + 1]
    )


def test_a_resize_while_a_reply_streams_wraps_what_follows_at_the_new_width(
    slow_play: Run,
) -> None:
    with Terminal(["play"], slow_play.env, columns=120) as term:
        term.line("Please go on.")
        term.wait_for("word20 ", raw=True)
        term.resize(80, 24)  # narrower, mid-reply
        term.wait_prompt()
        term.settle()
        shown, cut = term.display(), term.wrapped()
        term.press("Ctrl+D")
        assert term.wait_exit() == 0
    last = next(i for i, line in enumerate(shown) if line.endswith("word299"))
    tail = shown[last - 3 : last + 1]  # written after the resize
    assert not [i for i in cut if i >= last - 3]  # none wrapped by the terminal itself
    words = " ".join(tail).split()
    assert words == LONG_REPLY.split()[-len(words) :]  # whole words, in order


def test_no_color_on_a_terminal_is_plain_text_still_wrapped(slow_play: Run) -> None:
    env = {**slow_play.env, "NO_COLOR": "1"}
    with Terminal(["say", "I attack the guard."], env, columns=80) as term:
        term.wait_for("waiting for the model")  # the spinner, plain
        assert term.wait_exit() == 0
        raw, shown = term.raw(), term.display()
    assert not SGR.search(raw)  # no colour, no style at all
    assert shown == ["Marla: Marla slashes your arm.", shown[1]]
    assert shown[1].startswith("reply 1/1 · hp 100 → 90 · ")
