"""Mnemosyne: Clotho's memory.

The conversation tree of every session (nodes, HEAD, active-child pointers, the
linear projection), stored with SQLAlchemy on SQLite or PostgreSQL. It imports
nothing of the rest of Clotho.
"""

from .errors import (
    AmbiguousIdError,
    ConflictError,
    ForeignNodeError,
    InvalidOperationError,
    MnemosyneError,
    NotFoundError,
    StorageError,
    UnknownNodeError,
    UnknownSessionError,
)
from .models import ROLES, Message, Node, Role, Session, Tree, TurnView
from .store import SessionTransaction, Store

__all__ = [
    "ROLES",
    "AmbiguousIdError",
    "ConflictError",
    "ForeignNodeError",
    "InvalidOperationError",
    "Message",
    "MnemosyneError",
    "Node",
    "NotFoundError",
    "Role",
    "Session",
    "SessionTransaction",
    "StorageError",
    "Store",
    "Tree",
    "TurnView",
    "UnknownNodeError",
    "UnknownSessionError",
]
