"""The public value objects of the store: what a read returns.

They are detached from the database: holding one never keeps a connection or a
transaction open, and changing one changes nothing stored.

A node has four shapes, one per use:

- :class:`Node`: a node as stored, whole (every read of nodes: tree, projection,
  children, a node).
- :class:`Message`: what the model is sent of a node (id, role, name, text), lean and
  shared: the hot path of every turn (:meth:`mnemosyne.Store.messages`).
- :class:`NodeAmongSiblings`: a Node with its siblings and its place among them,
  what a chat view shows (the projection's turns and pages, :meth:`mnemosyne.Store.turn`).
- :class:`mnemosyne.NodeRecord` (in ``mnemosyne._bulk``): a node to import or as
  exported, naming other nodes by id or record index, with where a detached subtree
  hung: the exchange formats' shape (``insert_nodes``, ``dump``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "ROLES",
    "Blame",
    "Change",
    "Document",
    "Message",
    "Node",
    "NodeAmongSiblings",
    "Role",
    "SceneChange",
    "Scenes",
    "Session",
    "Tree",
    "WorldState",
]

Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")


class Node:
    """One message of a session's tree: a detached copy of what is stored.

    Attributes:
        id: 32 lowercase hex characters, random (so short prefixes are unique).
        session_id: the session the node belongs to.
        parent_id: the parent node, ``None`` for a root.
        role: ``system``, ``user`` or ``assistant``.
        name: the speaker's name, if any.
        content: the text.
        enabled: a disabled node stays in the tree but leaves the projection.
        created_at: when it was stored (UTC).
        metadata: free-form data (model, sampling parameters, token usage...).
        delta: the world-state operations this node applies (a list, may be empty).
        active_child_id: the child last on the active path, ``None`` for a leaf.

    ``created_at``, ``metadata`` and ``delta`` may be handed in as stored (ISO text,
    JSON text) and are decoded on first use: a projection builds one Node per
    message and most callers read only the role and the text.
    """

    __slots__ = (
        "_created_at",
        "_delta",
        "_metadata",
        "active_child_id",
        "content",
        "enabled",
        "id",
        "name",
        "parent_id",
        "role",
        "session_id",
    )

    def __init__(
        self,
        id: str,
        session_id: str,
        parent_id: str | None,
        role: Role,
        name: str | None,
        content: str,
        enabled: bool,
        created_at: datetime | str,
        metadata: dict[str, Any] | str | None = None,
        delta: list[dict[str, Any]] | str | None = None,
        active_child_id: str | None = None,
    ) -> None:
        self.id = id
        self.session_id = session_id
        self.parent_id = parent_id
        self.role = role
        self.name = name
        self.content = content
        self.enabled = enabled
        self._created_at = created_at
        self._metadata = metadata
        self._delta = delta
        self.active_child_id = active_child_id

    @property
    def created_at(self) -> datetime:
        value = self._created_at
        if isinstance(value, str):
            value = self._created_at = parse_utc(value)
        return value

    @property
    def metadata(self) -> dict[str, Any]:
        value = self._metadata
        if not isinstance(value, dict):
            value = self._metadata = {} if not value or value == "{}" else json.loads(value)
        return value

    @property
    def metadata_json(self) -> str:
        """The metadata as JSON text: the stored text itself while it has not been
        decoded (a reader that only passes it on neither decodes nor encodes it again)."""
        value = self._metadata
        if isinstance(value, str) and value:
            return value
        return json.dumps(self.metadata, ensure_ascii=False, separators=(",", ":"))

    @property
    def delta(self) -> list[dict[str, Any]]:
        value = self._delta
        if not isinstance(value, list):
            value = self._delta = [] if not value or value == "[]" else json.loads(value)
        return value

    def _key(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.session_id,
            self.parent_id,
            self.role,
            self.name,
            self.content,
            self.enabled,
            self.created_at,
            self.metadata,
            self.delta,
            self.active_child_id,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        text = self.content if len(self.content) <= 40 else self.content[:39] + "…"
        return (
            f"Node(id={self.id!r}, role={self.role!r}, parent_id={self.parent_id!r}, "
            f"content={text!r})"
        )

    def as_dict(self) -> dict[str, Any]:
        """The node as a JSON-ready mapping (the CLI's and the API's shape)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "parent_id": self.parent_id,
            "role": self.role,
            "name": self.name,
            "content": self.content,
            "enabled": self.enabled,
            "created_at": self.created_at.isoformat(),
            "metadata": self.metadata,
            "delta": self.delta,
            "active_child_id": self.active_child_id,
        }


