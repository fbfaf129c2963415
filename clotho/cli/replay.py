"""``clotho replay NODE``: a generated reply's prompt sent again with something changed
(:mod:`orchestrator.replay`), each answer a new alternative of it.

``--model M`` (the global option: here it is the replay's model, asked on the session's
connection; ``--api-base`` names another server) or ``--profile P``, ``--param k=v``
(sampler settings, JSON values), ``--n K``; ``--lore-off ID``, ``--lore-on ID``,
``--note TEXT``, ``--template FILE`` (its name is the file's, ``system.j2``) build the
prompt again. Each new alternative is printed with what changed; ``--json``: a list of
them (:func:`clotho.replays.replay_document`). A warning (the reply incomplete, the world
state not updated) is printed under its alternative.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from clotho.errors import UsageError
from clotho.replays import MAX_TEMPLATE_CHARS, ReplayAsk, changes_for, replay_document
from clotho.settings import Settings
from clotho.wiring import session_engine

from . import render
from ._app import Cli, app, command
from .playscreen import state_changes
from .style import out, paint

if TYPE_CHECKING:
    from orchestrator import TurnResult
    from orchestrator.replay import TemplateChange

__all__ = ["changed_line", "replay"]


def _param(text: str) -> tuple[str, Any]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise UsageError(f"--param takes NAME=VALUE (temperature=1.1), not {text!r}")
    try:
        parsed: Any = json.loads(value)
    except json.JSONDecodeError:
        parsed = value
    return name.strip(), parsed


def _template(path: Path) -> tuple[str, TemplateChange]:
    """A template file's name (its stem: ``system.j2`` replaces ``system``) and source."""
    from orchestrator.replay import TemplateChange

    try:
        if path.stat().st_size > MAX_TEMPLATE_CHARS * 4:
            raise UsageError(f"{path}: a template is at most {MAX_TEMPLATE_CHARS} characters")
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"{path}: cannot be read as a template ({error})") from None
    if len(source) > MAX_TEMPLATE_CHARS:
        raise UsageError(f"{path}: a template is at most {MAX_TEMPLATE_CHARS} characters")
    if "\x00" in source:
        raise UsageError(f"{path}: a template must not contain NUL characters (\\x00)")
    return path.name.split(".")[0], TemplateChange(source, str(path))


def changed_line(changed: dict[str, Any]) -> str:
    """What a replay changed, on one line: ``model gm -> other · temperature 0.7 -> 1.1``."""
    parts = []
    for key, value in changed.items():
        if key == "params":
            parts += [f"{name} {old} -> {new}" for name, (old, new) in value.items()]
        elif key == "lore":
            parts += [f"lore off {entry}" for entry in value["off"]]
            parts += [f"lore on {entry}" for entry in value["on"]]
        elif key == "templates":
            parts += [f"template {name}: {new}" for name, (_, new) in value.items()]
        elif key == "note":
            parts.append(f"note {value[1]!r}" if value[1] else "no note")
        else:
            parts.append(f"{key} {value[0]} -> {value[1]}")
    return " · ".join(parts)


@command(app, "replay")
def replay(
    cli: Cli,
    node: Annotated[
        str, typer.Argument(help="The generated reply to replay: id or prefix, HEAD~N.")
    ],
    profile: Annotated[
        str | None,
        typer.Option("--profile", help="Another connection profile (its model, server, key)."),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option("--param", metavar="NAME=VALUE", help="A sampler setting (temperature=1.1)."),
    ] = None,
    n: Annotated[int, typer.Option("--n", min=1, help="How many alternatives (at most 8).")] = 1,
    lore_off: Annotated[
        list[str] | None,
        typer.Option("--lore-off", metavar="BOOK:UID", help="Leave this lore entry out."),
    ] = None,
    lore_on: Annotated[
        list[str] | None,
        typer.Option("--lore-on", metavar="BOOK:UID", help="Put this lore entry in."),
    ] = None,
    note: Annotated[
        str | None, typer.Option("--note", help='Another author\'s note ("": none).')
    ] = None,
    template: Annotated[
        list[Path] | None,
        typer.Option("--template", metavar="FILE", help="A template replaced (system.j2...)."),
    ] = None,
) -> None:
    """Send a generated reply's prompt again with something changed: another model
    (--model, asked on the session's connection) or profile, other sampler settings
    (sent as stored), or another template, lore or author's note (built again). Each
    answer is a new alternative of the reply, HEAD on the last."""
    from orchestrator.replay import replay as replayed

    session_id = cli.session_id()
    templates = dict(_template(path) for path in template or [])
    try:
        ask = ReplayAsk(
            model=cli.options["model"],
            api_base=cli.options["api_base"],
            profile=profile,
            params=dict(_param(item) for item in param or []),
            lore_off=lore_off or [],
            lore_on=lore_on or [],
            note=note,
        )
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}" for item in error.errors()
        )
        raise UsageError(f"replay: {problems}") from None
    # the session's engine plays with the session's model: --model is the replay's
    given = {"database_url": cli.options["db"], "session": cli.options["session"]}
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    engine = session_engine(settings, cli.store, session_id)
    changes = changes_for(settings, engine, ask, templates)

    async def run() -> list[TurnResult]:
        try:
            return await replayed(engine, session_id, node, changes, n=n)
        finally:
            await engine.aclose()

    results = asyncio.run(run())
    documents = [replay_document(cli.store, session_id, result) for result in results]

    def show() -> None:
        for document in documents:
            made = document["node"]
            record = document["replay"]
            # what this alternative did to the world state (as a turn's footer says)
            moved = state_changes(cli.store.diff(session_id, made["parent_id"], made["id"]))
            state = " · ".join(change.text() for change in moved) or "no state change"
            out(
                paint(f"{render.short(made['id'])}  replay of {render.short(record['of'])}", "bold")
                + paint(f"  {record['sent']}: {changed_line(record['changed'])}", "dim"),
                made["content"],
                paint(state, "dim"),
                *(paint(f"warning: {text}", "yellow") for text in document["warnings"]),
                "",
            )
        out(paint(f"HEAD: {render.short(documents[-1]['node']['id'])}", "dim"))

    cli.emit(documents, show)
