"""The errors of mnemosyne: one hierarchy, every message naming what was wrong.

Each error carries a short machine-readable ``code`` (for the CLI's exit codes and
the HTTP API's problem documents) and subclasses the built-in it means, so callers
that only know Python's own exceptions still catch it sensibly.
"""

from __future__ import annotations

import json
import re

__all__ = [
    "AmbiguousIdError",
    "ConflictError",
    "DeltaProblem",
    "ForeignNodeError",
    "IdTakenError",
    "IdempotencyKeyReusedError",
    "InvalidDeltaError",
    "InvalidOperationError",
    "JsonTextError",
    "MnemosyneError",
    "NotFoundError",
    "SchemaError",
    "StaleCursorError",
    "StorageError",
    "UnknownNodeError",
    "UnknownSessionError",
]


class MnemosyneError(Exception):
    """Base of every error mnemosyne raises on purpose."""

    code = "mnemosyne_error"
    #: For an error of a bulk write (:meth:`~mnemosyne.SessionTransaction.insert_nodes`,
    #: :meth:`~mnemosyne.SessionTransaction.insert_traces`): the index of the refused
    #: record in the list given; ``None`` otherwise.
    record_index: int | None = None

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled as it is (an import in a worker process raises it in the server):
        # the default rebuilds it by calling __init__ with the message alone.
        return (_rebuilt, (type(self), self.args, self.__dict__))


def _rebuilt(
    cls: type[MnemosyneError], args: tuple[object, ...], state: dict[str, object]
) -> MnemosyneError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class NotFoundError(MnemosyneError, LookupError):
    """Something named by id does not exist."""

    code = "not_found"


class UnknownSessionError(NotFoundError):
    """No session has this id (or id prefix)."""

    code = "unknown_session"

    def __init__(self, session_id: str) -> None:
        super().__init__(f"unknown session: {session_id!r}")
        self.session_id = session_id


class UnknownNodeError(NotFoundError):
    """No node has this id (or id prefix) in the session."""

    code = "unknown_node"

    def __init__(
        self, node_id: str, session_id: str | None = None, *, why: str | None = None
    ) -> None:
        where = f" in session {session_id}" if session_id else ""
        # ``why``: a name that parses but leads nowhere (``HEAD~9`` above the root)
        super().__init__(f"{node_id}: {why}" if why else f"unknown node: {node_id!r}{where}")
        self.node_id = node_id
        self.session_id = session_id


class AmbiguousIdError(MnemosyneError, LookupError):
    """An abbreviated id matches more than one object."""

    code = "ambiguous_id"

    def __init__(self, kind: str, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(matches[:5])
        super().__init__(f"{kind} id prefix {prefix!r} is ambiguous: it matches {shown}")
        self.prefix = prefix
        self.matches = matches


class ForeignNodeError(MnemosyneError, ValueError):
    """A node was named in a session it does not belong to."""

    code = "foreign_node"

    def __init__(self, node_id: str, owner_session_id: str, session_id: str) -> None:
        super().__init__(
            f"node {node_id} belongs to session {owner_session_id}, not to session {session_id}"
        )
        self.node_id = node_id
        self.owner_session_id = owner_session_id
        self.session_id = session_id


class ConflictError(MnemosyneError):
    """A write named a session version that is no longer current; nothing was changed."""

    code = "conflict"

    def __init__(self, session_id: str, expected_version: int, current_version: int) -> None:
        super().__init__(
            f"session {session_id} is at version {current_version}, not {expected_version}: "
            "it was changed by another writer; read it again and retry"
        )
        self.session_id = session_id
        self.expected_version = expected_version
        self.current_version = current_version


class InvalidOperationError(MnemosyneError, ValueError):
    """The operation is not possible on this input (a bad role, no next sibling, ...)."""

    code = "invalid_operation"


class IdTakenError(InvalidOperationError):
    """An id given for a new node or session is in use: ids are unique across the
    database (an import of something imported before)."""

    code = "id_taken"

    def __init__(self, kind: str, taken_id: str) -> None:
        super().__init__(
            f"{kind} id {taken_id} is taken: {kind} ids are unique across the database"
        )
        self.kind = kind
        self.taken_id = taken_id


class StaleCursorError(InvalidOperationError):
    """A page's cursor no longer names a place in its list (its node was pruned,
    deleted or purged, its journal entry dropped): read the list again from the start."""

    code = "stale_cursor"


class IdempotencyKeyReusedError(InvalidOperationError):
    """An idempotency key sent again with another request than the one it was first
    sent with (a key names one write: a new write needs a new key)."""

    code = "idempotency_key_reused"

    def __init__(self, key: str) -> None:
        super().__init__(
            f"the idempotency key {key!r} was used for another request: send a new key"
            " with a new write"
        )
        self.key = key


class DeltaProblem:
    """One refused operation of a delta: where it is, what it was, why."""

    __slots__ = ("index", "operation", "reason")

    def __init__(self, index: int, operation: object, reason: str) -> None:
        self.index = index
        self.operation = operation
        self.reason = reason

    def __str__(self) -> str:
        return f"operation {self.index} {describe_operation(self.operation)}: {self.reason}"

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "operation": self.operation, "reason": self.reason}


