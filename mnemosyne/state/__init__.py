"""World state: the schema of a campaign's variables, deltas, and reading states.

Every node stores its delta; the store keeps keyframes (whole states) every few
levels, so the state at any node is a keyframe plus a few deltas.
"""

from .delta import OPS, State, apply_delta, diff_states, flatten, touches, value_at
from .schema import BUILT_INS, PERMISSIVE, StateSchema, Variable, schema_from_mapping

__all__ = [
    "BUILT_INS",
    "OPS",
    "PERMISSIVE",
    "State",
    "StateSchema",
    "Variable",
    "apply_delta",
    "diff_states",
    "flatten",
    "schema_from_mapping",
    "touches",
    "value_at",
]
