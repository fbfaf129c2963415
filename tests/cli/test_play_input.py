"""`clotho play`'s line editor (clotho/cli/playinput.py) driven through prompt_toolkit's
pipe input: the keys a terminal sends, the line that comes out.

The editor runs in a thread of its own (prompt_toolkit runs its own event loop); keys
that depend on what the editor did before (a history loaded, a completion offered) are
sent once the editor shows that, never after a fixed wait.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from clotho.cli.playcommands import COMMANDS
from clotho.cli.playinput import (
    HISTORY_LIMIT,
    LineReader,
    NodeChoice,
    completions,
    prompt_session,
)

NODES = [
    NodeChoice("9f0e1d2c", "Marla: The goblin falls."),
    NodeChoice("1a2b3c4d", "Tom: I attack"),
]


class Editor:
    """The line editor on a pipe: ``type`` sends keys, ``lines`` is what it read (each
    :meth:`LineReader.read` in turn until ``reads`` lines or the end)."""

    def __init__(self, keys: PipeInput, history: Path | None, reads: int) -> None:
        self.keys = keys
        self.session: PromptSession[str] = prompt_session(
            history=history,
            commands=COMMANDS,
            nodes=lambda: NODES,
            input=keys,
            output=DummyOutput(),
        )
        self.lines: list[str] = []
        self.ended: BaseException | None = None
        self.thread = threading.Thread(target=self._read, args=(reads,), daemon=True)
        self.thread.start()

    def _read(self, reads: int) -> None:
        reader = LineReader(self.session)
        try:
            while len(self.lines) < reads:
                self.lines.append(reader.read("> "))
        except (EOFError, KeyboardInterrupt) as end:
            self.ended = end

    @property
    def buffer_text(self) -> str:
        return self.session.default_buffer.text

    def wait(self, what: Callable[[], bool], timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            assert time.monotonic() < deadline, (self.buffer_text, self.lines)
            time.sleep(0.01)

    def type(self, keys: str, *, then: Callable[[], bool] | None = None) -> None:
        self.keys.send_text(keys)
        if then is not None:
            self.wait(then)

    def read(self, count: int) -> list[str]:
        self.wait(lambda: len(self.lines) >= count or self.ended is not None)
        return self.lines


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def editor(keys: PipeInput, history: Path | None = None, reads: int = 1) -> Editor:
    return Editor(keys, history, reads)


def test_enter_sends_and_alt_enter_esc_enter_ctrl_j_start_new_lines(keys: PipeInput) -> None:
    typed = editor(keys, reads=2)
    typed.type("I wait.\x1b\rThen I listen.\nThen I run.\x1b")
    typed.type("\rThe end.\r")  # Esc, then Enter: a new line too
    typed.type("\x1b[200~a pasted\r\ntext\rof three lines\x1b[201~\r")  # bracketed paste
    assert typed.read(2) == [
        "I wait.\nThen I listen.\nThen I run.\nThe end.",
        "a pasted\ntext\nof three lines",
    ]


def test_the_history_is_kept_across_sessions_and_searched(tmp_path: Path) -> None:
    history = tmp_path / "data" / "play-history"  # its folder is made when missing
    with create_pipe_input() as keys:
        first = editor(keys, history, reads=2)
        first.type("I open the door.\r", then=lambda: len(first.lines) == 1)
        first.type("I look\naround.\r")
        assert first.read(2) == ["I open the door.", "I look\naround."]
    with create_pipe_input() as keys:  # a new session reads the same file
        second = editor(keys, history, reads=3)
        second.wait(lambda: len(second.session.history.get_strings()) == 2)
        second.type("\x1b[A", then=lambda: second.buffer_text == "I look\naround.")
        second.type("\r", then=lambda: len(second.lines) == 1)
        # up goes to the line above in a two-line text, then to the older entry
        second.type("\x1b[A\x1b[A\x1b[A", then=lambda: second.buffer_text == "I open the door.")
        second.type("\r", then=lambda: len(second.lines) == 2)
        second.type("\x12door", then=lambda: second.session.search_buffer.text == "door")  # Ctrl+R
        second.type("\r", then=lambda: second.buffer_text == "I open the door.")  # found
        second.type("\r")
        assert second.read(3) == ["I look\naround.", "I open the door.", "I open the door."]


def test_backspace_delete_and_arrows_take_whole_characters(keys: PipeInput) -> None:
    typed = editor(keys, reads=4)
    typed.type("你好\x7fX\r")  # the issue: `你好X` on screen, `你X` stored
    typed.type("a👍🏽\x7fb\r")  # an emoji with a skin tone: one character
    typed.type("👨‍👩‍👧!\x1b[D\x7f\r")  # a family (joined by ZWJ), deleted from after it
    typed.type("e\u0301\x1b[Dx\x1b[3~\r")  # e and its combining accent: left, x, Delete
    assert typed.read(4) == ["你X", "ab", "!", "x"]


def test_ctrl_c_clears_the_line_and_ctrl_d_on_an_empty_one_ends(keys: PipeInput) -> None:
    typed = editor(keys, reads=1)
    typed.type("half a thought\x03")
    typed.wait(lambda: typed.ended is not None)
    assert isinstance(typed.ended, KeyboardInterrupt) and typed.lines == []
    with create_pipe_input() as more:
        typed = editor(more, reads=1)
        # Ctrl+D deletes under the cursor (left of x: x goes, the line stays open)
        typed.type("x\x1b[D\x04", then=lambda: typed.buffer_text == "" and typed.ended is None)
        typed.type("\x04")  # on an empty line: the end
        typed.wait(lambda: typed.ended is not None)
        assert isinstance(typed.ended, EOFError)


def test_tab_completes_commands_with_their_help_and_node_ids(keys: PipeInput) -> None:
    found = list(completions("/t", COMMANDS, lambda: NODES))
    assert [c.text for c in found] == ["/tree", "/trace"]
    assert found[1].shown == "/trace [NODE]" and "sent" in found[1].meta
    assert all(c.replace == 2 for c in found)
    assert [c.text for c in completions("/", COMMANDS, lambda: NODES)] == [
        f"/{c.name}" for c in COMMANDS
    ]
    # after a command that takes a node: the nodes whose short id starts so
    assert [(c.text, c.meta) for c in completions("/checkout 9f", COMMANDS, lambda: NODES)] == [
        ("9f0e1d2c", "Marla: The goblin falls.")
    ]
    assert len(list(completions("/diff 9f0e1d2c ", COMMANDS, lambda: NODES))) == 2
    assert [c.text for c in completions("/help ed", COMMANDS, lambda: NODES)] == ["edit"]

    def never() -> list[NodeChoice]:
        raise AssertionError("the nodes are read only to complete a node")

    for typed_text in ("/log 1", "I attack", "/nope x", "/trace x\ny"):
        assert list(completions(typed_text, COMMANDS, never)) == []

    typed = editor(keys, reads=2)  # the same through prompt_toolkit: Tab, then Enter
    menu = typed.session.completer
    assert menu is not None
    offered = menu.get_completions(Document("/che"), CompleteEvent(completion_requested=True))
    assert [c.text for c in offered] == ["/checkout"]
    typed.type("/che", then=lambda: typed.buffer_text == "/che")
    typed.type("\t", then=lambda: typed.buffer_text == "/checkout")
    typed.type(" 1a", then=lambda: typed.buffer_text == "/checkout 1a")
    typed.type("\t", then=lambda: typed.buffer_text == "/checkout 1a2b3c4d")
    menu_state = typed.session.default_buffer
    typed.type("\r", then=lambda: menu_state.complete_state is None)  # takes the choice
    typed.type("\r/quit\r")  # and does not send yet: the next Enter does
    assert typed.read(2) == ["/checkout 1a2b3c4d", "/quit"]


def test_a_text_edited_in_place_stays_out_of_the_history(tmp_path: Path, keys: PipeInput) -> None:
    history = tmp_path / "play-history"
    reader = LineReader(
        prompt_session(history=history, input=keys, output=DummyOutput()),
        # /edit's own editor, as LineReader makes it (no history), here on the same pipe
        edit_session=prompt_session(history=None, input=keys, output=DummyOutput()),
    )
    read: list[str] = []

    def player() -> None:
        read.append(reader.read("edit> ", draft="Marla shrugs."))
        read.append(reader.read("> "))

    thread = threading.Thread(target=player, daemon=True)
    thread.start()
    keys.send_text(" Then she leaves.\r")
    deadline = time.monotonic() + 20
    while not read:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    keys.send_text("I follow her.\r")
    thread.join(timeout=20)
    assert read == ["Marla shrugs. Then she leaves.", "I follow her."]
    kept = prompt_session(history=history, input=keys, output=DummyOutput()).history
    assert list(kept.load_history_strings()) == ["I follow her."]


def test_the_history_keeps_its_newest_lines(tmp_path: Path) -> None:
    """A history file that grew past the limit is cut to its newest lines when loaded,
    multi-line entries whole."""
    history = tmp_path / "play-history"
    history.write_text(
        "".join(f"\n# then\n+line {n}\n+second {n}\n" for n in range(HISTORY_LIMIT + 5)),
        encoding="utf-8",
    )
    with create_pipe_input() as keys:
        typed = editor(keys, history)
        typed.wait(lambda: len(typed.session.history.get_strings()) == HISTORY_LIMIT)
        strings = typed.session.history.get_strings()
        assert strings[0] == "line 5\nsecond 5"
        assert strings[-1] == f"line {HISTORY_LIMIT + 4}\nsecond {HISTORY_LIMIT + 4}"
        typed.type("x\r")
        typed.read(1)
    with create_pipe_input() as keys:  # the file was rewritten: the cut holds
        again = editor(keys, history)
        again.wait(lambda: len(again.session.history.get_strings()) == HISTORY_LIMIT)
        assert again.session.history.get_strings()[-1] == "x"
        again.type("y\r")
        again.read(1)
