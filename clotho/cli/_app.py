"""The Typer application, the global options every command takes, and reporting.

Global options (``--db``, ``--session``, ``--json``, ``--model``, ``--api-base``) may
be given before the command (``clotho --json log``) or after it (``clotho log
--json``): :func:`command` adds them to every command's own options.

Exit codes: 0 done; 1 refused or failed (one line on stderr); 2 wrong usage;
3 a conflicting concurrent write (retry).
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable
from typing import Annotated, Any, NoReturn

import typer

from clotho.errors import ClothoError, NoSessionError
from clotho.settings import Settings
from mnemosyne import ConflictError, MnemosyneError, Store
from planner.errors import PlannerError

from .cells import terminal_width, wrap_line
from .logs import show_warnings

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_FAILED",
    "Cli",
    "app",
    "campaign_app",
    "command",
    "db_app",
    "group_default",
    "import_app",
    "lore_app",
    "session_app",
]

EXIT_FAILED = 1
EXIT_CONFLICT = 3
LAST_SESSION = "last_session_id"

app = typer.Typer(
    name="clotho",
    help="Run text-RPG campaigns with language models; the story is a tree.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
session_app = typer.Typer(help="Create, list and choose sessions.", no_args_is_help=True)
db_app = typer.Typer(help="The database itself.", no_args_is_help=True)
campaign_app = typer.Typer(help="Campaign folders.", no_args_is_help=True)
import_app = typer.Typer(
    help="Bring files from other tools into the session.", no_args_is_help=True
)
lore_app = typer.Typer(help="The session's lorebooks.", no_args_is_help=True)
app.add_typer(session_app, name="session")
app.add_typer(import_app, name="import")
app.add_typer(lore_app, name="lore")
app.add_typer(campaign_app, name="campaign")
app.add_typer(db_app, name="db")

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the database (env CLOTHO_DATABASE_URL; "
        "default: clotho.db in the user's data directory).",
        show_default=False,
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        help="The session to act on, id or prefix (env CLOTHO_SESSION; default: the one "
        "used last).",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine-readable output: one JSON document on stdout.")
]
ModelOption = Annotated[
    str | None,
    typer.Option("--model", help="litellm model string (env CLOTHO_MODEL).", show_default=False),
]
ApiBaseOption = Annotated[
    str | None,
    typer.Option(
        "--api-base", help="The model server's base URL (env CLOTHO_API_BASE).", show_default=False
    ),
]

_GLOBALS: dict[str, Any] = {
    "db": DbOption,
    "session": SessionOption,
    "json_output": JsonOption,
    "model": ModelOption,
    "api_base": ApiBaseOption,
}
_DEFAULTS: dict[str, Any] = {
    "db": None,
    "session": None,
    "json_output": False,
    "model": None,
    "api_base": None,
}


def _print_version(value: bool) -> None:
    if value:
        from clotho import __version__

        sys.stdout.write(f"clotho {__version__}\n")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
    db: DbOption = None,
    session: SessionOption = None,
    json_output: JsonOption = False,
    model: ModelOption = None,
    api_base: ApiBaseOption = None,
) -> None:
    del version  # handled by its callback
    ctx.obj = {
        "db": db,
        "session": session,
        "json_output": json_output,
        "model": model,
        "api_base": api_base,
    }


class Cli:
    """What a command needs: settings, the store (opened on first use), output."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.json: bool = bool(options["json_output"])
        self._options = options
        self._settings: Settings | None = None
        self._store: Store | None = None

    @property
    def options(self) -> dict[str, Any]:
        """The global options as given on the command line (``None`` where not given)."""
        return dict(self._options)

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            given = {
                "database_url": self._options["db"],
                "session": self._options["session"],
                "model": self._options["model"],
                "api_base": self._options["api_base"],
            }
            self._settings = Settings(**{k: v for k, v in given.items() if v is not None})
        return self._settings

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store.open(self.settings.resolved_database_url)
        return self._store

    def session_id(self) -> str:
        """The session to act on: ``--session``/``CLOTHO_SESSION``, else the last used."""
        explicit = self.settings.session
        if explicit:
            session_id = self.store.session(explicit).id
            self.remember(session_id)
            return session_id
        last = self.store.preference(LAST_SESSION)
        if last is None:
            raise NoSessionError(
                "no session chosen: create one with `clotho session new` or pass --session"
            )
        try:
            return self.store.session(last).id
        except MnemosyneError as error:
            raise NoSessionError(
                f"the session used last ({last}) is gone: choose one with --session"
            ) from error

    def remember(self, session_id: str) -> None:
        """Make ``session_id`` the default of later commands."""
        if self.store.preference(LAST_SESSION) != session_id:
            self.store.set_preference(LAST_SESSION, session_id)

    def emit(self, document: Any, text: Callable[[], None]) -> None:
        """``document`` as JSON on stdout with ``--json``; otherwise call ``text``."""
        if self.json:
            sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
        else:
            text()

    def fail(self, error: Exception) -> NoReturn:
        """One line on stderr naming what was wrong (word-wrapped on a terminal); exit 1
        (3 for a conflict)."""
        message = " ".join(str(error).split())
        lines = wrap_line(message, terminal_width(sys.stderr), lead="error: ", indent=2)
        sys.stderr.write("".join(line + "\n" for line in lines))
        raise typer.Exit(EXIT_CONFLICT if isinstance(error, ConflictError) else EXIT_FAILED)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def _turn_loop_error(error: Exception) -> bool:
    """An error of the turn loop's hierarchies (a model's, a template's), which a
    command that generates outside :func:`clotho.cli.play.run_turn` may meet: looked
    up only if they were loaded (importing the turn loop costs a command that never
    uses it a third of a second)."""
    roots = [
        getattr(sys.modules.get(module), name, None)
        for module, name in (
            ("orchestrator.errors", "OrchestratorError"),
            ("prompts.errors", "PromptError"),
        )
    ]
    return any(isinstance(root, type) and isinstance(error, root) for root in roots)


