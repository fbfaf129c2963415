"""Opening a database: engine settings per dialect, the schema check, migrations.

The schema check reads ``alembic_version`` with one query and imports Alembic only
when the database is not current, so opening a current database stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc, inspect, text
from sqlalchemy.engine import make_url

from . import _dialect as dialect
from ._schema import SCHEMA_REVISION
from ._search import register_sqlite_functions
from .errors import StorageError

#: Every revision this code can read or migrate from, oldest first.
KNOWN_REVISIONS: tuple[str, ...] = (
    "0001",
    "0002",
    "0003",
    "0004",
    "0005",
    "0006",
    "0007",
    "0008",
    "0009",
    "0010",
    "0011",
)

WRITE_OPTION = "mnemosyne_write"
MIGRATIONS = Path(__file__).parent / "migrations"


def create_store_engine(url: str) -> Engine:
    """An engine for ``url`` with the settings Clotho relies on.

    SQLite: foreign keys on, WAL, ``synchronous=NORMAL`` (durable across a crash of
    the program; a power cut may lose the last commits but never corrupts), a 30 s
    busy timeout, and transactions begun by us: ``BEGIN IMMEDIATE`` for writes, so
    writers queue instead of failing to upgrade a read lock.
    """
    try:
        parsed = make_url(url)
    except exc.ArgumentError as error:
        raise StorageError(
            f"{url!r} is not a database URL (sqlite:///path or postgresql://...)"
        ) from error
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StorageError(
            f"{parsed.render_as_string(hide_password=True)}: Clotho stores on SQLite or "
            f"PostgreSQL, not {backend}"
        )
    if backend == "sqlite":
        database = parsed.database
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"timeout": 30.0})
        _configure_sqlite(engine)
        return engine
    if parsed.drivername == "postgresql":
        # Plain postgresql:// means psycopg 3 here (the driver we depend on).
        parsed = parsed.set(drivername="postgresql+psycopg")
    return create_engine(parsed, pool_pre_ping=True)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let us issue BEGIN ourselves (pysqlite's own handling is not serializable).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA synchronous = NORMAL")
            # Long stories are read whole (the projection): keep pages in memory.
            cursor.execute("PRAGMA cache_size = -65536")  # KiB, allocated as used
            cursor.execute("PRAGMA mmap_size = 268435456")
        finally:
            cursor.close()
        register_sqlite_functions(dbapi_connection)

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


def describe(engine: Engine) -> str:
    """The database's address without a password, for messages."""
    return engine.url.render_as_string(hide_password=True)


def schema_revision(engine: Engine) -> str | None:
    """The stored schema revision, ``None`` for a database without one.

    Raises:
        StorageError: the file is not a database, or the database has tables that
            are not ours.
    """
    try:
        with engine.connect() as conn:
            found: str | None = conn.execute(
                text("SELECT version_num FROM alembic_version")
            ).scalar()
            return found
    except exc.DBAPIError as error:
        if _is_not_a_database(error):
            raise StorageError(
                f"{describe(engine)} is not a usable database ({reason(error)}); "
                "it was left untouched"
            ) from error
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
    except exc.DBAPIError as error:
        raise StorageError(f"cannot read {describe(engine)}: {reason(error)}") from error
    if tables:
        listed = ", ".join(sorted(tables)[:6])
        raise StorageError(
            f"{describe(engine)} is not a Clotho database: it has tables ({listed}) "
            "but no Clotho schema version; it was left untouched"
        )
    return None


def ensure_schema(engine: Engine, *, migrate: bool) -> None:
    """Check that the database is at ``SCHEMA_REVISION``, migrating it if allowed.

    Raises:
        StorageError: the database is corrupt, foreign, newer than this code, or
            behind and ``migrate`` is false.
    """
    current = schema_revision(engine)
    if current == SCHEMA_REVISION:
        dialect.use_wal(engine)
        return
    if current is not None and current not in KNOWN_REVISIONS:
        raise StorageError(
            f"{describe(engine)} has schema revision {current!r}, which this version of "
            "Clotho does not know (it is newer); upgrade Clotho"
        )
    if not migrate:
        state = "has no Clotho schema" if current is None else f"is at revision {current!r}"
        raise StorageError(
            f"{describe(engine)} {state}, not {SCHEMA_REVISION!r}: run `clotho db upgrade`"
        )
    dialect.use_wal(engine)
    upgrade(engine)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply the migrations up to ``revision`` in one transaction.

    Concurrent upgrades of one database queue behind a lock (``BEGIN IMMEDIATE`` on
    SQLite, an advisory lock on PostgreSQL); the second finds the work done.
    """
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.connect().execution_options(**{WRITE_OPTION: True}) as conn, conn.begin():
            dialect.lock_for_migration(conn)
            config.attributes["connection"] = conn
            command.upgrade(config, revision)
    except exc.DBAPIError as error:
        raise StorageError(f"cannot migrate {describe(engine)}: {reason(error)}") from error


def _is_not_a_database(error: exc.DBAPIError) -> bool:
    message = str(error.orig).lower()
    return "not a database" in message or "malformed" in message or "encrypted" in message


def reason(error: exc.DBAPIError) -> str:
    """The driver's own message, first line: what a user can act on."""
    return str(error.orig).strip().splitlines()[0] if error.orig else str(error)
