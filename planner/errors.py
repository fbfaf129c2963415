"""The errors of the planner: one hierarchy, each message naming what was wrong."""

from __future__ import annotations

__all__ = ["CardError", "ConditionError", "LorebookError", "PlannerError", "RetrievalError"]


class PlannerError(Exception):
    """Base of every error the planner raises on purpose."""

    code = "planner_error"


class LorebookError(PlannerError, ValueError):
    """A World Info file or a card's character book is not valid; the message names the field."""

    code = "invalid_lorebook"


class CardError(PlannerError, ValueError):
    """A character card (PNG or JSON) cannot be read; the message says where it went wrong."""

    code = "invalid_card"


class ConditionError(PlannerError, ValueError):
    """A lore entry's world-state condition does not parse; the message shows where."""

    code = "invalid_condition"


class RetrievalError(PlannerError, RuntimeError):
    """The vector index (Chroma, or the embedding model behind it) failed."""

    code = "retrieval_failed"
