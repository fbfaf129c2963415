"""Shared fixtures: a store on every backend, each test on a fresh database.

Storage tests take the ``store`` (or ``database_url``) fixture and run once on
SQLite and once on PostgreSQL. The PostgreSQL server is started by the test
session itself (see ``tests/_postgres.py``). On a machine without PostgreSQL those
runs are skipped with the reason; under ``CI=true`` a missing server fails them.
The Chroma server of the ``chroma_server`` fixture is started the same way (see
``tests/_chroma.py``), once, by the first test that asks for it.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest

from mnemosyne import Store
from orchestrator.loopback import ModelServer

from . import _chroma
from ._postgres import ENV_URL, throwaway_server

BACKENDS = ["sqlite", "postgresql"]
_counter = itertools.count()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _server(
    env: str, start: Callable[[], AbstractContextManager[str]], needs: str
) -> Iterator[str]:
    """The URL of the server named by the variable ``env``, else of one ``start`` runs
    for the session (stopped after). One that does not start skips the tests that need
    it, and fails them under ``CI=true``."""
    url = os.environ.get(env)
    if url:
        yield url.rstrip("/")
        return
    try:
        server = start()
        base = server.__enter__()
    except (FileNotFoundError, RuntimeError) as error:
        reason = f"{needs}: {error}"
        if _in_ci():
            pytest.fail(f"{reason} (CI=true: a server that does not start is a failure)")
        pytest.skip(reason)
    try:
        yield base
    finally:
        server.__exit__(None, None, None)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server (without a database name)."""
    yield from _server(ENV_URL, throwaway_server, "PostgreSQL tests need a server")


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[str]:
    """The URL of a Chroma server (``chroma run`` on a loopback port)."""
    yield from _server(_chroma.ENV_URL, _chroma.throwaway_server, "Chroma tests need `chroma run`")


def _admin(base: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(statement)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def postgres_template(postgres_server: str) -> str:
    """A database migrated once, copied for every test (much faster than migrating)."""
    name = "clotho_template"
    _admin(postgres_server, f"DROP DATABASE IF EXISTS {name}")
    _admin(postgres_server, f"CREATE DATABASE {name}")
    Store.open(f"{postgres_server}/{name}", migrate=True).close()
    return name


def _drop(base: str, name: str) -> None:
    """A test's database dropped after it (what still holds it is cut off): the server
    keeps only the databases of the tests running."""
    _admin(base, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def blank_database_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[Callable[[str], str]]:
    """A factory of URLs of new, empty databases of a backend (no schema yet)."""
    made: list[tuple[str, str]] = []

    def make(backend: str) -> str:
        n = next(_counter)
        if backend == "sqlite":
            return f"sqlite:///{tmp_path / f'blank{n}.db'}"
        base = request.getfixturevalue("postgres_server")
        name = f"clotho_blank_{os.getpid()}_{n}"
        _admin(base, f"CREATE DATABASE {name}")
        made.append((base, name))
        return f"{base}/{name}"

    yield make
    for base, name in made:
        _drop(base, name)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def database_url(backend: str, request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:
    """The URL of a fresh database with the current schema, on ``backend``."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'clotho.db'}"
        return
    base = request.getfixturevalue("postgres_server")
    template = request.getfixturevalue("postgres_template")
    name = f"clotho_test_{os.getpid()}_{next(_counter)}"
    _admin(base, f"CREATE DATABASE {name} TEMPLATE {template}")
    yield f"{base}/{name}"
    _drop(base, name)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    with Store.open(database_url, migrate=True) as opened:
        yield opened


@pytest.fixture
def serve() -> Iterator[Callable[..., ModelServer]]:
    """Starts a scripted OpenAI-compatible model server on loopback; every one is stopped
    after the test."""
    servers: list[ModelServer] = []

    def start(script: Any) -> ModelServer:
        server = ModelServer(script).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
