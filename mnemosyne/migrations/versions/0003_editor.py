"""The tree editor: detached subtrees (fragments, trash) and the undo journal.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    # Plain ADD COLUMNs: on SQLite a batch "recreate" of nodes would cascade-delete
    # keyframes and trip the foreign keys of sessions and journal.
    op.add_column("nodes", sa.Column("detached", sa.String(16), nullable=True))
    op.add_column("nodes", sa.Column("detached_from_pk", Key, nullable=True))
    op.add_column("nodes", sa.Column("detached_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(
            sa.Column("journal_position", sa.Integer(), nullable=False, server_default="0")
        )
    op.create_table(
        "journal",
        sa.Column("pk", Key, autoincrement=True, nullable=False),
        sa.Column("session_pk", Key, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("snapshot", sa.Boolean(), nullable=False),
        sa.Column("touched", sa.Integer(), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_pk"],
            ["sessions.pk"],
            name=op.f("fk_journal_session_pk_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("pk", name=op.f("pk_journal")),
        sa.UniqueConstraint("session_pk", "position", name=op.f("uq_journal_session_pk_position")),
    )


def downgrade() -> None:
    op.drop_table("journal")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("journal_position")
    op.drop_column("nodes", "detached_at")
    op.drop_column("nodes", "detached_from_pk")
    op.drop_column("nodes", "detached")
