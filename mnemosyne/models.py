"""The public value objects of the store: what a read returns.

They are plain frozen dataclasses, detached from the database: holding one never
keeps a connection or a transaction open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

__all__ = ["ROLES", "Node", "Role", "Session", "Tree", "TurnView"]

Role = Literal["system", "user", "assistant"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class Node:
    """One message of a session's tree.

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
    """

    id: str
    session_id: str
    parent_id: str | None
    role: Role
    name: str | None
    content: str
    enabled: bool
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)
    delta: list[dict[str, Any]] = field(default_factory=list)
    active_child_id: str | None = None

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
        }


@dataclass(frozen=True, slots=True)
class TurnView:
    """A node among its siblings: the ``< index+1 / len(siblings) >`` of a chat view."""

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
