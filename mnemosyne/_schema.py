"""The tables (SQLAlchemy Core: the ORM is not needed and costs start-up time).

Every row has two keys: ``pk``, an integer the database hands out (what rows refer
to each other by: small, and the recursive walk up a path follows integers), and
``id``, 32 random hex characters, the public name (stable across export and
import, abbreviable to a unique prefix). Sibling order is creation order: ``pk``.

Integrity the database itself guarantees, whatever the code does:

- a node's parent, its active child and a session's HEAD are nodes *of the same
  session* (composite foreign keys onto ``nodes(session_pk, pk)``);
- a role is one of the three; a node is not its own parent.

The node-to-node keys are deferrable (checked at commit) so that an edit may move
several nodes in one transaction through intermediate states.

``metadata`` and ``delta`` are JSON kept as text: the store encodes and decodes
them itself (an empty object costs two bytes and no parsing). Alembic compares the
migrations with this ``metadata`` (a test does).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
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
SCHEMA_REVISION = "0011"

ID_LENGTH = 32
IDEMPOTENCY_KEY_LENGTH = 200

naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=naming_convention)

# SQLite: INTEGER PRIMARY KEY is the rowid itself; PostgreSQL: a bigint identity.
Key = BigInteger().with_variant(Integer(), "sqlite")

sessions = Table(
    "sessions",
    metadata,
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("id", String(ID_LENGTH), nullable=False, unique=True),
    Column("title", Text),
    Column("campaign", Text),
    Column("head_pk", Key),
    Column("version", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("metadata", Text, nullable=False),
    # The world-state schema as JSON (NULL: the permissive one), fixed at creation so
    # that every process computes the same states.
    Column("state_schema", Text),
    # How many entries of the journal are applied (the rest can be redone).
    Column("journal_position", Integer, nullable=False, server_default="0"),
    # When the session was moved to the trash (NULL: it is not there).
    Column("trashed_at", DateTime(timezone=True)),
    ForeignKeyConstraint(
        ["pk", "head_pk"],
        ["nodes.session_pk", "nodes.pk"],
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
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("id", String(ID_LENGTH), nullable=False, unique=True),
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    Column("parent_pk", Key),
    Column("role", String(16), nullable=False),
    Column("name", Text),
    Column("content", Text, nullable=False),
    Column("enabled", Boolean, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("metadata", Text, nullable=False),
    # The world-state delta (a JSON list of operations); NULL is the empty one.
    Column("delta", Text),
    Column("active_child_pk", Key),
    # A subtree taken out of the tree is marked on its top node (whose parent_pk is
    # then NULL): 'fragment' (pruned, ready to graft) or 'trash' (deleted, restorable
    # until purged). detached_from_pk remembers where it hung.
    Column("detached", String(16)),
    Column("detached_from_pk", Key),
    Column("detached_at", DateTime(timezone=True)),
    UniqueConstraint("session_pk", "pk"),
    ForeignKeyConstraint(
        ["session_pk", "parent_pk"],
        ["nodes.session_pk", "nodes.pk"],
        deferrable=True,
        initially="DEFERRED",
        name="fk_nodes_parent",
    ),
    ForeignKeyConstraint(
        ["session_pk", "active_child_pk"],
        ["nodes.session_pk", "nodes.pk"],
        deferrable=True,
        initially="DEFERRED",
        name="fk_nodes_active_child",
    ),
    CheckConstraint("role IN ('system', 'user', 'assistant')", name="role_known"),
    CheckConstraint("parent_pk IS NULL OR parent_pk <> pk", name="not_own_parent"),
    Index("ix_nodes_children", "session_pk", "parent_pk", "pk"),
)

#: Whole world states cached at some nodes (see mnemosyne.state): the state *after*
#: the node. A cache: deleting rows loses nothing, reads walk further up.
keyframes = Table(
    "keyframes",
    metadata,
    Column("node_pk", Key, ForeignKey("nodes.pk", ondelete="CASCADE"), primary_key=True),
    Column("state", Text, nullable=False),
)

#: The undo journal of the tree editor, per session (see mnemosyne.editor).
journal = Table(
    "journal",
    metadata,
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    Column("position", Integer, nullable=False),
    Column("action", String(32), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("snapshot", Boolean, nullable=False),
    Column("touched", Integer, nullable=False),
    Column("payload", Text, nullable=False),
    UniqueConstraint("session_pk", "position"),
)

#: Small key/value settings kept with the data (such as the session used last).
preferences = Table(
    "preferences",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

#: Texts stored once, named by the SHA-256 of their UTF-8 bytes (the parts of prompt
#: traces that repeat from turn to turn: system prompts, templates, lore).
blobs = Table(
    "blobs",
    metadata,
    Column("hash", String(64), primary_key=True),
    Column("content", Text, nullable=False),
)

#: The PromptTrace of a generated node (see mnemosyne.traces): the messages sent as
#: references (runs of projected nodes, blobs), their hash, and a JSON document with
#: the rest (model, parameters, usage, lore and its reasons...).
traces = Table(
    "traces",
    metadata,
    Column("node_pk", Key, ForeignKey("nodes.pk", ondelete="CASCADE"), primary_key=True),
    Column("messages", Text, nullable=False),
    Column("messages_hash", String(64), nullable=False),
    Column("document", Text, nullable=False),
)

#: What a session plays with besides its tree: lorebooks, its character card (JSON
#: documents as imported, named within their kind). Replaced whole on re-import.
documents = Table(
    "documents",
    metadata,
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("name", String(200), nullable=False),
    Column("content", Text, nullable=False),
    Column("hash", String(64), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("session_pk", "kind", "name"),
)

#: The answers of writes sent with an idempotency key (see mnemosyne._idempotency), per
#: session: written in the write's own transaction, kept a bounded time.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    Column("key", String(IDEMPOTENCY_KEY_LENGTH), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("answer", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("session_pk", "key"),
    Index("ix_idempotency_keys_created_at", "created_at"),
)

# --- the search index's watermark (migration 0009) ---

#: How far the search index has got (SQLite; see mnemosyne._search): every node whose
#: key is at or under ``indexed_pk`` is in ``nodes_fts``, the rest are indexed by the
#: next search. One row; empty and unused on PostgreSQL (its index is kept by the
#: database).
search_index = Table(
    "search_index",
    metadata,
    Column("pk", Integer, primary_key=True, autoincrement=False),
    Column("indexed_pk", Key, nullable=False),
    CheckConstraint("pk = 1", name="one_row"),
)

# --- names on nodes: tags and branches (migration 0010) ---

#: Names on nodes (see mnemosyne.refs): a tag names a node for good, a branch names the
#: tip of a story and follows HEAD when a turn is played from its tip. Unique per
#: session; a purge that deletes the node deletes its names.
refs = Table(
    "refs",
    metadata,
    Column("pk", Key, primary_key=True, autoincrement=True),
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), nullable=False),
    Column("name", String(40), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("node_pk", Key, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("session_pk", "name"),
    ForeignKeyConstraint(
        ["session_pk", "node_pk"],
        ["nodes.session_pk", "nodes.pk"],
        ondelete="CASCADE",
        name="fk_refs_node",
    ),
    CheckConstraint("kind IN ('tag', 'branch')", name="kind_known"),
    Index("ix_refs_session_pk_node_pk", "session_pk", "node_pk"),
)

# --- a session's events (migration 0011) ---

#: A session's changes as a log (see mnemosyne.events): one row per committed write,
#: written in the write's own transaction, named by the version it left the session at
#: (the event's id); the last few hundred kept per session.
session_events = Table(
    "session_events",
    metadata,
    Column("session_pk", Key, ForeignKey("sessions.pk", ondelete="CASCADE"), primary_key=True),
    Column("version", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("payload", Text, nullable=False),
)
