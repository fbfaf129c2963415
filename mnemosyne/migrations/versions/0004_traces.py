"""PromptTraces: content-addressed blobs and one trace per generated node.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "blobs",
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_blobs")),
    )
    op.create_table(
        "traces",
        sa.Column("node_pk", Key, nullable=False),
        sa.Column("messages", sa.Text(), nullable=False),
        sa.Column("messages_hash", sa.String(64), nullable=False),
        sa.Column("document", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_pk"], ["nodes.pk"], name=op.f("fk_traces_node_pk_nodes"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("node_pk", name=op.f("pk_traces")),
    )


def downgrade() -> None:
    op.drop_table("traces")
    op.drop_table("blobs")
