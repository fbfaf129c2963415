"""A 30-turn story played in ``clotho play`` as a player plays it, on a real
pseudo-terminal (:class:`tests.cli.terminal.Terminal`): at 80 columns, then resumed at
120 and resized while playing; rerolled, swiped both ways (the swipe right on the last
reply writes one), continued, impersonated, a player's message edited as a fork, turns
undone and redone, quit and resumed. Then the store is read back with ``clotho --json``
and compared with what was played, and every screen is checked as a player reads it:
no word cut at the edge, no control character, the text of every reply there whole.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.loopback import ModelServer, Reply

from .terminal import Terminal, control_characters, displayed
from .test_cli import Run
from .test_play import campaign_session

CAMPAIGN = """
title = "The Dragon's Valley"
player = "Tom"

[character]
name = "Marla"
description = "{{char}} guides {{user}} through the valley and fears its dragon."

[state.variables.hp]
type = "int"
default = 100
min = 0
max = 100

[state.variables.gold]
type = "int"
default = 10
min = 0
"""

PLACES = [
    "Ashford", "Briarwood", "Coldwater", "Dunmere", "Eastwatch", "Fallowmere",
    "Greymoor", "Hollowell", "Ironbrook", "Juniper Hill", "Kestrel Pass", "Larkspur",
    "Millhaven", "Northreach", "Oakenshield", "Pinecrest", "Quarrymouth", "Ravenholt",
    "Stonebridge", "Thornfield", "Underhill", "Valewood", "Westmarch", "Yarrowdale",
    "Zephyr Cove", "Amberly", "Blackfen", "Cinderfall", "Driftmoor", "Emberglen",
]  # fmt: skip
#: A reply's words that hurt (hp -5) or pay (gold +5): what the scripted extraction reads.
WOUND, COINS = "wounds you", "silver coins"
CONTINUATION = "Then the wind drops, and the valley holds its breath, waiting for your answer."
IMPERSONATION = "I kneel by the stream and fill my flask, watching the far ridge."
#: What the player types for the fork of the 13th message (``/edit``).
EDITED = "I turn back towards the village instead."
#: What the player types last at 80 columns, after :data:`TYPED`.
LAST_COMMANDS = ("/help", "/log 6", "/trace", "/state", "/diff", "/quit")
#: What the player adds to the 20th reply, edited in place.
SMILE = " Marla smiles at last."
#: A line whose reply comes slowly, to be interrupted.
SLOW = "I listen to the wind for a long while."
#: The 15th line as it ends up typed: a word put in with the arrows, a CJK kept whole.
TYPED = "I quietly wait 你好"


def player_line(turn: int) -> str:
    """What the player types on a turn (1-based): plain, an *action*, CJK, two lines."""
    place = PLACES[turn - 1]
    if turn % 10 == 7:  # typed with Alt+Enter between the lines, or pasted
        return f"I climb the ridge above {place}.\nFrom there I look for the dragon."
    if turn % 7 == 0:
        return f"我们去{place}吧。 I point at the map."
    if turn % 3 == 0:
        return f"*I tighten my pack's straps* Let us go on to {place}, Marla."
    return f"I walk on towards {place} and look around."


def reply_text(key: str, take: int) -> str:
    """The game master's reply to a line (``key``: the turn's number, or a name), the
    ``take``-th time it is asked (0 the first; rerolls and swipes ask again)."""
    number = int(key) if key.isdigit() else sum(map(ord, key)) % 30 + 1
    place = PLACES[number - 1]
    kind = (number + take) % 5
    if kind == 0:  # a long paragraph, wrapped at any width
        text = (
            f"The road to {place} winds between terraced fields where the barley stands "
            f"shoulder high, and the farmers straighten their backs to watch you pass. "
            f"Beyond the last of the stone walls the land falls away into a gorge, its "
            f"sides hung with ferns and the spray of a waterfall you hear long before you "
            f"see it. Marla slows, reading the tracks in the mud with a frown: something "
            f"heavy came this way not long ago, something with claws."
        )
    elif kind == 1:  # an action, then dialogue
        text = (
            f'*Marla draws her blade and steps in front of you.* "Stay behind me, Tom. '
            f'The path to {place} narrows here, and I do not like the quiet."'
        )
    elif kind == 2:  # dialogue over two paragraphs
        text = (
            f'"{place}?" Marla laughs, short and dry. "Nobody goes there twice."\n\n'
            f'She hands you the waterskin. "Drink. We walk until the light goes."'
        )
    elif kind == 3:  # CJK and an emoji, measured by their cells
        text = (
            f"老人点点头：“龙之谷就在山的那边，{place}的人都知道。” 🐉 He points east, where "
            f"the mountains glow red in the evening light."
        )
    else:
        text = f"Marla nods towards {place}. *She says nothing more.*"
    if number % 3 == 0:
        text += f" A goblin leaps from the rocks and {WOUND} before it flees."
    if number % 4 == 0:
        text += f" In its nest you find a purse of {COINS}."
    if take:
        text = f"(Take {take + 1}.) {text}"
    return text


@dataclass
class Story:
    """The scripted model: each of the player's lines has its replies, a new one each
    time it is asked; the state extraction reads :data:`WOUND` and :data:`COINS`."""

    asked: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: dict[str, Any]) -> Reply | str:
        last = str(request["messages"][-1]["content"])
        if "response_format" in request:
            operations = []
            if WOUND in last:
                operations.append({"op": "inc", "path": "hp", "value": -5})
            if COINS in last:
                operations.append({"op": "inc", "path": "gold", "value": 5})
            return json.dumps({"operations": operations})
        if last.startswith("Summarise the story"):
            return "Tom and Marla walk the valley towards the dragon."
        if "Continue the scene" in last:
            return CONTINUATION
        if "next message in the first person" in last:
            return IMPERSONATION
        if last == SLOW:
            return Reply(" ".join(f"w{i}" for i in range(500)), chunk_delay=0.02)
        key = line_key(last)
        with self.lock:
            take = self.asked[key]
            self.asked[key] += 1
        return Reply(reply_text(key, take), chunk_delay=0.002)


def line_key(line: str) -> str:
    """Which turn a player's line is (its number), or the line itself."""
    for turn in range(1, len(PLACES) + 1):
        if player_line(turn) == line:
            return str(turn)
    return line


