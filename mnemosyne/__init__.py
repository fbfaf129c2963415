"""Mnemosyne: Clotho's memory.

The conversation tree of every session (nodes, HEAD, active-child pointers, the
linear projection) and the world state on every node (a schema, validated deltas,
keyframes), stored with SQLAlchemy on SQLite or PostgreSQL. It imports nothing of
the rest of Clotho.
"""

from ._bulk import NodeRecord, SessionDump, StoredTrace
from ._checks import new_id
from ._idempotency import KEEP as IDEMPOTENCY_KEEP
from ._schema import IDEMPOTENCY_KEY_LENGTH
from ._search import SearchHit
from .database import SchemaStatus, schema_status, upgrade_schema
from .editor import EditResult, JournalEntry, JournalMismatchError
from .errors import (
    AmbiguousIdError,
    ConflictError,
    DeltaProblem,
    ForeignNodeError,
    IdempotencyKeyReusedError,
    IdTakenError,
    InvalidDeltaError,
    InvalidOperationError,
    MnemosyneError,
    NotFoundError,
    SchemaError,
    StaleCursorError,
    StorageError,
    UnknownNodeError,
    UnknownSessionError,
)
from .models import (
    ROLES,
    Blame,
    Change,
    Document,
    Message,
    Node,
    NodeAmongSiblings,
    Role,
    SceneChange,
    Scenes,
    Session,
    Tree,
    WorldState,
)
from .pages import Page
from .protocols import TurnStore, TurnTransaction
from .state import PERMISSIVE, StateSchema, Variable, schema_from_mapping
from .store import ProjectionPage, SessionTransaction, Store
from .traces import Trace

__all__ = [
    "IDEMPOTENCY_KEEP",
    "IDEMPOTENCY_KEY_LENGTH",
    "PERMISSIVE",
    "ROLES",
    "AmbiguousIdError",
    "Blame",
    "Change",
    "ConflictError",
    "DeltaProblem",
    "Document",
    "EditResult",
    "ForeignNodeError",
    "IdTakenError",
    "IdempotencyKeyReusedError",
    "InvalidDeltaError",
    "InvalidOperationError",
    "JournalEntry",
    "JournalMismatchError",
    "Message",
    "MnemosyneError",
    "Node",
    "NodeAmongSiblings",
    "NodeRecord",
    "NotFoundError",
    "Page",
    "ProjectionPage",
    "Role",
    "SceneChange",
    "Scenes",
    "SchemaError",
    "SchemaStatus",
    "SearchHit",
    "Session",
    "SessionDump",
    "SessionTransaction",
    "StaleCursorError",
    "StateSchema",
    "StorageError",
    "Store",
    "StoredTrace",
    "Trace",
    "Tree",
    "TurnStore",
    "TurnTransaction",
    "UnknownNodeError",
    "UnknownSessionError",
    "Variable",
    "WorldState",
    "new_id",
    "schema_from_mapping",
    "schema_status",
    "upgrade_schema",
]
