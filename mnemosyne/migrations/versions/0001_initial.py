"""The conversation tree: sessions, nodes, preferences.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("pk", Key, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("campaign", sa.Text(), nullable=True),
        sa.Column("head_pk", Key, nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.CheckConstraint("version >= 0", name=op.f("ck_sessions_version_not_negative")),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_sessions")),
        sa.UniqueConstraint("id", name=op.f("uq_sessions_id")),
    )
    op.create_table(
        "nodes",
        sa.Column("pk", Key, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("session_pk", Key, nullable=False),
        sa.Column("parent_pk", Key, nullable=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", sa.Text(), nullable=False),
        sa.Column("delta", sa.Text(), nullable=True),
        sa.Column("active_child_pk", Key, nullable=True),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant')", name=op.f("ck_nodes_role_known")
        ),
        sa.CheckConstraint(
            "parent_pk IS NULL OR parent_pk <> pk", name=op.f("ck_nodes_not_own_parent")
        ),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_nodes_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk", "parent_pk"],
            ["nodes.session_pk", "nodes.pk"],
            name="fk_nodes_parent",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk", "active_child_pk"],
            ["nodes.session_pk", "nodes.pk"],
            name="fk_nodes_active_child",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_nodes")),
        sa.UniqueConstraint("id", name=op.f("uq_nodes_id")),
        sa.UniqueConstraint("session_pk", "pk", name=op.f("uq_nodes_session_pk_pk")),
    )
    op.create_index("ix_nodes_children", "nodes", ["session_pk", "parent_pk", "pk"])
    # sessions <-> nodes is a cycle: HEAD's key is added once both tables exist.
    with op.batch_alter_table("sessions") as batch:
        batch.create_foreign_key(
            "fk_sessions_head_nodes",
            "nodes",
            ["pk", "head_pk"],
            ["session_pk", "pk"],
            deferrable=True,
            initially="DEFERRED",
        )
    op.create_table(
        "preferences",
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_preferences")),
    )


def downgrade() -> None:
    op.drop_table("preferences")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_constraint("fk_sessions_head_nodes", type_="foreignkey")
    op.drop_index("ix_nodes_children", table_name="nodes")
    op.drop_table("nodes")
    op.drop_table("sessions")
