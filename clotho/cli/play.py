"""Commands that generate: say, reply, reroll, edit, continue, impersonate, play, and
trace.

Replies stream to the terminal as the model writes them (:class:`ChatScreen`: wrapped
to the width, the speaker's name first, a spinner until the first word, a footer after
the turn). Ctrl+C during a turn keeps what the player typed or saw: while a reply
streams, the text so far is kept, marked incomplete, with no state change; while the
world state is being updated, the reply is kept with no delta, marked; before the
reply's first word, the player's message alone is kept (HEAD on it, so /continue or
`clotho continue` asks for the reply), and the screen says so.

In a cast of several (:mod:`clotho.cast`), a message may be answered by several
characters in turn (:func:`play_round`: the engine's ``next_speakers``, the first as
the say, each next as a reply), each under its own name.

``play`` shows the story's last messages, then reads the player's lines with
:mod:`clotho.cli.playinput` and acts on them with :mod:`clotho.cli.playcommands`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clotho.errors import UsageError
from clotho.wiring import session_engine

from . import render
from ._app import EXIT_FAILED, Cli, app, command
from .logs import said_once
from .playcommands import Play, dispatch
from .playinput import LineReader
from .playscreen import RECAP, ChatScreen, footer_text, state_changes
from .style import out
from .traceview import print_trace

if TYPE_CHECKING:
    from orchestrator import Engine, TurnInterrupted, TurnRequest, TurnResult

__all__ = ["PLAY_HINT", "play_round", "run_turn", "turn_document"]

#: The line under the recap when ``clotho play`` opens.
PLAY_HINT = "/help for commands · Alt+Enter for a new line"


def _engine(cli: Cli, session_id: str) -> Engine:
    """The session's engine; what it warns about once per cause (lore by keywords
    only) is not said again before every turn (:func:`clotho.cli.logs.said_once`)."""
    with said_once(cli.settings.data_dir):
        return session_engine(cli.settings, cli.store, session_id)


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


Runner = Callable[[Coroutine[Any, Any, "TurnResult"]], "TurnResult"]


def run_turn(
    cli: Cli,
    session_id: str,
    kind: str,
    *,
    text: str | None = None,
    node: str | None = None,
    speaker: str | None = None,
    engine: Engine | None = None,
    runner: Runner | None = None,
    continue_hint: str = "`clotho continue`",
    screen: ChatScreen | None = None,
    emit: bool = True,
) -> TurnResult:
    """Play one turn from the command line and show it (``screen``: where; default a
    new one on stdout) with its footer; with ``--json``, its document (unless
    ``emit`` is false: the caller prints it, :func:`turn_document`).

    ``speaker``: who answers a say, an edit or a reply (``None``: the first the
    session's speaker order names where the reply goes: an edit's at the edited
    message's parent); a reroll or a continue keeps its reply's. The name shown first
    is the one the reply is stored under."""
    if screen is None:
        screen = ChatScreen(quiet=cli.json)
    if engine is None:
        screen.waiting("starting the model client")  # the model side loads in seconds
    from orchestrator import ModelError, OrchestratorError, TurnInterrupted, TurnRequest
    from prompts import PromptError

    if engine is None:
        try:
            engine = _engine(cli, session_id)
            _load_model_client()  # the seconds it takes are spent under the spinner
        finally:
            screen.done_waiting()  # an error is one line of its own
    request = TurnRequest(kind, text=text, node=node, speaker=speaker)  # type: ignore[arg-type]
    if kind == "impersonate":
        screen.expect_reply(engine.setup.player, player=True)
    else:
        try:
            request, continues = _with_speaker(cli, session_id, request, engine)
        except OrchestratorError as error:  # the engine's refusal, before any model call
            cli.fail(error)
        screen.expect_reply(request.speaker, note="(continues)" if continues else "")
    work = _interruptible(
        engine, engine.run(session_id, request, screen.on_event), keep_open=bool(runner)
    )
    try:
        try:
            result = (runner or asyncio.run)(work)
        finally:
            screen.end_turn()  # before an error's or an interrupt's own line
    except asyncio.CancelledError:
        screen.stopped("interrupted: the turn was abandoned, nothing was stored")
        raise typer.Exit(130) from None
    except TurnInterrupted as stop:
        sys.stdout.flush()
        screen.stopped(_interrupted_line(stop, continue_hint))
        if stop.user_node is not None:
            cli.remember(session_id)
        raise typer.Exit(130) from None
    except ModelError as error:
        cli.fail(error)
    except (OrchestratorError, PromptError) as error:
        cli.fail(error)
    cli.remember(session_id)
    _report(cli, session_id, result, engine, screen, emit=emit)
    return result


def play_round(
    cli: Cli,
    session_id: str,
    text: str,
    *,
    speaker: str | None = None,
    engine: Engine,
    runner: Runner,
    screen: ChatScreen,
    continue_hint: str = "`clotho continue`",
    finished: list[TurnResult] | None = None,
) -> list[TurnResult]:
    """The player's message ``text`` and who answers it: ``speaker`` alone, else each
    one the session's speaker order names (:meth:`orchestrator.Engine.next_speakers`)
    in turn: the first as the say, each next as a reply of its own, each streamed
    under its name with its footer. An error or an interrupt ends the round; the turns
    stored before it are in ``finished`` (given: each appended as it ends)."""
    names: list[str | None] = [speaker]
    if speaker is None:
        names = [*engine.next_speakers(session_id, text)] or [None]  # no one: the engine says why
    turn = functools.partial(
        run_turn,
        cli,
        session_id,
        engine=engine,
        runner=runner,
        screen=screen,
        continue_hint=continue_hint,
        emit=False,
    )
    results = [] if finished is None else finished
    results.append(turn("say", text=text, speaker=names[0]))
    for name in names[1:]:
        results.append(turn("reply", speaker=name))
    return results


def _with_speaker(
    cli: Cli, session_id: str, request: TurnRequest, engine: Engine
) -> tuple[TurnRequest, bool]:
    """The request with who speaks named, as the engine chooses it where the turn grows
    the tree (:func:`orchestrator.turn.locate_turn`: at an edited message's parent, the
    speaker of the reply a reroll or a continue keeps), so that the name shown before
    the reply is the one the reply is stored under; and whether it continues a reply.

    Raises:
        orchestrator.TurnError: the turn is refused (a speaker who cannot speak...).
    """
    from orchestrator.turn import locate_turn

    _, _, where = locate_turn(cli.store, session_id, request, engine.setup, engine.rng)
    named = dataclasses.replace(request, speaker=where["speaker"].name)
    return named, where.get("continues") is not None


def _interrupted_line(stop: TurnInterrupted, continue_hint: str) -> str:
    """What an interrupt before the reply's first word kept, for the player."""
    node = stop.user_node
    if node is None:
        return "interrupted before the reply began: nothing was stored"
    return (
        f"interrupted before the reply began: your message was kept as "
        f"{render.short(node.id)} (HEAD), with no reply; {continue_hint} asks for one"
    )


def turn_document(cli: Cli, session_id: str, result: TurnResult) -> dict[str, Any]:
    """A stored turn as ``--json`` gives it: the reply node, the player's node, the
    session's version, the state after it, and how the generation went."""
    assert result.node is not None
    state = cli.store.state(session_id, result.node.id)
    return {
        "node": result.node.as_dict(),
        "user_node": result.user_node.as_dict() if result.user_node else None,
        "session": {"id": result.session.id, "version": result.session.version},
        "state": state.as_dict(),
        "incomplete": result.completion.incomplete,
        "warnings": result.warnings,
        "usage": result.completion.usage,
    }


def _report(
    cli: Cli,
    session_id: str,
    result: TurnResult,
    engine: Engine,
    screen: ChatScreen,
    *,
    emit: bool = True,
) -> None:
    if result.node is None:  # impersonate: the player's line, not stored
        _report_draft(cli, result, screen)
        return
    if cli.json:
        if emit:
            out(json.dumps(turn_document(cli, session_id, result), ensure_ascii=False, indent=2))
        return
    parent = result.node.parent_id  # what this reply changed: a reroll's own changes too
    changed = cli.store.diff(session_id, parent, result.node.id) if parent else {}
    prompt_tokens = (result.completion.usage or {}).get("prompt_tokens")
    several = len(engine.setup.members) > 1
    screen.footer(
        footer_text(
            cli.store.turn(session_id, result.node.id),
            state_changes(changed),
            prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
            window=engine.gateway.context_window(engine.setup.model),
            # off a terminal no header names the speaker: the footer does
            speaker=result.node.name if several and not screen.terminal else None,
        )
    )


def _report_draft(cli: Cli, result: TurnResult, screen: ChatScreen) -> None:
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
    screen.line("(your line, not stored: edit it and send it)", "dim")


TextArgument = Annotated[str, typer.Argument(help="The player's message.", show_default=False)]
NodeArgument = Annotated[
    str, typer.Argument(help="A node: id or prefix, HEAD~N.", show_default=False)
]


SpeakerOption = Annotated[
    str | None,
    typer.Option(
        "--speaker",
        metavar="NAME",
        help="The character who answers (default: the cast's speaker order: `clotho cast`).",
        show_default=False,
    ),
]


@contextlib.contextmanager
def _turns(cli: Cli, session_id: str) -> Iterator[tuple[Engine, Runner, ChatScreen]]:
    """The session's engine, an event loop and a screen for several turns in a row
    (a spinner while the model side loads); the engine is closed after."""
    screen = ChatScreen(quiet=cli.json)
    screen.waiting("starting the model client")
    try:
        engine = _engine(cli, session_id)
        _load_model_client()
    finally:
        screen.done_waiting()
    screen.cast = tuple(member.name for member in engine.setup.members)
    with asyncio.Runner() as runner:
        try:
            yield engine, runner.run, screen
        finally:
            runner.run(engine.aclose())


@command(app, "say")
def say(cli: Cli, text: TextArgument, speaker: SpeakerOption = None) -> None:
    """Say something as the player; the reply streams in and the state follows it.

    In a cast of several, each character the speaker order names answers in turn, each
    reply a node of its own with its speaker's name; --speaker NAME: that one alone.
    --json: the first reply's turn, the others' in "replies" (when a later one fails,
    those stored before it, and the command fails)."""
    session_id = cli.session_id()
    results: list[TurnResult] = []
    try:
        with _turns(cli, session_id) as (engine, runner, screen):
            play_round(
                cli,
                session_id,
                text,
                speaker=speaker,
                engine=engine,
                runner=runner,
                screen=screen,
                finished=results,
            )
    finally:
        if cli.json and results:  # a script learns the nodes stored, even if one failed
            first, *others = (turn_document(cli, session_id, result) for result in results)
            document = {**first, "replies": others}
            out(json.dumps(document, ensure_ascii=False, indent=2))


@command(app, "reply")
def reply(cli: Cli, speaker: SpeakerOption = None) -> None:
    """A character speaks next, with no message of the player's (default: the one the
    speaker order names)."""
    run_turn(cli, cli.session_id(), "reply", speaker=speaker)


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
    cli.emit(document, lambda: print_trace(document))


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
    setup = engine.setup
    screen = ChatScreen(
        speakers={"user": setup.player, "assistant": setup.character.name},
        cast=[member.name for member in setup.members],
    )
    screen.recap(cli.store.projection_page(session_id, limit=RECAP), hint=PLAY_HINT)
    with asyncio.Runner() as runner:

        def turn(kind: str, **kwargs: Any) -> TurnResult:
            return run_turn(
                cli,
                session_id,
                kind,
                engine=engine,
                runner=runner.run,
                continue_hint="/continue",
                screen=screen,
                **kwargs,
            )

        def speak(text: str, speaker: str | None) -> list[TurnResult]:
            return play_round(
                cli,
                session_id,
                text,
                speaker=speaker,
                engine=engine,
                runner=runner.run,
                screen=screen,
                continue_hint="/continue",
            )

        def refresh() -> None:
            nonlocal engine
            old, engine = engine, _engine(cli, session_id)
            runner.run(old.aclose())

        try:
            _play_loop(
                Play(cli, session_id, LineReader(), turn, screen, speak=speak, refresh=refresh)
            )
        finally:
            runner.run(engine.aclose())


def _play_loop(play: Play) -> None:
    lines = play.lines
    while True:
        try:
            line = lines.read(play.prompt())
        except EOFError:
            out("")
            return
        except KeyboardInterrupt:
            out("")
            continue
        except UsageError as error:
            play.screen.err_line(f"error: {error}")
            continue
        line = line.strip()
        if not line:
            continue
        try:
            if not dispatch(play, line):
                return
        except typer.Exit as stop:
            if stop.exit_code not in (EXIT_FAILED, 130):
                raise
        except Exception as error:  # noqa: BLE001 - the session goes on; say what failed
            play.screen.err_line(f"error: {' '.join(str(error).split())}")
