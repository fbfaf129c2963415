"""Opening databases: migrations, schema checks, and files that are not ours."""

from __future__ import annotations

import multiprocessing
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect, text

from mnemosyne import StorageError, Store
from mnemosyne._engine import KNOWN_REVISIONS, MIGRATIONS, create_store_engine, upgrade
from mnemosyne._schema import SCHEMA_REVISION, metadata
from mnemosyne._search import is_search_object


def _scripts() -> ScriptDirectory:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(config)


def test_the_code_expects_the_head_of_the_migrations() -> None:
    assert _scripts().get_current_head() == SCHEMA_REVISION == KNOWN_REVISIONS[-1]


def test_migrations_build_exactly_the_tables_of_the_code(
    backend: str, blank_database_url: Callable[[str], str]
) -> None:
    engine = create_store_engine(blank_database_url(backend))
    try:
        upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(
                conn,
                opts={
                    "compare_type": True,
                    # the search index (migration 0008) is not described by the metadata
                    "include_name": lambda name, *_: not is_search_object(name),
                },
            )
            assert compare_metadata(context, metadata) == []
    finally:
        engine.dispose()


def test_migrations_go_down_and_up_again(
    backend: str, blank_database_url: Callable[[str], str]
) -> None:
    engine = create_store_engine(blank_database_url(backend))
    try:
        upgrade(engine)
        _downgrade(engine)
        with engine.connect() as conn:
            assert set(inspect(conn).get_table_names()) <= {"alembic_version"}
        upgrade(engine)
        with engine.connect() as conn:
            assert {"sessions", "nodes", "preferences"} <= set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def _downgrade(engine) -> None:  # type: ignore[no-untyped-def]
    from alembic import command

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.connect().execution_options(mnemosyne_write=True) as conn, conn.begin():
        config.attributes["connection"] = conn
        command.downgrade(config, "base")


def test_a_new_sqlite_file_migrates_itself(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "clotho.db"
    with Store.open(f"sqlite:///{path}") as store:
        session = store.create_session()
        store.append(session.id, "user", "hi")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (
            SCHEMA_REVISION,
        )
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.postgres
def test_a_server_database_waits_for_db_upgrade(blank_database_url: Callable[[str], str]) -> None:
    url = blank_database_url("postgresql")
    with pytest.raises(StorageError, match="clotho db upgrade"):
        Store.open(url)
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as conn:
        assert inspect(conn).get_table_names() == []
    engine.dispose()
    with Store.open(url, migrate=True) as store:
        assert store.dialect == "postgresql"
    Store.open(url).close()  # now current: opens without migrating


def _snapshot(path: Path) -> bytes:
    return path.read_bytes()


def test_a_file_that_is_not_a_database_is_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"These are my campaign notes, not a database.\n" * 100)
    before = _snapshot(path)
    with pytest.raises(StorageError, match="not a usable database") as caught:
        Store.open(f"sqlite:///{path}")
    assert str(path) in str(caught.value)
    assert _snapshot(path) == before
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0


def test_a_corrupt_clotho_database_fails_clearly_and_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "clotho.db"
    with Store.open(f"sqlite:///{path}") as store:
        sid = store.create_session().id
        with store.transaction(sid) as tx:
            for i in range(300):
                tx.append("user", f"message {i} " * 20)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    # Scribble over the pages after the schema: the tables' contents.
    for offset in range(8192, len(data), 4096):
        data[offset : offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    before = _snapshot(path)
    with pytest.raises(StorageError), Store.open(f"sqlite:///{path}") as store:
        store.projection(sid)
    assert _snapshot(path) == before


def test_a_database_of_another_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE recipes (name TEXT)")
    before = _snapshot(path)
    with pytest.raises(StorageError, match=r"not a Clotho database.*recipes"):
        Store.open(f"sqlite:///{path}")
    assert _snapshot(path) == before


def test_a_newer_schema_is_refused(store: Store, database_url: str) -> None:
    with store.write() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    store.close()
    with pytest.raises(StorageError, match=r"'9999'.*newer"):
        Store.open(database_url)


def _open_and_write(url: str) -> str:
    with Store.open(url) as store:
        session = store.create_session()
        store.append(session.id, "user", "hi")
        return session.id


def test_two_processes_may_create_the_same_file_at_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        made = pool.map(_open_and_write, [url, url])
    with Store.open(url) as store:
        assert {s.id for s in store.sessions()} == set(made)


def test_a_closed_database_is_one_self_contained_file(tmp_path: Path) -> None:
    source = tmp_path / "a.db"
    with Store.open(f"sqlite:///{source}") as store:
        sid = store.create_session().id
        store.append(sid, "user", "kept")
    copy = tmp_path / "b.db"
    shutil.copy(source, copy)
    with Store.open(f"sqlite:///{copy}") as store:
        assert [n.content for n in store.projection(sid)] == ["kept"]


def test_opening_a_current_database_does_not_load_alembic(tmp_path: Path) -> None:
    """Start-up: the schema check is one query; Alembic is imported only to migrate."""
    url = f"sqlite:///{tmp_path / 'current.db'}"
    Store.open(url).close()
    probe = (
        "import sys; from mnemosyne import Store; Store.open(sys.argv[1]).close(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'sqlalchemy')"
        " and ('alembic' in m or '.orm' in m)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, url], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_a_database_of_the_first_schema_keeps_its_story(
    backend: str, blank_database_url: Callable[[str], str]
) -> None:
    """0001 -> 0002: nodes written before world state existed keep their deltas, and
    their states are computed without keyframes (replayed from the root)."""
    url = blank_database_url(backend)
    engine = create_store_engine(url)
    try:
        upgrade(engine, "0001")
        with engine.connect().execution_options(mnemosyne_write=True) as conn, conn.begin():
            conn.execute(
                text(
                    "INSERT INTO sessions (id, title, version, created_at, updated_at, metadata) "
                    "VALUES (:id, 'old', 2, :t, :t, '{}')"
                ),
                {"id": "a" * 32, "t": "2026-01-01 00:00:00.000000"},
            )
            spk = conn.execute(text("SELECT pk FROM sessions")).scalar_one()
            parent = None
            for i, delta in enumerate(['[{"op":"set","path":"hp","value":10}]', None]):
                conn.execute(
                    text(
                        "INSERT INTO nodes (id, session_pk, parent_pk, role, content, enabled, "
                        "created_at, metadata, delta) VALUES (:id, :s, :p, 'user', 'x', true, "
                        ":t, '{}', :d)"
                    ),
                    {
                        "id": str(i) * 32,
                        "s": spk,
                        "p": parent,
                        "t": "2026-01-01 00:00:00.000000",
                        "d": delta,
                    },
                )
                parent = conn.execute(text("SELECT max(pk) FROM nodes")).scalar_one()
            conn.execute(text("UPDATE sessions SET head_pk = :h"), {"h": parent})
    finally:
        engine.dispose()
    with Store.open(url, migrate=True) as store:
        assert store.state("a" * 32).variables == {"hp": 10}
        assert store.blame("a" * 32, "hp").node_id == "0" * 32
        store.append("a" * 32, "assistant", "y", delta=[{"op": "inc", "path": "hp", "value": 1}])
        assert store.state("a" * 32).variables == {"hp": 11}
