"""What SQLite and PostgreSQL do differently, for mnemosyne's queries, in one place.

Everything else in mnemosyne writes one query for both databases and asks this
module where they part: the driver's placeholder in SQL run on its cursor, inserts
that skip or replace an existing row, the isolation of a read, the keys of new node
rows, when a row may name one not written yet, whether a database migrates itself,
and the locks around a migration. How an engine is made for each (pragmas, the
driver, ``BEGIN IMMEDIATE`` for writers) is :mod:`mnemosyne._engine`'s.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Engine, Table, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from ._schema import nodes

__all__ = [
    "contains_sql",
    "defers_forward_references",
    "insert_or_ignore",
    "insert_or_replace",
    "lock_for_migration",
    "migrates_itself",
    "new_node_keys",
    "param",
    "read_isolation",
    "use_wal",
]


def _is_sqlite(bind: Connection | Engine) -> bool:
    return bind.dialect.name == "sqlite"


def param(conn: Connection) -> str:
    """The driver's placeholder, for SQL run on its cursor (``?`` or ``%s``)."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def contains_sql(conn: Connection, column: str, text: str) -> str:
    """SQL, for the driver's cursor, true where ``column`` holds ``text`` (a constant of
    mnemosyne's own: no quotes, no LIKE wildcards): a LIKE whose ``%`` is doubled where
    the driver's placeholder is ``%s``."""
    percent = "%" if conn.dialect.paramstyle == "qmark" else "%%"
    return f"{column} LIKE '{percent}{text}{percent}'"


def insert_or_ignore(conn: Connection, table: Table) -> Insert:
    """An insert into ``table`` that skips a row whose key is taken."""
    dialect: Any = sqlite if _is_sqlite(conn) else postgresql
    statement: Insert = dialect.insert(table).on_conflict_do_nothing()
    return statement


def insert_or_replace(conn: Connection, table: Table, key: str, values: dict[str, Any]) -> Insert:
    """An insert of ``values`` into ``table`` that updates the row whose ``key``
    column holds the same value instead, if there is one."""
    dialect: Any = sqlite if _is_sqlite(conn) else postgresql
    kept = {name: value for name, value in values.items() if name != key}
    statement: Insert = (
        dialect.insert(table)
        .values(**values)
        .on_conflict_do_update(index_elements=[key], set_=kept)
    )
    return statement


def read_isolation(conn: Connection) -> Connection:
    """``conn`` set up for a read that sees one snapshot throughout (PostgreSQL's
    ``REPEATABLE READ``; a SQLite transaction is one already)."""
    if _is_sqlite(conn):
        return conn
    return conn.execution_options(isolation_level="REPEATABLE READ")


def new_node_keys(conn: Connection, count: int) -> list[int]:
    """``count`` fresh keys for node rows, increasing (sibling order is key order):
    from the column's sequence on PostgreSQL; on SQLite ``max(pk) + 1`` onwards, as
    SQLite itself would (the write transaction holds the lock)."""
    if not _is_sqlite(conn):
        query = text(
            "SELECT nextval(pg_get_serial_sequence('nodes', 'pk')) FROM generate_series(1, :n)"
        )
        return sorted(conn.execute(query, {"n": count}).scalars())
    start = conn.execute(select(func.max(nodes.c.pk))).scalar() or 0
    return list(range(start + 1, start + 1 + count))


def defers_forward_references(conn: Connection) -> bool:
    """Whether a row naming a row not written yet slows the rest of the batch down.

    SQLite counts such a reference as a pending (deferred) violation, and while any
    is pending it looks for the rows that name each row inserted: ``active_child_pk``
    has no index for that (a scan per row). Rows written without such references and
    pointed at their children afterwards leave none pending."""
    return _is_sqlite(conn)


def migrates_itself(engine: Engine) -> bool:
    """Whether a store migrates the database when it opens it: an embedded SQLite
    file does; a server database is migrated by ``clotho db upgrade``, once."""
    return _is_sqlite(engine)


def lock_for_migration(conn: Connection) -> None:
    """Make concurrent migrations of one database queue (PostgreSQL: an advisory lock
    for the transaction; SQLite's ``BEGIN IMMEDIATE`` queues them already)."""
    if not _is_sqlite(conn):
        conn.execute(text("SELECT pg_advisory_xact_lock(7321001)"))


def use_wal(engine: Engine) -> None:
    """Put a SQLite file of ours in WAL mode (it stays so): readers never block the
    writer. Nothing for PostgreSQL.

    Done only once the file is known to be ours, so that opening somebody else's
    file changes nothing in it.
    """
    if not _is_sqlite(engine):
        return
    raw = engine.raw_connection()  # outside any transaction, as the pragma requires
    try:
        cursor = raw.cursor()
        mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
        if str(mode).lower() not in ("wal", "memory"):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()
    finally:
        raw.close()