@pytest.fixture
def story() -> Story:
    return Story()


@pytest.fixture
def model(story: Story) -> Iterator[ModelServer]:
    with ModelServer(story) as server:
        yield server


@pytest.fixture
def cli(model: ModelServer, tmp_path: Path) -> Run:
    run = campaign_session(model, tmp_path, CAMPAIGN)
    run.env.pop("NO_COLOR")  # a player's terminal has colours
    return run


# -- what a player reads ----------------------------------------------------------------

_WORD_END = re.compile(r"[A-Za-z]+$")
_WORD_START = re.compile(r"^[A-Za-z]+")


def unreadable(lines: list[str], wrapped: list[int], texts: list[str]) -> list[str]:
    """What is wrong on a display's ``lines`` (``wrapped``: the indexes of those the
    terminal wrapped at its edge): control characters or their caret notations
    (``^[[A``), words cut at the edge, words of ``texts`` cut across two lines."""
    words = {word for text in texts for word in re.findall(r"[A-Za-z]+", text)}
    shown = "\n".join(lines)
    problems = [f"control character {c} on the display" for c in control_characters(shown)]
    for index in wrapped:
        if index + 1 < len(lines):
            end, start = _WORD_END.search(lines[index]), _WORD_START.search(lines[index + 1])
            if end and start:
                problems.append(f"a word cut at the edge: {lines[index]!r} / {lines[index + 1]!r}")
    for index, (above, below) in enumerate(itertools.pairwise(lines)):
        end, start = _WORD_END.search(above), _WORD_START.search(below)
        if index in wrapped or not (end and start):
            continue
        if end[0] + start[0] in words and start[0] not in words:
            problems.append(f"a word cut in two lines: {above!r} / {below!r}")
    return problems


