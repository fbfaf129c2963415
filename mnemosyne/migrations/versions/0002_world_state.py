"""World state: a session's state schema, keyframes of whole states.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("state_schema", sa.Text(), nullable=True))
    op.create_table(
        "keyframes",
        sa.Column("node_pk", Key, nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["node_pk"],
            ["nodes.pk"],
            name=op.f("fk_keyframes_node_pk_nodes"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("node_pk", name=op.f("pk_keyframes")),
    )


def downgrade() -> None:
    op.drop_table("keyframes")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("state_schema")
