"""A database's schema, for the tools that manage it (``clotho db``).

A :class:`~mnemosyne.Store` checks the schema itself when it opens, and migrates an
embedded database on first use. These are for an operator: which revision a database
is at, and upgrading it explicitly (a PostgreSQL server is migrated so, once per
release). Each opens its own engine on ``url`` and disposes of it before returning.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._engine import create_store_engine, describe, schema_revision, upgrade
from ._schema import SCHEMA_REVISION

__all__ = ["SCHEMA_REVISION", "SchemaStatus", "schema_status", "upgrade_schema"]


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """The schema revision of one database, beside the one this code expects."""

    database: str
    """The database's address without a password, for messages."""
    revision: str | None
    """The stored revision; ``None`` for a database without a Clotho schema yet."""
    expected: str = SCHEMA_REVISION
    """The revision this code reads and writes."""

    @property
    def current(self) -> bool:
        """Whether the database is at the expected revision."""
        return self.revision == self.expected


def schema_status(url: str) -> SchemaStatus:
    """The schema revision of the database at ``url``; nothing is written.

    Raises:
        StorageError: ``url`` is not a database URL Clotho stores on, the file is not
            a database, or the database has tables that are not ours.
    """
    engine = create_store_engine(url)
    try:
        return SchemaStatus(describe(engine), schema_revision(engine))
    finally:
        engine.dispose()


def upgrade_schema(url: str) -> tuple[SchemaStatus, SchemaStatus]:
    """Apply the migrations the database at ``url`` lacks: its status ``(before,
    after)``. A database already current is left untouched; concurrent upgrades queue
    (see :func:`mnemosyne._engine.upgrade`).

    Raises:
        StorageError: as :func:`schema_status`, or a migration failed (nothing of it
            is kept: it runs in one transaction).
    """
    engine = create_store_engine(url)
    try:
        before = SchemaStatus(describe(engine), schema_revision(engine))
        if not before.current:
            upgrade(engine)
        after = SchemaStatus(before.database, schema_revision(engine))
    finally:
        engine.dispose()
    return before, after
