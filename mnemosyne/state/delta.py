"""Deltas: short lists of typed operations on a world state, checked before use.

A state is a plain JSON-ready mapping::

    {"variables": {"hp": 90, "affinity": {"marla": 5}}, "active_lore_ids": [], "summary": "",
     "lore_timers": {}, "author_note": None, "present": None}

The built-ins belong to the engine: ``active_lore_ids`` (the lore in the node's prompt),
``summary`` (the running summary), ``lore_timers`` (World Info's sticky and cooldown
effects, a JSON object only ever replaced whole with ``set``, or cleared with ``unset``)
and ``author_note`` (the player's author's note, :mod:`mnemosyne.state.note`: ``None``,
or an object set whole and checked, every field filled in; ``unset`` removes it) and
``present`` (who of the cast is in the scene, :mod:`mnemosyne.state.presence`: ``None``
for everyone, or a list of names that ``append`` and ``remove`` change).

:func:`apply_delta` never changes the state it is given (containers are copied on
write, so states may share what did not change) and never half-applies: every
operation is checked in order against the state the previous ones made, and if any
is refused, :class:`InvalidDeltaError` lists all the refused ones and nothing is
returned.

Operations (``path`` is a variable, ``name.key`` an entry of a map, or a built-in):

- ``set``: replace the value (``value`` of the variable's type).
- ``inc``: add ``value`` to a number (from its default when unset).
- ``append``: add ``value`` to a list, or to a set (a no-op if it is already there).
- ``remove``: take ``value`` out of a list (its first occurrence) or a set; refused
  if it is not there.
- ``unset``: back to the default (a map entry, or a variable of the permissive
  schema: removed).

Numbers with bounds are clamped into them, or the operation is refused, as the
schema says; a bound may name another variable (``max = "max_hp"``), read from the
state as the delta has made it so far.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import DeltaProblem, InvalidDeltaError
from ..jsontext import MAX_DEPTH
from .note import check_note
from .presence import apply_presence
from .schema import (
    BUILT_INS,
    NUMBERS,
    PERMISSIVE,
    StateSchema,
    Variable,
    check_value,
    normalise,
    type_of,
)

__all__ = [
    "OPS",
    "State",
    "apply_delta",
    "diff_states",
    "flatten",
    "touches",
    "unstorable",
    "value_at",
]

State = dict[str, Any]
OPS = ("set", "inc", "append", "remove", "unset")
_NEEDS_VALUE = ("set", "inc", "append", "remove")
_MISSING: Any = object()
_LORE = Variable(type="set")
_SUMMARY = Variable(type="str")
_BUILT_IN_TYPES = StateSchema()
# The permissive schema's inferred types, made once.
_SIMPLE = {kind: Variable(type=kind) for kind in ("int", "float", "bool", "str", "list")}
_ANY_MAP = Variable(type="map", values=Variable(type="list"))


class _Refused(Exception):
    """One operation cannot be applied (its reason is the message)."""


NON_FINITE = "numbers must be finite (JSON has no NaN or Infinity)"
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep (a file could not take it back)"


def unstorable(value: Any) -> str | None:
    """Why ``value`` cannot be stored as JSON that every reader (an exported tree file
    among them) takes back, or ``None``: a number that is not finite, or nesting deeper
    than :data:`mnemosyne.jsontext.MAX_DEPTH`. (A loop, not recursion: values may nest
    deep.)"""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return NON_FINITE
        if isinstance(item, (Mapping, list, tuple)):
            if depth >= MAX_DEPTH:
                return TOO_DEEP
            items = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in items)
    return None


def apply_delta(
    schema: StateSchema,
    state: State,
    delta: Sequence[Mapping[str, Any]] | None,
    *,
    node_id: str | None = None,
) -> State:
    """The state after ``delta``.

    Raises:
        InvalidDeltaError: listing every refused operation; ``state`` is unchanged.
    """
    if not delta:
        return state
    if isinstance(delta, (str, bytes)) or not isinstance(delta, Sequence):
        raise InvalidDeltaError(
            [DeltaProblem(0, delta, "a delta is a list of operations")], node_id
        )
    new: State = {
        "variables": dict(state["variables"]),
        "active_lore_ids": state["active_lore_ids"],
        "summary": state["summary"],
        "lore_timers": state["lore_timers"],
        "author_note": state.get("author_note"),
        "present": state.get("present"),
    }
    problems: list[DeltaProblem] = []
    for index, operation in enumerate(delta):
        try:
            _apply(schema, new, operation)
        except _Refused as refused:
            problems.append(DeltaProblem(index, operation, str(refused)))
    if problems:
        raise InvalidDeltaError(problems, node_id)
    return new


def _apply(schema: StateSchema, state: State, operation: Any) -> None:
    if not isinstance(operation, Mapping):
        raise _Refused("an operation is an object with 'op' and 'path'")
    op, path = operation.get("op"), operation.get("path")
    if op not in OPS:
        raise _Refused(f"op must be one of {', '.join(OPS)}, not {op!r}")
    if not isinstance(path, str) or not path:
        raise _Refused("'path' must be a non-empty string")
    if op in _NEEDS_VALUE and "value" not in operation:
        raise _Refused(f"{op} needs a 'value'")
    unknown = set(operation) - {"op", "path", "value"}
    if unknown:
        raise _Refused(f"unknown field(s): {', '.join(sorted(unknown))}")
    value = operation.get("value")
    parts = path.split(".")
    if len(parts) > 2 or not all(parts):
        raise _Refused(f"path {path!r}: a variable, or a map's 'name.key'")
    if parts[0] == "lore_timers":
        if len(parts) > 1 or op not in ("set", "unset"):
            raise _Refused("lore_timers is only ever set whole, or unset")
        if op == "set" and not isinstance(value, dict):
            raise _Refused(f"lore_timers is an object, not {value!r}")
        state["lore_timers"] = value if op == "set" else {}
        return
    if parts[0] == "author_note":
        if len(parts) > 1 or op not in ("set", "unset"):
            raise _Refused("author_note is only ever set whole, or unset")
        try:
            state["author_note"] = check_note(value) if op == "set" else None
        except ValueError as error:
            raise _Refused(str(error)) from None
        return
    if parts[0] == "present":
        if len(parts) > 1:
            raise _Refused("present has no entries")
        try:
            state["present"] = apply_presence(op, value, state.get("present"))
        except ValueError as error:
            raise _Refused(str(error)) from None
        return
    if parts[0] in ("active_lore_ids", "summary"):
        if len(parts) > 1:
            raise _Refused(f"{parts[0]} has no entries")
        built_in = _LORE if parts[0] == "active_lore_ids" else _SUMMARY
        current = state[parts[0]]
        # built-ins have their types whatever the schema (the permissive one included)
        result = _operate(_BUILT_IN_TYPES, state, op, value, built_in, current, path)
        state[parts[0]] = built_in.initial() if result is _MISSING else result
        return
    variables: dict[str, Any] = state["variables"]
    name = parts[0]
    if schema.permissive:
        _apply_permissive(schema, state, op, value, parts, path)
        return
    spec = schema.variables.get(name)
    if spec is None:
        raise _Refused(f"unknown variable {name!r}")
    if len(parts) == 1:
        result = _operate(schema, state, op, value, spec, variables[name], path)
        variables[name] = spec.initial() if result is _MISSING else result
        return
    if spec.type != "map" or spec.values is None:
        raise _Refused(f"{name} is {_a(spec.type)}, not a map")
    entries = dict(variables[name])
    key = parts[1]
    result = _operate(schema, state, op, value, spec.values, entries.get(key, _MISSING), path)
    if result is _MISSING:
        entries.pop(key, None)
    else:
        entries[key] = result
    variables[name] = entries


def _apply_permissive(
    schema: StateSchema, state: State, op: str, value: Any, parts: list[str], path: str
) -> None:
    variables: dict[str, Any] = state["variables"]
    name = parts[0]
    if len(parts) == 1:
        current = variables.get(name, _MISSING)
        result = _operate(schema, state, op, value, _inferred(current, value, op), current, path)
        if result is _MISSING:
            variables.pop(name, None)
        else:
            variables[name] = result
        return
    holder = variables.get(name, _MISSING)
    if holder is not _MISSING and not isinstance(holder, dict):
        raise _Refused(f"{name} holds {_a(str(type_of(holder)))}, not a map")
    entries = dict(holder) if holder is not _MISSING else {}
    current = entries.get(parts[1], _MISSING)
    result = _operate(schema, state, op, value, _inferred(current, value, op), current, path)
    if result is _MISSING:
        entries.pop(parts[1], None)
    else:
        entries[parts[1]] = result
    variables[name] = entries


def _inferred(current: Any, value: Any, op: str) -> Variable | None:
    """The permissive schema's type of a variable: its value's, else the new one's."""
    sample = current if current is not _MISSING else value
    if op in ("append", "remove") and current is _MISSING:
        return _SIMPLE["list"]
    kind = type_of(sample)
    if kind is None:
        if op == "unset":
            return None
        raise _Refused(f"cannot hold {sample!r}")
    return _ANY_MAP if kind == "map" else _SIMPLE[kind]


