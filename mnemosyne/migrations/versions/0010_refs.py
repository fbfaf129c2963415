"""Names on nodes: tags and branches (``refs``, see ``mnemosyne.refs``).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "refs",
        sa.Column("pk", Key, autoincrement=True, nullable=False),
        sa.Column("session_pk", Key, nullable=False),
        sa.Column("name", sa.String(40), nullable=False),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("node_pk", Key, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('tag', 'branch')", name=op.f("ck_refs_kind_known")),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_refs_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["session_pk", "node_pk"],
            ["nodes.session_pk", "nodes.pk"],
            name="fk_refs_node",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_refs")),
        sa.UniqueConstraint("session_pk", "name", name=op.f("uq_refs_session_pk_name")),
    )
    op.create_index("ix_refs_session_pk_node_pk", "refs", ["session_pk", "node_pk"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_refs_session_pk_node_pk", table_name="refs")
    op.drop_table("refs")