def command(group: typer.Typer, name: str | None = None, **kwargs: Any) -> Callable[..., Any]:
    """Register ``fn(cli, ...)`` as a command of ``group``, with the global options.

    The first parameter of ``fn`` receives the :class:`Cli`; the others are the
    command's own Typer parameters. Errors of the store, the shell, the planner and the
    turn loop become one line on stderr and an exit code.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(fn, eval_str=True)
        own = list(signature.parameters.values())[1:]

        @functools.wraps(fn)
        def wrapper(**values: Any) -> Any:
            ctx: typer.Context = values.pop("_ctx")
            return _run(fn, _options(ctx, values), values)

        wrapper.__signature__ = signature.replace(parameters=[*own, *_global_parameters()])  # type: ignore[attr-defined]
        wrapper.__annotations__ = {}
        group.command(name, **kwargs)(wrapper)
        return fn

    return decorate


def _global_parameters() -> list[inspect.Parameter]:
    """The Typer context and the global options, as keyword parameters of a command."""
    return [
        inspect.Parameter("_ctx", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context),
        *(
            inspect.Parameter(
                key, inspect.Parameter.KEYWORD_ONLY, default=_DEFAULTS[key], annotation=hint
            )
            for key, hint in _GLOBALS.items()
        ),
    ]


def _options(ctx: typer.Context, values: dict[str, Any]) -> dict[str, Any]:
    """The global options (taken out of ``values``): given here, else given before."""
    inherited = ctx.obj or _DEFAULTS
    options = {}
    for key in _GLOBALS:
        mine = values.pop(key)
        options[key] = mine if mine not in (None, False) else inherited.get(key)
    return options


def _run(fn: Callable[..., Any], options: dict[str, Any], values: dict[str, Any]) -> Any:
    """``fn(cli, **values)``, its errors one line on stderr and an exit code."""
    show_warnings()  # what the library logs, on stderr
    cli = Cli(options)
    try:
        return fn(cli, **values)
    except (MnemosyneError, ClothoError, PlannerError) as error:
        cli.fail(error)
    except Exception as error:
        if not _turn_loop_error(error):
            raise
        cli.fail(error)
    finally:
        cli.close()


def group_default(group: typer.Typer) -> Callable[..., Any]:
    """Register ``fn(cli)`` as what ``clotho GROUP`` does with no subcommand (``clotho
    cast``: the list), taking the global options as :func:`command` does; the options
    given there reach the group's subcommands too (``clotho cast --json list``). The
    group is made with ``invoke_without_command=True``."""

    def decorate(fn: Callable[[Cli], Any]) -> Callable[[Cli], Any]:
        def callback(**values: Any) -> Any:
            ctx: typer.Context = values.pop("_ctx")
            options = _options(ctx, values)
            ctx.obj = options
            if ctx.invoked_subcommand is None:
                return _run(fn, options, values)
            return None

        callback.__signature__ = inspect.Signature(_global_parameters())  # type: ignore[attr-defined]
        callback.__doc__ = fn.__doc__
        group.callback(invoke_without_command=True)(callback)
        return fn

    return decorate