def _operate(
    schema: StateSchema,
    state: State,
    op: str,
    value: Any,
    spec: Variable | None,
    current: Any,
    path: str,
) -> Any:
    """The new value of one slot (``_MISSING``: unset it)."""
    if op == "unset":
        return _MISSING
    assert spec is not None
    if op == "set":
        problem = _permissive_check(spec, value) if schema.permissive else check_value(spec, value)
        if problem:
            raise _Refused(f"{path}: {problem}")
        new = normalise(spec, value) if not schema.permissive else value
        return _bounded(schema, state, spec, new, path) if spec.type in NUMBERS else new
    if op == "inc":
        if spec.type not in NUMBERS:
            raise _Refused(f"{path} is {_a(spec.type)}: only numbers can be incremented")
        if type_of(value) not in NUMBERS or (spec.type == "int" and type_of(value) != "int"):
            raise _Refused(f"{path} is {_a(spec.type)}: cannot add {value!r}")
        base = current if current is not _MISSING else spec.initial()
        return _bounded(schema, state, spec, base + value, path)
    if spec.type not in ("set", "list"):
        raise _Refused(f"{path} is {_a(spec.type)}: {op} is for lists and sets")
    items = list(current) if current is not _MISSING else []
    if spec.type == "set" and not isinstance(value, str):
        raise _Refused(f"{path} is a set of strings: cannot {op} {value!r}")
    if op == "append":
        if spec.type == "set":
            return items if value in items else sorted([*items, value])
        return [*items, value]
    if value not in items:
        raise _Refused(f"{path}: {value!r} is not there to remove")
    items.remove(value)
    return items


