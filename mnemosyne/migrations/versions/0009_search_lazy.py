"""The search index brought up to date lazily, by the search itself (SQLite).

Migration 0008 indexed every node as it was inserted (a trigger), which made a bulk
insert eight times slower. From here ``search_index`` holds one row, ``indexed_pk``,
the key up to which every node is in ``nodes_fts``; a search first indexes the nodes
above it (``mnemosyne._search.catch_up``). The triggers are kept for the rows at or
under that watermark only: an insert there (a row put back with its old key, by a
redo, or a key SQLite hands out again, ``max(pk) + 1``, after the newest nodes were
deleted) is indexed at once, an update or a delete there keeps the index; above it,
they do nothing (the WHEN clause reads one row: a bulk insert costs nearly what it
did before there was an index). An FTS5 external-content ``'delete'`` of a row never inserted
would corrupt the index: the watermark is what makes the triggers exact.

The index 0008 built holds every node, so the watermark starts at the largest key.

PostgreSQL: nothing changes (its GIN index is kept by the database; ``fastupdate``
queues new entries); ``search_index`` exists there too, empty, unused.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

_WATERMARK = "(SELECT indexed_pk FROM search_index)"

_SQLITE_UP = [
    "DROP TRIGGER nodes_fts_insert",
    "DROP TRIGGER nodes_fts_delete",
    "DROP TRIGGER nodes_fts_update",
    "INSERT INTO search_index (pk, indexed_pk) VALUES (1, coalesce((SELECT max(pk) FROM nodes), 0))",
    f"CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes WHEN new.pk <= {_WATERMARK} BEGIN"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
    f"CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes WHEN old.pk <= {_WATERMARK} BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " END",
    "CREATE TRIGGER nodes_fts_update AFTER UPDATE OF content ON nodes"
    f" WHEN old.pk <= {_WATERMARK} BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
]

# Back to 0008: the nodes above the watermark indexed, then 0008's three triggers.
_SQLITE_DOWN = [
    "DROP TRIGGER nodes_fts_insert",
    "DROP TRIGGER nodes_fts_delete",
    "DROP TRIGGER nodes_fts_update",
    "INSERT INTO nodes_fts(rowid, content)"
    f" SELECT pk, content FROM nodes WHERE pk > coalesce({_WATERMARK}, 0)",
    "CREATE TRIGGER nodes_fts_insert AFTER INSERT ON nodes BEGIN"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
    "CREATE TRIGGER nodes_fts_delete AFTER DELETE ON nodes BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " END",
    "CREATE TRIGGER nodes_fts_update AFTER UPDATE OF content ON nodes BEGIN"
    " INSERT INTO nodes_fts(nodes_fts, rowid, content) VALUES ('delete', old.pk, old.content);"
    " INSERT INTO nodes_fts(rowid, content) VALUES (new.pk, new.content); END",
]


def upgrade() -> None:
    op.create_table(
        "search_index",
        sa.Column("pk", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("indexed_pk", Key, nullable=False),
        sa.CheckConstraint("pk = 1", name=op.f("ck_search_index_one_row")),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_search_index")),
    )
    if op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_UP:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_DOWN:
            op.execute(statement)
    op.drop_table("search_index")
