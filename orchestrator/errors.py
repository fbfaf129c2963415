"""The errors of the turn loop: one hierarchy, each message written for the player."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemosyne import Node, Session

__all__ = ["ModelError", "OrchestratorError", "TurnError", "TurnInterrupted"]


class OrchestratorError(Exception):
    """Base of every error the turn loop raises on purpose."""

    code = "orchestrator_error"


class TurnError(OrchestratorError, ValueError):
    """The turn asked for cannot be played here (reroll of a user node, empty session...)."""

    code = "invalid_turn"


class ModelError(OrchestratorError):
    """The model could not be called, or failed after its retries; nothing was stored.

    ``kind`` says which failure it was, a stable name for programs (``no_key``: the
    provider needs a key and none is set, nothing was sent; ``auth``: the provider
    refused the key, or the model to it; ``not_found``, ``context_window``,
    ``rate_limit``, ``server``, ``timeout``, ``connection``, ``bad_request``,
    ``empty``, ``config``); the message says what to do about it (for a key: which
    variable to set). Only ``rate_limit``, ``server``, ``timeout`` and ``connection``
    are retried before they are raised.
    """

    code = "model_error"

    def __init__(self, message: str, kind: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


class TurnInterrupted(OrchestratorError):
    """The player stopped the turn before the reply had any text: no reply is stored
    (an empty one would be sent to the model in every later prompt). The player's
    message of a say or an edit is kept, and HEAD is on it (``user_node``), so the next
    turn can continue from it; other turns store nothing (``user_node`` is ``None``).
    """

    code = "interrupted"

    def __init__(
        self, message: str, *, user_node: Node | None = None, session: Session | None = None
    ) -> None:
        super().__init__(message)
        self.user_node = user_node
        self.session = session