def describe_operation(operation: object) -> str:
    if isinstance(operation, dict):
        parts = [str(operation.get("op", "?")), str(operation.get("path", "?"))]
        if "value" in operation:
            parts.append(repr(operation["value"]))
        return "(" + " ".join(parts) + ")"
    return f"({operation!r})"


class InvalidDeltaError(InvalidOperationError):
    """A delta does not apply to the state it was given: nothing of it was stored.

    ``problems`` lists every refused operation, not just the first.
    """

    code = "invalid_delta"

    def __init__(self, problems: list[DeltaProblem], node_id: str | None = None) -> None:
        where = f" at node {node_id}" if node_id else ""
        listed = "; ".join(str(p) for p in problems)
        super().__init__(f"invalid delta{where}: {listed}")
        self.problems = problems
        self.node_id = node_id


class SchemaError(MnemosyneError, ValueError):
    """A state schema is not valid; ``problems`` names each key that is wrong."""

    code = "invalid_schema"

    def __init__(self, problems: list[str]) -> None:
        super().__init__("invalid state schema: " + "; ".join(problems))
        self.problems = problems


class StorageError(MnemosyneError):
    """The database cannot be used: not a database, corrupt, or of an unknown schema."""

    code = "storage_error"


class JsonTextError(MnemosyneError, ValueError):
    """JSON text refused by :mod:`mnemosyne.jsontext`: not JSON, or past one of its limits.

    ``limit`` names the limit passed (``max_depth``, ``max_digits``...; ``None`` when
    the text is not JSON or holds what JSON cannot: ``NaN``, a lone surrogate);
    ``path`` is where in the document (keys and indexes), ``line`` the line of JSON
    Lines (or of a syntax error), ``column`` the column of a syntax error. The message
    is one line: ``line 3: extra.a: nested too deep: more than 64 levels (the limit)``.
    """

    code = "invalid_json"

    def __init__(
        self,
        problem: str,
        *,
        limit: str | None = None,
        path: tuple[str | int, ...] = (),
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.limit = limit
        self.path = path
        self.line = line
        self.column = column

    def __str__(self) -> str:
        parts = []
        if self.line is not None and self.column is None:
            parts.append(f"line {self.line}")
        if self.path:
            parts.append(path_text(self.path))
        if self.syntax:
            where = f"line {self.line}, " if self.line is not None else ""
            return ": ".join([*parts, f"not JSON: {self.problem} ({where}column {self.column})"])
        return ": ".join([*parts, self.problem])

    @property
    def syntax(self) -> bool:
        """The text is not JSON (``problem`` is the decoder's message; ``line`` and
        ``column`` say where), rather than JSON past a limit."""
        return self.column is not None


_NAME = re.compile(r"^[A-Za-z0-9_]+$")
NAME_SHOWN = 40
"""Characters of a key shown in a JSON path (a key can be megabytes long)."""
PATH_PARTS = 12
"""Parts of a JSON path shown in a message (a path into deep nesting is cut after them)."""


def path_text(path: tuple[str | int, ...]) -> str:
    """A JSON path as text: ``entries.0.key``, ``nodes[3].metadata``; ``(top)`` for none.

    A path of more than :data:`PATH_PARTS` parts is cut (``a.b.c…`` and how deep).
    """
    parts: list[str] = []
    if len(path) > PATH_PARTS:
        return f"{path_text(path[:PATH_PARTS])}… ({len(path)} levels down)"
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        elif len(part) <= NAME_SHOWN and _NAME.match(part):
            parts.append(f".{part}" if parts else part)
        else:
            cut = part[:NAME_SHOWN] + ("…" if len(part) > NAME_SHOWN else "")
            parts.append(f"[{json.dumps(cut, ensure_ascii=False)}]")
    return "".join(parts) or "(top)"
