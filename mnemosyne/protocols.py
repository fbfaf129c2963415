"""What the layers above need of the store, stated as Protocols.

:class:`~mnemosyne.Store` is the implementation; code that needs only a part of it
is typed against the part, so what it relies on is written down in one place, and a
store made otherwise (in memory, remote) would only have to provide that part.

- :class:`TurnStore`: what the turn loop (``orchestrator``) reads and writes: the
  session, a node, the history the model sees, the world state and where a variable
  was written, and one write transaction per turn (:class:`TurnTransaction`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from .models import Blame, Message, Node, Scenes, Session, WorldState
from .state.schema import StateSchema

__all__ = ["TurnStore", "TurnTransaction"]


class TurnTransaction(Protocol):
    """The writes of one turn, in one transaction on one session (all or nothing)."""

    @property
    def session(self) -> Session:
        """The session as read at the start; after the commit, as it was left."""
        ...

    @property
    def head_id(self) -> str | None:
        """HEAD as it stands inside the transaction."""
        ...

    def checkout(self, ref: str) -> Node:
        """Move HEAD to a node of the tree."""
        ...

    def append(
        self,
        role: str,
        content: str,
        *,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
    ) -> Node:
        """A new node under HEAD; HEAD moves to it."""
        ...

    def add_sibling(
        self,
        of: str,
        content: str,
        *,
        role: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        delta: Sequence[Mapping[str, Any]] | None = None,
        enabled: bool = True,
    ) -> Node:
        """A new sibling of node ``of`` (a reroll); HEAD moves to it."""
        ...

    def journaled(self, action: str) -> AbstractContextManager[None]:
        """The growth inside is one undo step named ``action`` (undo: its nodes to the
        trash, HEAD back)."""
        ...

    def put_blob(self, text: str) -> str:
        """Store a text once by its hash; the hash."""
        ...

    def put_trace(
        self,
        ref: str,
        *,
        messages: Sequence[Mapping[str, Any]],
        sources: Sequence[int | None],
        history: Sequence[Message],
        document: Mapping[str, Any],
        named: bool = False,
    ) -> str:
        """Store the PromptTrace of a generated node; its messages' hash."""
        ...


class TurnStore(Protocol):
    """What the turn loop needs of the store: reads of one session, and a write
    transaction for the turn's commit."""

    def session(self, ref: str) -> Session:
        """A session by id or unique prefix."""
        ...

    def node(self, session_id: str, ref: str) -> Node:
        """A node of the session by its name (id or unique prefix, ``HEAD``, ``HEAD~2``...)."""
        ...

    def schema(self, session_id: str) -> StateSchema:
        """The session's world-state schema."""
        ...

    def messages(self, session_id: str, at: str | None = None) -> list[Message]:
        """What the model sees at HEAD (or at ``at``): the projection's messages."""
        ...

    def scenes(self, session_id: str, at: str | None = None) -> Scenes:
        """:meth:`messages` with who was present along the path (where it changed)."""
        ...

    def last_speaker(self, session_id: str, at: str | None = None) -> str | None:
        """The name on the newest named reply of the path to HEAD (or ``at``)."""
        ...

    def state(self, session_id: str, at: str | None = None) -> WorldState:
        """The world state after HEAD (or after ``at``)."""
        ...

    def blame(self, session_id: str, path: str, at: str | None = None) -> Blame:
        """The nearest node at or above HEAD (or ``at``) that wrote ``path``."""
        ...

    def transaction(
        self, session_id: str, *, expected_version: int | None = None
    ) -> AbstractContextManager[TurnTransaction]:
        """One write transaction on the session."""
        ...