def _a(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _permissive_check(spec: Variable, value: Any) -> str | None:
    kind = type_of(value)
    if kind is None:
        return f"cannot hold {value!r}"
    if spec.type == "map" and kind == "map":
        return None
    if kind != spec.type:
        return f"holds {_a(spec.type)}, cannot be set to {kind} {value!r}"
    return None


def _bounded(schema: StateSchema, state: State, spec: Variable, number: Any, path: str) -> Any:
    if spec.type == "int" and isinstance(number, float):
        number = int(number)
    for side in ("min", "max"):
        bound = getattr(spec, side)
        if bound is None:
            continue
        label = ""
        if isinstance(bound, str):
            label = f" ({bound})"
            bound = state["variables"].get(bound)
            if type_of(bound) not in NUMBERS:
                continue
        low = side == "min"
        if (number < bound) if low else (number > bound):
            if spec.out_of_bounds == "refuse":
                where = "below its min" if low else "above its max"
                raise _Refused(f"{path} = {number} is {where} {bound}{label}")
            number = bound if spec.type == "float" else int(bound)
    return float(number) if spec.type == "float" else number


# --- reading states --------------------------------------------------------------------


def flatten(state: State) -> dict[str, Any]:
    """``{path: value}``: variables (maps as ``name.key`` entries) and the built-ins."""
    out: dict[str, Any] = {}
    for name, value in state["variables"].items():
        if isinstance(value, dict):
            for key, entry in value.items():
                out[f"{name}.{key}"] = entry
        else:
            out[name] = value
    out.update((name, state.get(name)) for name in BUILT_INS)
    return out


def diff_states(before: State, after: State) -> dict[str, list[Any]]:
    """``{path: [before, after]}`` for every path whose value differs (absent: null)."""
    a, b = flatten(before), flatten(after)
    return {
        path: [a.get(path), b.get(path)]
        for path in sorted(a.keys() | b.keys())
        if a.get(path, _MISSING) != b.get(path, _MISSING)
    }


def value_at(state: State, path: str) -> Any:
    """The value at ``path`` (a variable, a map entry, a built-in); ``None`` if absent."""
    if path in BUILT_INS:
        return state.get(path)
    name, _, key = path.partition(".")
    value = state["variables"].get(name)
    if key:
        return value.get(key) if isinstance(value, dict) else None
    return value


def touches(operation: Mapping[str, Any], path: str) -> bool:
    """Whether an operation writes ``path`` (a whole map's operation touches its entries)."""
    target = operation.get("path")
    if not isinstance(target, str):
        return False
    return target == path or path.startswith(target + ".") or target.startswith(path + ".")


def initial_state(schema: StateSchema | None = None) -> State:
    return (schema or PERMISSIVE).initial_state()