def test_what_the_screen_check_sees() -> None:
    """The check of a screen fails on what a player would find wrong: a line written
    past the edge (the terminal cuts a word), a word broken by the program, an arrow
    key's echo; and passes a text wrapped at its spaces, CJK at any character."""
    texts = ["The road winds between terraced fields where the barley stands high."]
    good = "The road winds between terraced fields\nwhere the barley stands high.\n"
    good += "老人点点头：“龙之谷就在山的那边，\n人都知道。” 🐉\n"
    assert unreadable(*displayed(good, 40), texts) == []
    past_the_edge = displayed(texts[0] + "\n", 40)
    assert past_the_edge[0] == [
        "The road winds between terraced fields w",
        "here the barley stands high.",
    ]
    assert unreadable(*past_the_edge, texts) == [
        "a word cut at the edge: 'The road winds between terraced fields w' / "
        "'here the barley stands high.'"
    ]
    broken = displayed("The road winds between terraced fie\nlds where the barley\n", 40)
    assert unreadable(*broken, texts) == [
        "a word cut in two lines: 'The road winds between terraced fie' / 'lds where the barley'"
    ]
    wide = displayed("x" * 39 + "龙之谷\n", 40)  # a wide character does not fit in one column
    assert wide == (["x" * 39, "龙之谷"], [0])
    assert unreadable(*displayed("The road^[[A winds\n", 40), texts) == [
        "control character ^[ on the display"
    ]


def screen_problems(
    term: Terminal, texts: list[str], first: int = 0, end: int | None = None
) -> str:
    """:func:`unreadable` on the display's lines ``first`` to ``end``, with them; or
    nothing."""
    lines = term.display()[first:end]
    wrapped = [i - first for i in term.wrapped() if first <= i < first + len(lines)]
    problems = unreadable(lines, wrapped, texts)
    return "\n".join(problems) + "\n\nthe display:\n" + "\n".join(lines) if problems else ""


def shown_whole(shown: str, text: str) -> bool:
    """Whether a reply's text is in what the display shows, its words in order (however
    wrapped, whatever marks a speaker's name or an action)."""
    return " ".join(text.split()) in " ".join(shown.split())


# -- the story ---------------------------------------------------------------------------


@dataclass
class Played:
    """What the test played: every line and reply, to find on the screen."""

    texts: list[str] = field(default_factory=list)

    def note(self, *texts: str) -> None:
        self.texts.extend(texts)


def say(term: Terminal, played: Played, turn: int, story: Story) -> str:
    """The player types a turn's line; the reply it gets, as the model writes it."""
    line = player_line(turn)
    reply = reply_text(str(turn), story.asked[str(turn)])
    term.wait_prompt()
    if turn == 27:  # pasted: a terminal brackets a paste, and the newline stays in it
        term.send(f"\x1b[200~{line}\x1b[201~")
    else:  # a new line is Alt+Enter (Enter sends)
        for number, part in enumerate(line.split("\n")):
            if number:
                term.press("Alt+Enter")
            term.send(part)
    term.press("Enter")
    played.note(line, reply)
    return reply


FOOTER = re.compile(r"^reply \d+/\d+ · .*[\d,]+/8,192 tokens · [0-9a-f]{8}$", re.MULTILINE)


