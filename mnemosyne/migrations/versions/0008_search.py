"""Full-text search over every node: an FTS5 index on SQLite, a GIN index on PostgreSQL.

SQLite: ``nodes_fts``, an external-content FTS5 table over ``nodes.content`` with the
``trigram`` tokenizer (substring search, CJK included; SQLite >= 3.34), kept by
triggers on every insert, update of content and delete of a node, so that every write
path (imports and bulk inserts included) keeps it; filled here for existing nodes.

PostgreSQL: a GIN index on ``to_tsvector('simple', content)``.

Neither is in ``mnemosyne._schema``'s metadata (SQLAlchemy Core describes neither a
virtual table nor an expression index): see ``mnemosyne._search``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlite3

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_SQLITE_UP = [
    "CREATE VIRTUAL TABLE nodes_fts USING fts5("
    "content, content='nodes', content_rowid='pk', tokenize='trigram')",
    "CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
    "CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " END",
    "CREATE TRIGGER nodes_fts_update AFTER UPDATE OF content ON nodes BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
    "INSERT INTO nodes_fts(nodes_fts) VALUES ('rebuild')",
]
_SQLITE_DOWN = [
    "DROP TRIGGER IF EXISTS nodes_fts_update",
    "DROP TRIGGER IF EXISTS nodes_fts_delete",
    "DROP TRIGGER IF EXISTS nodes_fts_insert",
    "DROP TABLE IF EXISTS nodes_fts",
]
_POSTGRES_UP = [
    "CREATE INDEX ix_nodes_content_search ON nodes USING gin (to_tsvector('simple', content))"
]
_POSTGRES_DOWN = ["DROP INDEX IF EXISTS ix_nodes_content_search"]


def upgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        if sqlite3.sqlite_version_info < (3, 34, 0):
            raise RuntimeError(
                f"full-text search needs SQLite 3.34 or newer (its trigram tokenizer);"
                f" this Python has SQLite {sqlite3.sqlite_version}"
            )
        statements = _SQLITE_UP
    else:
        statements = _POSTGRES_UP
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    for statement in _SQLITE_DOWN if sqlite else _POSTGRES_DOWN:
        op.execute(statement)
