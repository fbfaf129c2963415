"""The tables (SQLAlchemy Core: the ORM is not needed and costs start-up time).

Alembic compares the migrations with this ``metadata`` (a test does).

Integrity the database itself guarantees, whatever the code does:

- a node's parent, its active child and a session's HEAD are nodes *of the same
  session* (composite foreign keys onto ``nodes(session_id, id)``);
- a role is one of the three;
- a node is not its own parent.

The node-to-node keys are deferrable (checked at commit) so that an edit may move
several nodes in one transaction through intermediate states.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

#: The Alembic revision this code expects. A test checks it is the scripts' head.
SCHEMA_REVISION = "0001"

ID_LENGTH = 32

naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=naming_convention)

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column("title", Text),
    Column("campaign", Text),
    Column("head_id", String(ID_LENGTH)),
    Column("version", Integer, nullable=False),
    # The last sibling-order number handed out to a node of this session.
    Column("last_seq", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("metadata", JSON, nullable=False),
    ForeignKeyConstraint(
        ["id", "head_id"],
        ["nodes.session_id", "nodes.id"],
        use_alter=True,
        deferrable=True,
        initially="DEFERRED",
        name="fk_sessions_head_nodes",
    ),
    CheckConstraint("version >= 0", name="version_not_negative"),
)

nodes = Table(
    "nodes",
    metadata,
    Column("id", String(ID_LENGTH), primary_key=True),
    Column(
        "session_id",
        String(ID_LENGTH),
        ForeignKey("sessions.id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("parent_id", String(ID_LENGTH)),
    # Order among siblings: taken from the session's counter when the node is stored.
    Column("seq", Integer, nullable=False),
    Column("role", String(16), nullable=False),
    Column("name", Text),
    Column("content", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("metadata", JSON, nullable=False),
    # The world-state delta (a list of operations); NULL stores an empty one cheaply.
    Column("delta", JSON),
    Column("active_child_id", String(ID_LENGTH)),
    UniqueConstraint("session_id", "id"),
    ForeignKeyConstraint(
        ["session_id", "parent_id"],
        ["nodes.session_id", "nodes.id"],
        deferrable=True,
        initially="DEFERRED",
        name="fk_nodes_parent",
    ),
    ForeignKeyConstraint(
        ["session_id", "active_child_id"],
        ["nodes.session_id", "nodes.id"],
        deferrable=True,
        initially="DEFERRED",
        name="fk_nodes_active_child",
    ),
    CheckConstraint("role IN ('system', 'user', 'assistant')", name="role_known"),
    CheckConstraint("parent_id IS NULL OR parent_id <> id", name="not_own_parent"),
    Index("ix_nodes_children", "session_id", "parent_id", "seq"),
)

#: Small key/value settings kept with the data (such as the session used last).
preferences = Table(
    "preferences",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)
