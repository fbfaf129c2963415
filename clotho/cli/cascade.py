"""``clotho cascade [NODE] [--from OLD] [--to LEAF]``: after an early message was edited
as a fork, play the rest of its old branch again on it (:mod:`orchestrator.cascade`).

NODE is the fork (default HEAD; HEAD on the reply ``clotho edit`` made: its edited
message; on a node a stopped cascade made: that cascade, to its leaf); OLD the original
it replaces (default: the nearest alternative before NODE whose story goes on below
it); LEAF the old branch's end (default: the active path below OLD). Each step is shown as
it is made (a progress bar on a terminal, one line each elsewhere), then how the world
states diverged. Ctrl+C stops the step running as it stops a turn, keeps every step
made, and says how to go on: the same command again, which never makes a step twice.
``--json``: the outcome (:meth:`orchestrator.cascade.CascadeOutcome.as_dict`).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import render
from ._app import Cli, app, command
from .cells import terminal_width
from .logs import said_once
from .state import diff_lines
from .style import out, paint

if TYPE_CHECKING:
    from mnemosyne import Node
    from orchestrator.cascade import CascadeOutcome, CascadePlan, CascadeStep

__all__ = ["cascade"]

#: The exit code of a cascade stopped by Ctrl+C (as a turn's).
EXIT_STOPPED = 130


def _what(node: Node) -> str:
    if node.role == "assistant":
        return f"{node.name}'s reply" if node.name else "the reply"
    if node.role == "user":
        return "the player's message"
    return "a scene change" if node.metadata.get("scene") else "a system message"


class _Shown:
    """The steps as they are made: a Rich progress bar on a terminal, else a line each."""

    def __init__(self, cli: Cli, plan: CascadePlan) -> None:
        self.quiet = cli.json
        self.live = not cli.json and sys.stdout.isatty()
        self.progress: Any = None
        self.task: Any = None
        if self.live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.progress = Progress(
                TextColumn("[bold]cascade"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                transient=True,
            )
            self.task = self.progress.add_task("", total=plan.total, completed=plan.done)

    def __enter__(self) -> _Shown:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def begin(self, number: int, total: int, old: Node) -> None:
        from orchestrator.cascade import regenerates

        if self.progress is not None:
            verb = "regenerating" if regenerates(old) else "copying"
            self.progress.update(self.task, description=f"{verb} {_what(old)}")

    def made(self, step: CascadeStep) -> None:
        how = "regenerated" if step.generated else "copied"
        line = (
            f"step {step.number} of {step.total}: {_what(step.new)} {how} "
            f"({render.short(step.new.id)}, mirrors {render.short(step.old.id)})"
        )
        if step.new.metadata.get("incomplete"):
            line += " (incomplete)"
        if self.progress is not None:
            self.progress.console.print(line, highlight=False, markup=False)
            self.progress.update(self.task, completed=step.number)
        elif not self.quiet:
            out(line)
            sys.stdout.flush()  # each step as it is made, on a pipe too


def _report(cli: Cli, outcome: CascadeOutcome) -> None:
    plan = outcome.plan
    if cli.json:
        out(json.dumps(outcome.as_dict(), ensure_ascii=False, indent=2))
        return
    if not outcome.made and outcome.complete:
        out(f"nothing left to regenerate: all {plan.total} steps were made before")
    where = f"old {render.short(outcome.old_id)} / new {render.short(outcome.new_id)}"
    if outcome.complete:
        out(paint(f"cascade complete: {plan.total} steps; HEAD on the new leaf", "bold"))
        out(f"how the states diverged at the leaves ({where}):")
    else:
        out(paint(f"stopped at step {outcome.done} of {plan.total}", "bold"))
        out(f"how the states diverged so far ({where}):")
    out(*diff_lines(outcome.divergence, terminal_width()))


def _resume_hint(plan: CascadePlan) -> str:
    return (
        f"`clotho cascade {render.short(plan.fork.id)} --from {render.short(plan.original.id)} "
        f"--to {render.short(plan.leaf_id)}` goes on from there"
    )


NodeArg = Annotated[
    str | None,
    typer.Argument(
        metavar="NODE",
        help="The edited message, the fork (default: HEAD; on the reply of `clotho edit`: "
        "its message).",
        show_default=False,
    ),
]
FromOption = Annotated[
    str | None,
    typer.Option(
        "--from",
        metavar="OLD",
        help="The original it replaces (default: the nearest alternative before NODE whose "
        "story goes on below it).",
        show_default=False,
    ),
]
ToOption = Annotated[
    str | None,
    typer.Option(
        "--to",
        metavar="LEAF",
        help="The old branch's end (default: the active path below OLD).",
        show_default=False,
    ),
]


@command(app, "cascade")
def cascade(cli: Cli, node: NodeArg = None, old: FromOption = None, to: ToOption = None) -> None:
    """Regenerate the rest of an old branch on an edited message (a fork): each of the
    player's messages copied, each reply generated again; Ctrl+C stops, run it again to
    go on."""
    from clotho.wiring import session_engine
    from orchestrator import OrchestratorError
    from orchestrator.cascade import Cascade, plan_cascade

    session_id = cli.session_id()
    plan = plan_cascade(cli.store, session_id, node, original=old, leaf=to)
    cli.remember(session_id)
    if not cli.json:
        out(
            f"cascade of {render.short(plan.fork.id)} in place of "
            f"{render.short(plan.original.id)}: {plan.total} steps to "
            f"{render.short(plan.leaf_id)}" + (f", {plan.done} made before" if plan.done else "")
        )
    with said_once(cli.settings.data_dir):
        engine = session_engine(cli.settings, cli.store, session_id)
    runner = Cascade(engine, cli.store)
    shown = _Shown(cli, plan)

    async def run() -> CascadeOutcome:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, runner.stop)
            handled = True
        except (NotImplementedError, RuntimeError):  # not the main thread
            handled = False
        try:
            with shown:
                return await runner.run(plan, on_begin=shown.begin, on_step=shown.made)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            await engine.aclose()

    try:
        outcome = asyncio.run(run())
    except OrchestratorError as error:
        sys.stderr.write(f"note: the steps made are kept; {_resume_hint(plan)}\n")
        cli.fail(error)
    _report(cli, outcome)
    if outcome.stopped:
        sys.stderr.write(f"stopped: every step made is kept; {_resume_hint(plan)}\n")
        raise typer.Exit(EXIT_STOPPED)
