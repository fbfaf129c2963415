"""Commands that generate: say, reroll, edit, continue, impersonate, play, and trace.

Replies stream to the terminal as the model writes them. Ctrl+C during a turn keeps
what the player typed or saw: while a reply streams, the text so far is kept, marked
incomplete, with no state change; while the world state is being updated, the reply is
kept with no delta, marked; before the reply's first word, the player's message alone
is kept (HEAD on it, so /continue or `clotho continue` asks for the reply), and the
screen says so.

``play`` reads the player's lines with prompt_toolkit on a terminal (a line of any
length, keys such as Ctrl+L handled, not typed into the text), and line by line from
stdin otherwise (piped input), with control characters other than tab and newline
removed.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from clotho.errors import UsageError
from clotho.wiring import session_engine

from . import render
from ._app import EXIT_FAILED, Cli, app, command
from .logs import clear_progress, said_once, show_progress
from .style import out, paint

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

    from orchestrator import Engine, TurnInterrupted, TurnResult

__all__ = ["run_turn"]


def _engine(cli: Cli, session_id: str) -> Engine:
    """The session's engine; what it warns about once per cause (lore by keywords
    only) is not said again before every turn (:func:`clotho.cli.logs.said_once`)."""
    with said_once(cli.settings.data_dir):
        return session_engine(cli.settings, cli.store, session_id)


class _Stream:
    """Writes a turn's events to the terminal (nothing but the result with --json).

    Until the reply begins, a line on a terminal's stderr says what the turn is doing
    (``progress``: starting the model client, reading the story, waiting for the
    model...), each replacing the one before; the reply or any other line erases it.
    Off a terminal (a pipe, a file) it is not written."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.thinking = False
        self.midline = False  # the text so far (reply or reasoning) does not end a line
        self.live = not quiet and sys.stderr.isatty()

    def clear(self) -> None:
        """Erase the progress line, if one is shown."""
        clear_progress()

    def __call__(self, kind: str, text: str) -> None:
        if self.quiet:
            return
        if kind == "progress":
            if self.live:
                show_progress(text)  # a warning meanwhile erases it first
            return
        self.clear()
        if kind == "token":
            if self.thinking:
                sys.stdout.write("\n")
                self.thinking = False
            sys.stdout.write(text)
            self.midline = not text.endswith("\n")
        elif kind == "reasoning":
            if not self.thinking:
                sys.stdout.write(paint("(thinking) ", "dim", "italic"))
                self.thinking = True
            sys.stdout.write(paint(text, "dim", "italic"))
            self.midline = not text.endswith("\n")
        elif kind == "status":
            if self.midline:  # after the reply, on a line of its own
                sys.stdout.write("\n")
                sys.stdout.flush()
                self.midline = False
            sys.stderr.write(paint(f"… {text}\n", "dim"))
        elif kind == "warning":
            sys.stdout.write("\n")  # also past a ^C the terminal echoed
            sys.stdout.flush()
            self.midline = False
            sys.stderr.write(paint(f"warning: {text}\n", "yellow"))
        sys.stdout.flush()


async def _interruptible(
    engine: Engine, work: Coroutine[Any, Any, TurnResult], *, keep_open: bool = False
) -> TurnResult:
    """Run a turn; Ctrl+C interrupts it (:meth:`orchestrator.Engine.interrupt`), or
    abandons it if it has not started yet."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)

    def on_interrupt() -> None:
        if not engine.interrupt():
            task.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
        handled = False
    else:
        handled = True
    try:
        return await task
    finally:
        if handled:
            loop.remove_signal_handler(signal.SIGINT)
        if not keep_open:
            await engine.aclose()


def run_turn(
    cli: Cli,
    session_id: str,
    kind: str,
    *,
    text: str | None = None,
    node: str | None = None,
    engine: Engine | None = None,
    runner: Callable[[Coroutine[Any, Any, TurnResult]], TurnResult] | None = None,
    continue_hint: str = "`clotho continue`",
) -> TurnResult:
    """Play one turn from the command line and report it."""
    stream = _Stream(cli.json)
    if engine is None:
        stream("progress", "starting the model client")  # the model side loads in seconds
    from orchestrator import ModelError, OrchestratorError, TurnInterrupted, TurnRequest
    from prompts import PromptError

    if engine is None:
        try:
            engine = _engine(cli, session_id)
            from orchestrator.gateway import litellm_module

            litellm_module()  # the seconds it takes are spent under the line above
        finally:
            stream.clear()  # an error is one line of its own
    before = cli.store.state(session_id).variables if not cli.json else None
    request = TurnRequest(kind, text=text, node=node)  # type: ignore[arg-type]
    work = _interruptible(engine, engine.run(session_id, request, stream), keep_open=bool(runner))
    try:
        try:
            result = (runner or asyncio.run)(work)
        finally:
            stream.clear()  # before an error's or an interrupt's own line
    except asyncio.CancelledError:
        sys.stderr.write("\ninterrupted: the turn was abandoned, nothing was stored\n")
        raise typer.Exit(130) from None
    except TurnInterrupted as stop:
        sys.stdout.flush()
        # on a line of its own: past a ^C the terminal echoed
        sys.stderr.write("\n" + paint(_interrupted_line(stop, continue_hint), "yellow") + "\n")
        if stop.user_node is not None:
            cli.remember(session_id)
        raise typer.Exit(130) from None
    except ModelError as error:
        cli.fail(error)
    except (OrchestratorError, PromptError) as error:
        cli.fail(error)
    cli.remember(session_id)
    _report(cli, session_id, result, before, end_line=stream.midline)
    return result


def _interrupted_line(stop: TurnInterrupted, continue_hint: str) -> str:
    """What an interrupt before the reply's first word kept, for the player."""
    node = stop.user_node
    if node is None:
        return "interrupted before the reply began: nothing was stored"
    return (
        f"interrupted before the reply began: your message was kept as "
        f"{render.short(node.id)} (HEAD), with no reply; {continue_hint} asks for one"
    )


