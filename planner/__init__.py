"""The planner: which lore a turn needs, and finding it.

Lorebooks in SillyTavern's World Info format (files, and the books inside character
cards), keyword activation as SillyTavern does it, retrieval by meaning from Chroma,
and Clotho's world-state conditions on entries. The turn loop sees only the
interface of :mod:`planner.base`.
"""

from .base import LoreHit, Plan, PlanCall, PlanContext, Planner, Retrieval, RuleBasedPlanner
from .errors import CardError, ConditionError, LorebookError, PlannerError, RetrievalError

__all__ = [
    "CardError",
    "ConditionError",
    "LoreHit",
    "LorebookError",
    "Plan",
    "PlanCall",
    "PlanContext",
    "Planner",
    "PlannerError",
    "Retrieval",
    "RetrievalError",
    "RuleBasedPlanner",
]