def play_at_80(cli: Run, story: Story, played: Played) -> dict[str, str]:
    """Turns 1 to 15 at 80 columns, with every kind of turn; the replies that matter
    later, by name; the screen's problems under ``"problems"``."""
    kept: dict[str, str] = {}
    with Terminal(["play"], cli.env, columns=80, rows=24) as term:
        term.wait_prompt()  # the first line typed with Ctrl+L (clear the screen) in it
        term.send(player_line(1)[:10])
        term.press("Ctrl+L")
        term.send(player_line(1)[10:])
        term.press("Enter")
        played.note(player_line(1), reply_text("1", 0))
        for turn in range(2, 5):
            say(term, played, turn, story)
        kept["5.1"] = say(term, played, 5, story)
        term.line("/reroll")
        term.wait_prompt()
        term.send("/sw")
        term.settle()  # the menu of what completes it shows as the player types
        term.press("Tab")  # completed: /swipe
        term.wait_for("> /swipe")
        term.send(" <")
        term.press("Enter")
        term.line("/swipe >")
        term.line("/swipe >")  # on the last alternative: a new one
        kept["5.2"], kept["5.3"] = reply_text("5", 1), reply_text("5", 2)
        played.note(kept["5.2"], kept["5.3"])
        for turn in range(6, 9):
            say(term, played, turn, story)
        term.line("/continue")  # the 8th reply extended
        played.note(CONTINUATION)
        say(term, played, 9, story)
        term.line("/impersonate")  # the line drafted in the input, sent as it is
        term.wait_prompt()
        term.wait_for(f"> {IMPERSONATION[:30]}")
        term.press("Enter")
        played.note(IMPERSONATION, reply_text(IMPERSONATION, 0))
        for turn in (11, 12):
            say(term, played, turn, story)
        term.line("/undo")  # the 12th turn to the trash
        term.line("/undo")  # the 11th
        term.line("/redo")  # the 11th back
        kept["12"] = say(term, played, 12, story)
        say(term, played, 13, story)
        term.line("/edit")  # the 13th line, in the input to edit: replaced, as a fork
        term.wait_prompt()
        term.wait_for(f"> {player_line(13)}")
        term.press("Ctrl+U")
        term.send(EDITED)
        term.press("Enter")
        played.note(EDITED, reply_text(EDITED, 0))
        say(term, played, 14, story)
        # keys while typing: a word put in with the arrows, CJK deleted whole
        term.wait_prompt()
        term.send("I wait")
        for _ in range(4):
            term.press("Left")
        term.send("quietly ")
        term.press("End")
        term.send(" 你好X")
        term.press("Backspace")
        term.press("Enter")
        played.note(TYPED, reply_text(TYPED, 0))
        for command in LAST_COMMANDS:
            term.line(command)
            term.page_through()
        assert term.wait_exit() == 0, term.text()

        shown = term.text()
        assert len(FOOTER.findall(shown)) >= 15, shown  # after every turn
        assert "· hp 100 → 95 ·" in shown and "· gold 10 → 15 ·" in shown, shown  # turns 3, 4
        for text in (kept["5.1"], kept["5.2"], kept["5.3"], CONTINUATION, reply_text("14", 0)):
            assert shown_whole(shown, text), text
        kept["problems"] = screen_problems(term, played.texts)
        (Path(cli.env["HOME"]).parent / "screen-80.txt").write_text(term.text())
    return kept