def _report(
    cli: Cli,
    session_id: str,
    result: TurnResult,
    before: dict[str, Any] | None,
    *,
    end_line: bool = True,
) -> None:
    if result.node is None:  # impersonate: the player's line, not stored
        _report_draft(cli, result, end_line=end_line)
        return
    state = cli.store.state(session_id, result.node.id)
    if cli.json:
        out(
            json.dumps(
                {
                    "node": result.node.as_dict(),
                    "user_node": result.user_node.as_dict() if result.user_node else None,
                    "session": {"id": result.session.id, "version": result.session.version},
                    "state": state.as_dict(),
                    "incomplete": result.completion.incomplete,
                    "warnings": result.warnings,
                    "usage": result.completion.usage,
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    if end_line:  # the reply's last line
        sys.stdout.write("\n")
    changes = []
    for name, value in state.variables.items():
        old = (before or {}).get(name)
        if old != value:
            changes.append(f"{name} {json.dumps(old)} → {json.dumps(value)}")
    turn = cli.store.turn(session_id, result.node.id)
    footer = f"{render.short(result.node.id)} {render.alternatives(turn)}".rstrip()
    if changes:
        footer += "  " + paint("[" + ", ".join(changes) + "]", "yellow")
    out(paint(footer, "dim") if not changes else footer)


def _last_alternative_of_a_reply(cli: Cli, session_id: str) -> bool:
    """Whether HEAD is a reply with no alternative after it (where `>` writes one)."""
    head = cli.store.session(session_id).head_id
    if head is None:
        return False
    view = cli.store.turn(session_id, head)
    return view.node.role == "assistant" and view.index == len(view.siblings) - 1


def _report_draft(cli: Cli, result: TurnResult, *, end_line: bool) -> None:
    """An impersonation: the line the model wrote for the player, which nothing stored."""
    if cli.json:
        document = {
            "draft": result.text,
            "session": {"id": result.session.id, "version": result.session.version},
            "incomplete": result.completion.incomplete,
            "warnings": result.warnings,
            "usage": result.completion.usage,
        }
        out(json.dumps(document, ensure_ascii=False, indent=2))
        return
    if end_line:
        sys.stdout.write("\n")
    out(paint("(your line, not stored: edit it and send it)", "dim"))


TextArgument = Annotated[str, typer.Argument(help="The player's message.", show_default=False)]
NodeArgument = Annotated[
    str, typer.Argument(help="A node: id or prefix, HEAD~N.", show_default=False)
]


@command(app, "say")
def say(cli: Cli, text: TextArgument) -> None:
    """Say something as the player; the reply streams in and the state follows it."""
    run_turn(cli, cli.session_id(), "say", text=text)


@command(app, "reroll")
def reroll(
    cli: Cli,
    node: Annotated[
        str | None,
        typer.Argument(help="The reply to reroll (default: HEAD).", show_default=False),
    ] = None,
) -> None:
    """A new alternative of a reply (the old ones stay: `clotho swipe prev`)."""
    run_turn(cli, cli.session_id(), "reroll", node=node)


@command(app, "edit")
def edit(cli: Cli, node: NodeArgument, text: TextArgument) -> None:
    """Edit a player's message as a fork (the old timeline stays) and generate the reply."""
    run_turn(cli, cli.session_id(), "edit", node=node, text=text)


@command(app, "continue")
def continue_(cli: Cli) -> None:
    """One more reply from the game master after HEAD."""
    run_turn(cli, cli.session_id(), "continue")


@command(app, "impersonate")
def impersonate(cli: Cli) -> None:
    """Let the model write the player's next line (shown, not stored: send it with say)."""
    run_turn(cli, cli.session_id(), "impersonate")


@command(app, "trace")
def trace(
    cli: Cli,
    node: Annotated[
        str | None, typer.Argument(help="A generated node (default: HEAD).", show_default=False)
    ] = None,
) -> None:
    """What the model was sent for a node, with which settings, and why."""
    session_id = cli.session_id()
    ref = node or cli.store.session(session_id).head_id
    if ref is None:
        cli.fail(ValueError(f"session {session_id} is empty: no trace"))
    found = cli.store.trace(session_id, ref)
    if found is None:
        cli.fail(ValueError(f"node {ref} has no trace: it was not generated by a model"))
    document = found.as_dict()
    cli.emit(document, lambda: _print_trace(cli, document))


def _print_trace(cli: Cli, trace: dict[str, Any]) -> None:
    ok = paint("verified", "green") if trace["verified"] else paint("NOT verified", "red")
    usage = trace.get("usage") or {}
    lines = [
        f"{paint('trace', 'bold')} of {render.short(trace['node_id'])} ({trace['kind']}): "
        f"{trace['model']}, {trace['latency_ms']} ms, "
        f"{usage.get('prompt_tokens', '?')} + {usage.get('completion_tokens', '?')} tokens; "
        f"messages {ok}",
    ]
    lines += [f"  {paint('!', 'red')} {problem}" for problem in trace["problems"]]
    if trace.get("params"):
        lines.append(f"  params: {json.dumps(trace['params'])}")
    planner = trace.get("planner") or {}
    lines.append(f"  planner ({planner.get('strategy')}): {planner.get('reasoning')}")
    for hit in trace.get("lore") or []:
        lines.append(f"  lore {hit['id']}: {hit['reason']}")
    for miss in trace.get("lore_skipped") or []:
        lines.append(f"  not {miss['id']}: {miss['reason']}")
    if trace.get("system_prompt"):
        lines.append("  system prompt: the session's own, in place of system.j2")
    note = trace.get("author_note")
    if note:
        lines.append(f"  author's note: {note['reason']}")
    trimmed = trace.get("trimmed") or {}
    if trimmed.get("dropped"):
        summary = trimmed.get("summary") or {}
        how = "reused the summary" if summary.get("reused") else "wrote a new summary"
        lines.append(
            f"  trimmed: {trimmed['dropped']} old message(s) left out for the window of "
            f"{trimmed['window']} tokens; {how}"
        )
    post = trace.get("postprocess") or {}
    if post.get("skipped"):
        lines.append(f"  state: {post['skipped']}")
    elif post:
        outcome = "ok" if post.get("ok") else f"FAILED ({post.get('error')})"
        lines.append(
            f"  state: {outcome} after {len(post.get('attempts', []))} call(s) to "
            f"{post.get('model')}; delta {json.dumps(trace.get('delta'))}"
        )
    if trace.get("incomplete"):
        lines.append(f"  {paint('incomplete', 'yellow')}: {trace.get('stopped_by')}")
    templates = ", ".join(
        f"{name}" + ("" if info["origin"] == "package" else " (campaign)")
        for name, info in (trace.get("templates") or {}).items()
    )
    lines.append(f"  templates: {templates}")
    lines.append(paint(f"--- {len(trace['messages'])} messages sent ---", "dim"))
    for message in trace["messages"]:
        lines.append(paint(f"[{message['role']}]", render.ROLE_STYLE.get(message["role"], "dim")))
        lines.append(message["content"])
    out(*lines)


PLAY_HELP = (
    "Type to speak. /reroll, /swipe < or >, /edit TEXT (your last message, as a fork), "
    "/continue (extends the reply), /impersonate (drafts your line), /undo, /redo, /state, "
    "/trace, /tree, /quit"
)


#: C0 control characters but tab and newline, and DEL: never part of what the player says.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: The longest line a terminal in canonical mode hands over (Linux: 4095 bytes and the
#: newline); reading there, a longer line arrives cut, so one that long is refused.
CANONICAL_LIMIT = 4095


def clean_line(text: str) -> str:
    """The player's line without control characters (tab and newline kept)."""
    return _CONTROLS.sub("", text)


class LineReader:
    """The player's lines: a prompt_toolkit session on a terminal (no length limit, its
    own handling of keys), else lines of stdin (piped input, tests).

    :meth:`read` raises ``EOFError`` at the end (Ctrl+D) and ``KeyboardInterrupt`` for
    Ctrl+C while typing, with either. ``draft`` (an impersonation's line) is the next
    line's text to edit, on a terminal.
    """

    def __init__(self, session: PromptSession[str] | None = None) -> None:
        if session is None and sys.stdin.isatty() and sys.stdout.isatty():
            from prompt_toolkit import PromptSession

            session = PromptSession()
        self.session = session
        self.draft = ""

    def read(self, prompt: str) -> str:
        """One line, cleaned (:func:`clean_line`).

        Raises:
            UsageError: a line read from a terminal in canonical mode reached its limit
                (the rest was cut off by the terminal).
        """
        if self.session is not None:
            from prompt_toolkit.formatted_text import ANSI

            draft, self.draft = self.draft, ""
            return clean_line(self.session.prompt(ANSI(prompt), default=draft))
        line = input(prompt)
        if sys.stdin.isatty() and len(line.encode()) >= CANONICAL_LIMIT - 1:
            raise UsageError(
                f"that line reached the terminal's limit of {CANONICAL_LIMIT} bytes and may "
                "have been cut: not sent (play reads whole lines of any length when both "
                "stdin and stdout are a terminal)"
            )
        return clean_line(line)


def _load_model_client() -> None:
    from orchestrator.gateway import litellm_module

    litellm_module()


@command(app, "play")
def play(cli: Cli) -> None:
    """An interactive session: type to speak, /commands for the rest."""
    session_id = cli.session_id()
    engine = _engine(cli, session_id)
    # the model client loads while the player types the first line, not after it
    threading.Thread(target=_load_model_client, name="model-client", daemon=True).start()
    out(paint(PLAY_HELP, "dim"))
    with asyncio.Runner() as runner:
        try:
            _play_loop(cli, session_id, engine, runner, LineReader())
        finally:
            runner.run(engine.aclose())


def _play_loop(
    cli: Cli, session_id: str, engine: Engine, runner: asyncio.Runner, lines: LineReader
) -> None:
    while True:
        try:
            line = lines.read(paint("> ", "green", "bold"))
        except EOFError:
            out("")
            return
        except KeyboardInterrupt:
            out("")
            continue
        except UsageError as error:
            sys.stderr.write(f"error: {error}\n")
            continue
        line = line.strip()
        if not line:
            continue
        try:
            if not _play_line(cli, session_id, engine, runner, line, lines):
                return
        except typer.Exit as stop:
            if stop.exit_code not in (EXIT_FAILED, 130):
                raise
        except Exception as error:  # noqa: BLE001 - the session goes on; say what failed
            sys.stderr.write(f"error: {' '.join(str(error).split())}\n")


def _play_line(
    cli: Cli,
    session_id: str,
    engine: Engine,
    runner: asyncio.Runner,
    line: str,
    lines: LineReader | None = None,
) -> bool:
    def turn(kind: str, **kwargs: Any) -> TurnResult:
        return run_turn(
            cli,
            session_id,
            kind,
            engine=engine,
            runner=runner.run,
            continue_hint="/continue",
            **kwargs,
        )

    if not line.startswith("/"):
        turn("say", text=line)
        return True
    word, _, rest = line[1:].partition(" ")
    rest = rest.strip()
    if word in ("quit", "exit", "q"):
        return False
    if word == "reroll":
        turn("reroll")
    elif word == "continue":
        turn(word)
    elif word == "impersonate":
        drafted = turn(word)  # the player's line, stored nowhere: the next prompt's text
        if lines is not None and drafted.node is None:
            lines.draft = drafted.text
    elif word == "edit":
        last = next((m for m in reversed(cli.store.messages(session_id)) if m.role == "user"), None)
        if last is None or not rest:
            out("usage: /edit TEXT  (replaces your last message, as a fork)")
        else:
            turn("edit", node=last.id, text=rest)
    elif word == "swipe":
        direction: Literal["prev", "next"] = "prev" if rest in ("<", "prev", "left") else "next"
        if direction == "next" and _last_alternative_of_a_reply(cli, session_id):
            turn("reroll")  # SillyTavern's swipe right on the last one: a new reply
            return True
        node, _ = cli.store.switch_sibling(session_id, direction)
        turn_view = cli.store.turn(session_id, node.id)
        out(render.node_line(node, head_id=node.id, alternatives=render.alternatives(turn_view)))
        out(node.content)
    elif word in ("undo", "redo"):  # a turn too: its messages to the trash and back
        result, _ = cli.store.undo(session_id) if word == "undo" else cli.store.redo(session_id)
        out(paint(result.action, "dim"))
    elif word == "state":
        out(json.dumps(cli.store.state(session_id).as_dict(), ensure_ascii=False, indent=2))
    elif word == "trace":
        head = cli.store.session(session_id).head_id
        found = cli.store.trace(session_id, head) if head else None
        if found is None:
            out("HEAD was not generated: no trace")
        else:
            _print_trace(cli, found.as_dict())
    elif word == "tree":
        tree = cli.store.tree(session_id)
        render.print_tree(tree)
    else:
        out(PLAY_HELP)
    return True