class Message:
    """A message as the model sees it: one enabled node of the projection, lean.

    What the turn loop builds a prompt from; :meth:`mnemosyne.Store.messages`
    reads only these columns, which makes it the cheapest read of a long story.

    Read-only: the store keeps the messages of recent paths in memory and hands the
    same objects to every reader (see :mod:`mnemosyne._paths`).
    """

    __slots__ = ("_json", "_named_json", "content", "id", "name", "role")

    # Declared for the type checker (the slots hold them; __init__ sets them through
    # object.__setattr__, since assignment is refused).
    id: str
    role: Role
    name: str | None
    content: str
    _json: bytes
    """The canonical JSON of the message as a prompt sends it, in UTF-8: unset until
    :mod:`mnemosyne.traces` first hashes the message, then kept."""
    _named_json: bytes
    """The same, sent with its speaker's name (a reply in a cast of several)."""

    def __init__(self, id: str, role: Role, name: str | None, content: str) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "id", id)
        setattr_(self, "role", role)
        setattr_(self, "name", name)
        setattr_(self, "content", content)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a Message is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a Message is read-only: cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Message, (self.id, self.role, self.name, self.content))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.id, self.role, self.name, self.content) == (
            other.id,
            other.role,
            other.name,
            other.content,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        text = self.content if len(self.content) <= 40 else self.content[:39] + "…"
        return f"Message(id={self.id!r}, role={self.role!r}, content={text!r})"

    def as_dict(self) -> dict[str, Any]:
        """``{"id", "role", "name", "content"}``."""
        return {"id": self.id, "role": self.role, "name": self.name, "content": self.content}


def parse_utc(text: str) -> datetime:
    """A stored time as an aware UTC datetime.

    SQLite keeps ISO text without a zone (every time we store is UTC); parsing it
    with the zone appended is several times cheaper than ``replace(tzinfo=...)``.
    """
    return datetime.fromisoformat(text + "+00:00" if len(text) <= 26 else text)


@dataclass(frozen=True, slots=True)
class SceneChange:
    """A message of a path after which who is present changed."""

    index: int
    """Its place in :attr:`Scenes.messages` (the node is that message's)."""
    present: list[str] | None
    """Who is present after it (``None``: everyone)."""


@dataclass(frozen=True, slots=True)
class Scenes:
    """A path's messages and who was present along it
    (:meth:`mnemosyne.Store.scenes`): before the first message, everyone (``None``);
    after ``changes[i].index``, ``changes[i].present``, until the next change."""

    messages: list[Message]
    changes: list[SceneChange]


@dataclass(frozen=True, slots=True)
class Session:
    """One chat: a tree of nodes, a HEAD and a version bumped by every write."""

    id: str
    title: str | None
    head_id: str | None
    version: int
    created_at: datetime
    updated_at: datetime
    campaign: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    trashed_at: datetime | None = None
    """When the session was deleted (it stays restorable until purged); ``None``."""

    def as_dict(self) -> dict[str, Any]:
        """The session as a JSON-ready mapping."""
        return {
            "id": self.id,
            "title": self.title,
            "head_id": self.head_id,
            "version": self.version,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "campaign": self.campaign,
            "metadata": self.metadata,
            "trashed_at": self.trashed_at.isoformat() if self.trashed_at else None,
        }


@dataclass(frozen=True, slots=True)
class NodeAmongSiblings:
    """A node among its siblings: the ``< index+1 / len(siblings) >`` of a chat view
    (``siblings``: their ids in order, the node's own included; ``index``: its place)."""

    node: Node
    siblings: list[str]
    index: int

    def as_dict(self) -> dict[str, Any]:
        """The node's mapping plus ``siblings`` and ``index``."""
        return {**self.node.as_dict(), "siblings": self.siblings, "index": self.index}


@dataclass(frozen=True, slots=True)
class Tree:
    """A whole session: HEAD and every node, parents before children, siblings in order."""

    session: Session
    nodes: list[Node]

    @property
    def head_id(self) -> str | None:
        """The session's HEAD."""
        return self.session.head_id

    def path(self, at: str | None = None) -> list[Node]:
        """The nodes from ``at`` (default HEAD) up to the root, ``at`` first (disabled
        ones included)."""
        by_id = {node.id: node for node in self.nodes}
        path: list[Node] = []
        current = by_id.get(at or self.session.head_id or "")
        while current is not None and len(path) < len(by_id):  # a cycle never loops
            path.append(current)
            current = by_id.get(current.parent_id or "")
        return path

    def children(self) -> dict[str | None, list[Node]]:
        """Children of every node in order, keyed by parent id (``None``: the roots)."""
        out: dict[str | None, list[Node]] = {}
        for node in self.nodes:
            out.setdefault(node.parent_id, []).append(node)
        return out

    def as_dict(self) -> dict[str, Any]:
        """``{"head_id": ..., "version": ..., "nodes": [...]}``."""
        return {
            "session_id": self.session.id,
            "head_id": self.session.head_id,
            "version": self.session.version,
            "nodes": [n.as_dict() for n in self.nodes],
        }


@dataclass(frozen=True, slots=True)
class WorldState:
    """The world as it stands after a node: variables, active lore, running summary,
    the lore's timed effects (World Info sticky/cooldown, so they roll back too), the
    author's note (``None``: none; :mod:`mnemosyne.state.note`) and who of the cast is
    present (``None``: everyone; :mod:`mnemosyne.state.presence`)."""

    variables: dict[str, Any]
    active_lore_ids: list[str]
    summary: str
    lore_timers: dict[str, Any]
    author_note: dict[str, Any] | None = None
    present: list[str] | None = None

    @classmethod
    def from_mapping(cls, state: dict[str, Any]) -> WorldState:
        return cls(
            state["variables"],
            state["active_lore_ids"],
            state["summary"],
            state["lore_timers"],
            state.get("author_note"),
            state.get("present"),
        )

    def as_dict(self) -> dict[str, Any]:
        """``{"variables", "active_lore_ids", "summary", "lore_timers", "author_note",
        "present"}``."""
        return {
            "variables": self.variables,
            "active_lore_ids": self.active_lore_ids,
            "summary": self.summary,
            "lore_timers": self.lore_timers,
            "author_note": self.author_note,
            "present": self.present,
        }


@dataclass(frozen=True, slots=True)
class Blame:
    """Which node on the path last wrote a variable (``node_id`` None: none did)."""

    path: str
    value: Any
    node_id: str | None

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "value": self.value, "node_id": self.node_id}


@dataclass(frozen=True, slots=True)
class Change:
    """A node on the path that wrote a variable: its operations, the value after."""

    node_id: str
    operations: list[dict[str, Any]]
    value: Any

    def as_dict(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "operations": self.operations, "value": self.value}


@dataclass(frozen=True, slots=True)
class Document:
    """A JSON document a session plays with (``kind``: ``lorebook``, ``card``...)."""

    kind: str
    name: str
    content: str
    """The JSON text as stored (as imported: nothing of it is lost)."""
    hash: str
    """SHA-256 of ``content`` (what an index of it, e.g. lore vectors, is keyed by)."""
    created_at: datetime
