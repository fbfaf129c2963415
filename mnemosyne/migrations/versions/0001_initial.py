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


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("title", sa.Text(), nullable=True),
        sa.Column("campaign", sa.Text(), nullable=True),
        sa.Column("head_id", sa.String(32), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.CheckConstraint("version >= 0", name=op.f("ck_sessions_version_not_negative")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_table(
        "nodes",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("session_id", sa.String(32), nullable=False),
        sa.Column("parent_id", sa.String(32), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("delta", sa.JSON(), nullable=True),
        sa.Column("active_child_id", sa.String(32), nullable=True),
        sa.CheckConstraint(
            "role IN ('system', 'user', 'assistant')", name=op.f("ck_nodes_role_known")
        ),
        sa.CheckConstraint(
            "parent_id IS NULL OR parent_id <> id", name=op.f("ck_nodes_not_own_parent")
        ),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_nodes_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "parent_id"],
            ["nodes.session_id", "nodes.id"],
            name="fk_nodes_parent",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.ForeignKeyConstraint(
            ["session_id", "active_child_id"],
            ["nodes.session_id", "nodes.id"],
            name="fk_nodes_active_child",
            deferrable=True,
            initially="DEFERRED",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nodes")),
        sa.UniqueConstraint("session_id", "id", name=op.f("uq_nodes_session_id_id")),
    )
    op.create_index("ix_nodes_children", "nodes", ["session_id", "parent_id", "seq"])
    # sessions <-> nodes is a cycle: HEAD's key is added once both tables exist.
    with op.batch_alter_table("sessions") as batch:
        batch.create_foreign_key(
            "fk_sessions_head_nodes",
            "nodes",
            ["id", "head_id"],
            ["session_id", "id"],
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
