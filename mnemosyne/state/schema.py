"""A campaign's world-state schema: typed variables with defaults and bounds.

Declared in TOML (see ``docs/state.md``) and read into these pydantic models. A
session stores its schema (as JSON) when it is created, so every process computes
the same states whatever happens to the campaign folder later. A session without a
campaign uses :data:`PERMISSIVE`: any variable may be set, and its type is the type
of the value it holds.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import SchemaError

__all__ = [
    "BUILT_INS",
    "PERMISSIVE",
    "StateSchema",
    "Variable",
    "VariableType",
    "schema_from_json",
    "schema_from_mapping",
]

VariableType = Literal["int", "float", "bool", "str", "enum", "set", "list", "map"]
NUMBERS = ("int", "float")
#: Parts of every state that are not variables.
BUILT_INS = ("active_lore_ids", "summary", "lore_timers", "author_note", "present")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def type_of(value: Any) -> VariableType | None:
    """The variable type a JSON value has (``None`` for null)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "map"
    return None


class Variable(BaseModel):
    """One variable: its type, default, bounds and what happens out of bounds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: VariableType
    default: Any = None
    min: int | float | str | None = Field(
        default=None, description="a number, or the name of another number variable"
    )
    max: int | float | str | None = None
    out_of_bounds: Literal["clamp", "refuse"] = "clamp"
    choices: list[str] | None = Field(default=None, description="enum: the allowed values")
    values: Variable | None = Field(default=None, description="map: the type of each entry")
    description: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Variable:
        if self.type == "enum":
            if not self.choices:
                raise ValueError("an enum needs a non-empty 'choices' list")
        elif self.choices is not None:
            raise ValueError(f"'choices' is for enums, not for {self.type}")
        if self.type == "map":
            if self.values is None:
                raise ValueError("a map needs 'values': the type of its entries")
            if self.values.type in ("map",):
                raise ValueError("a map's entries cannot be maps")
        elif self.values is not None:
            raise ValueError(f"'values' is for maps, not for {self.type}")
        if self.type not in NUMBERS and (self.min is not None or self.max is not None):
            raise ValueError(f"bounds are for numbers, not for {self.type}")
        if (
            isinstance(self.min, (int, float))
            and isinstance(self.max, (int, float))
            and self.min > self.max
        ):
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.default is not None:
            problem = check_value(self, self.default)
            if problem:
                raise ValueError(f"default: {problem}")
            for bound, low in ((self.min, True), (self.max, False)):
                if isinstance(bound, (int, float)) and (
                    self.default < bound if low else self.default > bound
                ):
                    raise ValueError(f"default {self.default} is outside the bound {bound}")
        return self

    def initial(self) -> Any:
        """The value a new state holds."""
        if self.default is not None:
            return normalise(self, self.default)
        return {
            "int": 0,
            "float": 0.0,
            "bool": False,
            "str": "",
            "enum": (self.choices or [""])[0],
            "set": [],
            "list": [],
            "map": {},
        }[self.type]


def check_value(spec: Variable, value: Any) -> str | None:
    """Why ``value`` cannot be held by a variable of ``spec`` (``None``: it can)."""
    kind = spec.type
    if kind == "int":
        ok = type_of(value) == "int"
    elif kind == "float":
        ok = type_of(value) in NUMBERS
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "enum":
        if not isinstance(value, str) or value not in (spec.choices or []):
            return f"{value!r} is not one of {', '.join(spec.choices or [])}"
        ok = True
    elif kind == "set":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        if not ok:
            return f"a set holds a list of strings, not {_json(value)}"
    elif kind == "list":
        ok = isinstance(value, list)
    else:  # map
        if not isinstance(value, dict):
            return f"a map holds an object, not {_json(value)}"
        assert spec.values is not None
        for key, entry in value.items():
            problem = check_value(spec.values, entry)
            if problem:
                return f"entry {key!r}: {problem}"
        return None
    return None if ok else f"expected {kind}, got {_json(value)}"


def normalise(spec: Variable, value: Any) -> Any:
    """The stored form of an accepted value (floats as floats, sets sorted, unique)."""
    if spec.type == "float":
        return float(value)
    if spec.type == "set":
        return sorted(set(value))
    if spec.type == "map" and spec.values is not None:
        return {k: normalise(spec.values, v) for k, v in value.items()}
    return value


def _json(value: Any) -> str:
    kind = type_of(value)
    return f"{kind} {value!r}" if kind else repr(value)


class StateSchema(BaseModel):
    """The variables of a campaign's world state."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    variables: dict[str, Variable] = Field(default_factory=dict)
    permissive: bool = Field(
        default=False,
        description="any variable may be set; its type is taken from its first value",
    )

    @model_validator(mode="after")
    def _names_and_bounds(self) -> StateSchema:
        for name, spec in self.variables.items():
            if not NAME.match(name):
                raise ValueError(f"variable name {name!r}: letters, digits, '_' and '-' only")
            if name in BUILT_INS:
                raise ValueError(f"variable name {name!r} is a built-in part of every state")
            for side in ("min", "max"):
                bound = getattr(spec, side)
                if isinstance(bound, str):
                    other = self.variables.get(bound)
                    if other is None or other.type not in NUMBERS:
                        raise ValueError(
                            f"{name}.{side} = {bound!r}: not a number variable of this schema"
                        )
        return self

    def initial_state(self) -> dict[str, Any]:
        """The state before any delta: every variable at its default."""
        return {
            "variables": {name: spec.initial() for name, spec in self.variables.items()},
            "active_lore_ids": [],
            "summary": "",
            "lore_timers": {},
            "author_note": None,
            "present": None,
        }

    def to_json(self) -> str:
        return self.model_dump_json(exclude_defaults=True)


#: The schema of a session without a campaign.
PERMISSIVE = StateSchema(permissive=True)


def schema_from_mapping(data: Any, *, source: str = "schema") -> StateSchema:
    """A schema from parsed TOML/JSON; errors name ``source`` and the key.

    Raises:
        SchemaError: listing every problem as ``source: variables.hp.default: ...``.
    """
    try:
        return StateSchema.model_validate(data)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"])
            message = item["msg"].removeprefix("Value error, ")
            problems.append(f"{source}: {where or '(top)'}: {message}")
        raise SchemaError(problems) from error


def schema_from_json(text: str | None) -> StateSchema:
    """The schema a session stored (``None``: the permissive one)."""
    if not text:
        return PERMISSIVE
    return StateSchema.model_validate_json(text)
