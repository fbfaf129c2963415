"""The first hour's errors and warnings, as a new player meets them on the command line:
no model says what to set; a model with no key says which variable, at once, sending
nothing; a refused key is one line, asked once; lore found by keywords only is said when
it starts (and again when its cause changes or comes back), not before every turn."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from clotho.cli._app import command
from clotho.cli.logs import ONCE, PACKAGES, SAID_FILE, said_once, show_warnings
from orchestrator import ModelError
from orchestrator.loopback import ModelServer, Reply
from tests._fixtures import ELDORIA as BOOK

from .terminal import Terminal
from .test_cli import InProcess, Run

KEYWORDS_ONLY = "warning: lore is found by keywords only: "


def script(request: dict[str, Any]) -> str:
    if "response_format" in request:  # the state extraction
        return '{"operations": []}'
    return "The innkeeper nods."


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer(script) as server:
        yield server


@pytest.fixture
def run(tmp_path: Path) -> Run:
    run = InProcess(f"sqlite:///{tmp_path / 'first.db'}", tmp_path / "home")
    for name in ("CLOTHO_MODEL", "CLOTHO_API_BASE", "CLOTHO_API_KEY", "GROQ_API_KEY"):
        run.env.pop(name, None)
    run("session", "new")
    return run


def nothing_listens() -> str:
    """A Chroma server URL where nothing answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.mark.parametrize("command", [["say", "Hello?"], ["reroll"], ["play"]])
def test_no_model_names_the_variable_to_set(run: Run, command: list[str]) -> None:
    line = run.fails(*command)
    assert line.startswith("error: no model to play with: pick a connection profile")
    assert "set CLOTHO_MODEL to a litellm model" in line
    assert "CLOTHO_MODEL=openai/gpt-4o-mini" in line and "campaign.toml's [model]" in line


def test_no_key_is_said_at_once_and_nothing_is_sent(run: Run, model: ModelServer) -> None:
    run.env.update({"CLOTHO_MODEL": "groq/gm", "GROQ_API_BASE": model.url})
    line = run.fails("say", "Hello?")
    assert line == (
        "error: no API key for groq/gm: set GROQ_API_KEY (read by litellm for groq) or "
        "CLOTHO_API_KEY; nothing was sent"
    )
    assert model.requests == []
    assert run.json("log") == []  # nothing stored
    run.env["GROQ_API_KEY"] = "gsk-test"  # what the line said to do
    assert run("say", "Hello?").stdout.startswith("The innkeeper nods.")


def test_a_refused_key_is_one_line_and_not_retried(run: Run) -> None:
    refused = Reply(status=401, error="Incorrect API key provided")
    with ModelServer([refused, refused, refused]) as server:
        run.env.update(
            {"CLOTHO_MODEL": "openai/gm", "CLOTHO_API_BASE": server.url, "CLOTHO_API_KEY": "sk"}
        )
        line = run.fails("say", "Hello?")
        assert len(server.requests) == 1
    assert line == (
        f"error: the provider at {server.url} refused the API key in CLOTHO_API_KEY for "
        "openai/gm (HTTP 401): check the key (Incorrect API key provided)"
    )


def keyword_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith(KEYWORDS_ONLY)]


def test_keywords_only_is_said_when_it_starts_not_before_every_turn(
    run: Run, model: ModelServer
) -> None:
    down = nothing_listens()
    run.env.update(
        {
            "CLOTHO_MODEL": "openai/gm",
            "CLOTHO_API_BASE": model.url,
            "CLOTHO_VECTORS": "true",
            "CLOTHO_CHROMA_URL": down,
        }
    )
    imported = run("import", "lorebook", str(BOOK), "--name", "World")
    # what was asked for (indexing) could not be done: the warning alone says so
    (warning,) = keyword_warnings(imported.stderr)
    assert f"Chroma at {down}" in warning
    assert "indexing" not in imported.stdout + imported.stderr
    first = run("say", "Hello?")
    assert keyword_warnings(first.stderr) == [warning]  # playing starts: said
    for _ in range(2):  # the same cause: not again
        again = run("say", "And now?")
        assert keyword_warnings(again.stderr) == []
        assert again.stdout.startswith("The innkeeper nods.")
    # asked about the lore: the answer says it every time
    assert keyword_warnings(run("lore", "test", "Is that a Shadowfang?").stderr) == [warning]

    other = nothing_listens()  # another cause: said again
    run.env["CLOTHO_CHROMA_URL"] = other
    (moved,) = keyword_warnings(run("say", "Still there?").stderr)
    assert f"Chroma at {other}" in moved
    assert keyword_warnings(run("say", "Still?").stderr) == []

    run.env["CLOTHO_VECTORS"] = "false"  # no index asked for: the cause is gone
    assert keyword_warnings(run("say", "Quiet?").stderr) == []
    run.env["CLOTHO_VECTORS"] = "true"  # and back: said again
    assert keyword_warnings(run("say", "Back?").stderr) == [moved]