def play_at_120_then_80(cli: Run, story: Story, played: Played) -> str:
    """Turns 16 to 30, resumed at 120 columns and resized to 80 after the 22nd; the
    screens' problems."""
    with Terminal(["play"], cli.env, columns=120, rows=30) as term:  # resumed
        term.wait_prompt()
        recap = term.text()  # the story's last messages, before the first prompt
        assert shown_whole(recap, reply_text(TYPED, 0)), recap
        assert TYPED in recap, recap
        for _ in range(len(LAST_COMMANDS) + 1):  # the history, kept from the last session
            term.press("Up")
        term.wait_for(f"> {TYPED}")
        term.press("Ctrl+C")  # the line dropped
        for turn in range(16, 21):
            say(term, played, turn, story)
        term.line("/edit HEAD")  # the 20th reply, in the input to edit: rewritten in place
        term.wait_prompt()
        term.send(SMILE)
        term.press("Enter")
        played.note(SMILE)
        for turn in range(21, 23):
            say(term, played, turn, story)
        term.line("/state")
        term.line("/log 4")
        term.line("/tree")
        term.page_through()  # longer than the screen: in the pager
        for command in ("/help", "/trace", "/lore", "/diff"):
            term.line(command)
            term.page_through()
        term.wait_prompt()
        at_120 = term.display()
        for turn in range(16, 23):
            assert shown_whole("\n".join(at_120), reply_text(str(turn), 0)), (turn, term.text())
        problems = screen_problems(term, played.texts)  # before the resize cuts the lines
        term.resize(80, 24)
        for turn in range(23, 31):
            say(term, played, turn, story)
        term.line("/swipe >")  # a new reply, at 80 columns
        played.note(reply_text("30", 1))
        term.line("/undo")  # and back
        term.line(SLOW)  # Ctrl+C while the reply streams: what came is kept, marked
        term.wait_for("Marla: w0 w1 w2")
        term.press("Ctrl+C")
        term.wait_prompt()
        assert re.search(r"^reply 1/1 · incomplete", term.text(), re.MULTILINE), term.text()
        term.line("/undo")  # the interrupted turn to the trash
        term.line("/state")
        term.line("/tree")
        term.page_through()
        term.line("/quit")
        assert term.wait_exit() == 0, term.text()
        at_80 = term.display()[len(at_120) :]
        for turn in range(23, 31):
            assert shown_whole("\n".join(at_80), reply_text(str(turn), 0)), (turn, term.text())
        assert shown_whole("\n".join(at_80), reply_text("30", 1))
        assert len(FOOTER.findall("\n".join(at_80))) >= 9, term.text()
        (Path(cli.env["HOME"]).parent / "screen-120-80.txt").write_text(term.text())
        return problems + screen_problems(term, played.texts, len(at_120))


def the_story(kept: dict[str, str]) -> list[tuple[str, str, str]]:
    """The projection the story should have: (role, speaker, text) of each message."""
    messages: list[tuple[str, str]] = []
    for turn in range(1, 31):
        line, reply = player_line(turn), reply_text(str(turn), 0)
        if turn == 5:
            reply = kept["5.3"]
        elif turn == 8:
            reply = f"{reply} {CONTINUATION}"
        elif turn == 10:
            line, reply = IMPERSONATION, reply_text(IMPERSONATION, 0)
        elif turn == 12:
            reply = kept["12"]
        elif turn == 13:
            line, reply = EDITED, reply_text(EDITED, 0)
        elif turn == 15:
            line, reply = TYPED, reply_text(TYPED, 0)
        elif turn == 20:
            reply += SMILE
        messages += [("user", line), ("assistant", reply)]
    return [(role, "Tom" if role == "user" else "Marla", text) for role, text in messages]


