"""Commands that generate: say, reroll, edit, continue, impersonate, play, and trace.

Replies stream to the terminal as the model writes them. Ctrl+C while a reply
streams stops it: the text so far is kept, marked incomplete, with no state change;
Ctrl+C at any other moment of a turn abandons the turn and stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clotho.wiring import session_engine

from . import render
from ._app import EXIT_FAILED, Cli, app, command
from .style import out, paint

if TYPE_CHECKING:
    from orchestrator import Engine, TurnResult

__all__ = ["run_turn"]


def _engine(cli: Cli, session_id: str) -> Engine:
    return session_engine(cli.settings, cli.store, session_id)


class _Stream:
    """Writes a turn's events to the terminal (nothing but the result with --json)."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.thinking = False

    def __call__(self, kind: str, text: str) -> None:
        if self.quiet:
            return
        if kind == "token":
            if self.thinking:
                sys.stdout.write("\n")
                self.thinking = False
            sys.stdout.write(text)
        elif kind == "reasoning":
            if not self.thinking:
                sys.stdout.write(paint("(thinking) ", "dim", "italic"))
                self.thinking = True
            sys.stdout.write(paint(text, "dim", "italic"))
        elif kind == "status":
            sys.stderr.write(paint(f"… {text}\n", "dim"))
        elif kind == "warning":
            sys.stdout.write("\n")
            sys.stderr.write(paint(f"warning: {text}\n", "yellow"))
        sys.stdout.flush()


async def _interruptible(
    engine: Engine, work: Coroutine[Any, Any, TurnResult], *, keep_open: bool = False
) -> TurnResult:
    """Run a turn; Ctrl+C stops the streaming reply, or else abandons the turn."""
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
) -> TurnResult:
    """Play one turn from the command line and report it."""
    from orchestrator import ModelError, OrchestratorError, TurnRequest
    from prompts import PromptError

    engine = engine or _engine(cli, session_id)
    before = cli.store.state(session_id).variables if not cli.json else None
    stream = _Stream(cli.json)
    request = TurnRequest(kind, text=text, node=node)  # type: ignore[arg-type]
    work = _interruptible(engine, engine.run(session_id, request, stream), keep_open=bool(runner))
    try:
        result = (runner or asyncio.run)(work)
    except asyncio.CancelledError:
        sys.stderr.write("\ninterrupted: the turn was abandoned, nothing was stored\n")
        raise typer.Exit(130) from None
    except ModelError as error:
        cli.fail(error)
    except (OrchestratorError, PromptError) as error:
        cli.fail(error)
    cli.remember(session_id)
    _report(cli, session_id, result, before)
    return result


def _report(cli: Cli, session_id: str, result: TurnResult, before: dict[str, Any] | None) -> None:
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


TextArgument = Annotated[str, typer.Argument(help="The player's message.", show_default=False)]
NodeArgument = Annotated[
    str, typer.Argument(help="A node id or unique prefix.", show_default=False)
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
    """Let the model write the player's next message (appended under HEAD)."""
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
    "/continue, /impersonate, /undo, /state, /trace, /tree, /quit"
)


@command(app, "play")
def play(cli: Cli) -> None:
    """An interactive session: type to speak, /commands for the rest."""
    session_id = cli.session_id()
    engine = _engine(cli, session_id)
    out(paint(PLAY_HELP, "dim"))
    with asyncio.Runner() as runner:
        try:
            _play_loop(cli, session_id, engine, runner)
        finally:
            runner.run(engine.aclose())


def _play_loop(cli: Cli, session_id: str, engine: Engine, runner: asyncio.Runner) -> None:
    while True:
        try:
            line = input(paint("> ", "green", "bold"))
        except EOFError:
            out("")
            return
        except KeyboardInterrupt:
            out("")
            continue
        line = line.strip()
        if not line:
            continue
        try:
            if not _play_line(cli, session_id, engine, runner, line):
                return
        except typer.Exit as stop:
            if stop.exit_code not in (EXIT_FAILED, 130):
                raise
        except Exception as error:  # noqa: BLE001 - the session goes on; say what failed
            sys.stderr.write(f"error: {' '.join(str(error).split())}\n")


def _play_line(
    cli: Cli, session_id: str, engine: Engine, runner: asyncio.Runner, line: str
) -> bool:
    def turn(kind: str, **kwargs: Any) -> None:
        run_turn(cli, session_id, kind, engine=engine, runner=runner.run, **kwargs)

    if not line.startswith("/"):
        turn("say", text=line)
        return True
    word, _, rest = line[1:].partition(" ")
    rest = rest.strip()
    if word in ("quit", "exit", "q"):
        return False
    if word == "reroll":
        turn("reroll")
    elif word in ("continue", "impersonate"):
        turn(word)
    elif word == "edit":
        last = next((m for m in reversed(cli.store.messages(session_id)) if m.role == "user"), None)
        if last is None or not rest:
            out("usage: /edit TEXT  (replaces your last message, as a fork)")
        else:
            turn("edit", node=last.id, text=rest)
    elif word == "swipe":
        direction = "prev" if rest in ("<", "prev", "left") else "next"
        node, _ = cli.store.switch_sibling(session_id, direction)
        turn_view = cli.store.turn(session_id, node.id)
        out(render.node_line(node, head_id=node.id, alternatives=render.alternatives(turn_view)))
        out(node.content)
    elif word == "undo":
        result, _ = cli.store.undo(session_id)
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