def test_an_error_before_the_lore_is_read_forgets_nothing(run: Run, model: ModelServer) -> None:
    run.env.update(
        {
            "CLOTHO_MODEL": "openai/gm",
            "CLOTHO_API_BASE": model.url,
            "CLOTHO_VECTORS": "true",
            "CLOTHO_CHROMA_URL": nothing_listens(),
        }
    )
    run("import", "lorebook", str(BOOK), "--name", "World")
    assert len(keyword_warnings(run("say", "Hello?").stderr)) == 1
    del run.env["CLOTHO_MODEL"]
    run.fails("say", "Hello?")  # no model: refused before the lore is looked at
    run.env["CLOTHO_MODEL"] = "openai/gm"
    assert keyword_warnings(run("say", "Hello?").stderr) == []


def test_a_turn_loop_error_outside_a_turn_is_one_line() -> None:
    group = typer.Typer()

    @command(group, "plan")
    def plan(cli: object) -> None:
        """Fails as a model call outside run_turn would (a planner's, a preview's)."""
        raise ModelError("no API key for groq/gm: set GROQ_API_KEY", "no_key")

    @command(group, "crash")
    def crash(cli: object) -> None:
        """Any other error is a bug: not hidden."""
        raise RuntimeError("a bug")

    runner = CliRunner()
    failed = runner.invoke(group, ["plan"])
    assert failed.exit_code == 1
    assert failed.stderr == "error: no API key for groq/gm: set GROQ_API_KEY\n"
    crashed = runner.invoke(group, ["crash"])
    assert isinstance(crashed.exception, RuntimeError)


@pytest.fixture
def terminal() -> Iterator[None]:
    """The command line's warnings on stderr in this process, as a command has them."""
    loggers = [logging.getLogger(name) for name in PACKAGES]
    before = [list(logger.handlers) for logger in loggers]
    show_warnings()
    yield
    for logger, handlers in zip(loggers, before, strict=True):
        logger.handlers[:] = handlers


@pytest.mark.usefixtures("terminal")
def test_a_memory_of_warnings_that_cannot_be_read_is_said_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = logging.getLogger("clotho.lore")
    (tmp_path / SAID_FILE).write_text("{not json")
    for _ in range(2):
        with said_once(tmp_path):
            log.warning("lore is found by keywords only: down", extra={ONCE: "lore_keywords"})
    assert capsys.readouterr().err == "warning: lore is found by keywords only: down\n"
    assert json.loads((tmp_path / SAID_FILE).read_text()) == {
        "lore_keywords": "lore is found by keywords only: down"
    }
    with said_once(tmp_path):  # nothing said: the cause is gone, and forgotten
        pass
    assert json.loads((tmp_path / SAID_FILE).read_text()) == {}
    for _ in range(2):  # outside said_once (lore test, the imports): said every time
        log.warning("lore is found by keywords only: down", extra={ONCE: "lore_keywords"})
    assert capsys.readouterr().err == "warning: lore is found by keywords only: down\n" * 2


def test_an_error_on_a_terminal_is_wrapped_by_words(tmp_path: Path) -> None:
    run = InProcess(f"sqlite:///{tmp_path / 'c.db'}", tmp_path / "home")
    run("session", "new")
    run("add", "user", "hello")
    piped = run.fails("checkout", "HEAD~9")  # to a pipe: one line, whole
    with Terminal(["checkout", "HEAD~9"], run.env, columns=40) as term:
        assert term.wait_exit() == 1
        shown = term.display()
    assert term.wrapped() == [], shown  # no line ran past the edge
    assert shown[0].startswith("error: ") and len(shown) > 2
    assert " ".join(line.strip() for line in shown) == piped