def test_a_thirty_turn_story_played_and_resumed(cli: Run, story: Story) -> None:
    played = Played()
    kept = play_at_80(cli, story, played)
    resumed_problems = play_at_120_then_80(cli, story, played)

    story_told = the_story(kept)
    log = cli.json("log")
    screens = Path(cli.env["HOME"]).parent  # what the player saw, if what follows fails
    assert [(n["role"], n["name"], n["content"]) for n in log] == story_told, screens
    nodes = cli.json("tree")["nodes"]
    children: dict[str | None, list[str]] = {}
    for node in nodes:
        children.setdefault(node["parent_id"], []).append(node["content"])
        assert node["name"] == ("Tom" if node["role"] == "user" else "Marla"), node
        assert not control_characters(node["content"]), node
    by_text = {node["content"]: node for node in nodes}
    assert children[by_text[player_line(5)]["id"]] == [kept["5.1"], kept["5.2"], kept["5.3"]]
    assert children[by_text[player_line(8)]["id"]] == [
        reply_text("8", 0),
        f"{reply_text('8', 0)} {CONTINUATION}",
    ]
    assert children[by_text[kept["12"]]["id"]] == [player_line(13), EDITED]  # the fork
    assert by_text[player_line(13)]["id"] in {n["parent_id"] for n in nodes}  # kept whole
    assert children[by_text[player_line(30)]["id"]] == [reply_text("30", 0)]
    assert len(nodes) == 2 * 30 + 2 + 1 + 2  # the alternatives, the continuation, the fork
    journal = [(entry["action"], entry["undone"]) for entry in cli.json("history")]
    done = ["say"] * 5 + ["reroll"] * 2 + ["say"] * 3 + ["continue"] + ["say"] * 5  # to 13
    done += ["edit"] + ["say"] * 7 + ["rewrite"] + ["say"] * 10  # swipes are no edits
    assert journal == [(action, False) for action in done] + [("say", True)]  # SLOW's
    trash = cli.json("trash")
    assert [(part["top"]["content"], len(part["nodes"])) for part in trash] == [
        (player_line(12), 2),  # the turn undone, then played again
        (reply_text("30", 1), 1),  # the swipe undone
        (SLOW, 2),  # the turn interrupted, then undone
    ]
    state = cli.json("state")["variables"]
    replies = [text for role, _, text in story_told if role == "assistant"]
    assert state == {
        "hp": 100 - 5 * sum(WOUND in text for text in replies),
        "gold": 10 + 5 * sum(COINS in text for text in replies),
    }
    assert not (kept["problems"] or resumed_problems), (
        f"at 80 columns:\n{kept['problems']}\n\nresumed at 120, then 80:\n{resumed_problems}"
    )


def test_keys_typed_while_a_reply_streams(cli: Run) -> None:
    """What the player types while a reply streams (an arrow, a few words, Enter)
    neither shows in the reply nor sends anything; Ctrl+C stops it, with no ``^C``."""
    with Terminal(["play"], cli.env, columns=80, rows=24) as term:
        term.line(SLOW)
        term.wait_for("Marla: w0 w1 w2 w3")
        term.press("Up")
        term.send("hello\r")  # Enter too, not pressed as a line's end: mid-reply
        term.wait_for("w45")
        term.press("Ctrl+C")
        term.wait_prompt()
        term.settle()
        shown = term.text()
        term.press("Ctrl+D")
        assert term.wait_exit() == 0, shown
    reply = shown[shown.index("Marla: w0") + len("Marla: ") : shown.index("warning:")]
    assert not control_characters(reply), reply
    assert "hello" not in reply, reply
    assert " ".join(reply.split()).startswith(" ".join(f"w{i}" for i in range(46))), reply
    log = cli.json("log")
    assert [n["content"] for n in log][:1] == [SLOW] and len(log) == 2, log  # nothing sent
    assert log[1]["metadata"]["incomplete"] is True


#: An SGR sequence's parameters that set a colour (foreground, background, 256 or RGB).
_COLOUR = re.compile(r"^(3[0-9]|4[0-9]|9[0-7]|10[0-7])$")


def test_no_color_plays_without_colours(cli: Run, story: Story) -> None:
    """With ``NO_COLOR`` set, play (the recap, a turn, its spinner and footer, the
    prompt) writes no colour, and the reply reads the same."""
    env = {**cli.env, "NO_COLOR": "1"}
    with Terminal(["play"], env, columns=80, rows=24) as term:
        say(term, Played(), 1, story)
        term.line("/state")
        term.line("/quit")
        assert term.wait_exit() == 0, term.text()
        shown, written = term.text(), term.raw()
    assert shown_whole(shown, reply_text("1", 0)), shown
    assert FOOTER.search(shown), shown
    colours = [
        sequence
        for sequence in re.findall(r"\x1b\[([0-9;]*)m", written)
        if any(_COLOUR.match(part) for part in sequence.split(";"))
    ]
    assert colours == [], colours
