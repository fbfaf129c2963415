"""The JSON schema a model's state delta must follow, built from the campaign's schema.

It is given to the model as structured output (``response_format`` of type
``json_schema``), so a model that supports it can only name variables that exist, with
operations and values of their type. The delta is still validated afterwards
(bounds, sets, the current state): the JSON schema narrows, it does not decide.
"""

from __future__ import annotations

from typing import Any

from mnemosyne import StateSchema, Variable

__all__ = ["delta_json_schema", "response_format"]

_JSON_TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "str": {"type": "string"},
    "set": {"type": "array", "items": {"type": "string"}},
    "list": {"type": "array"},
}
_ANY_VALUE: dict[str, Any] = {
    "type": ["string", "number", "integer", "boolean", "array", "object", "null"]
}


def _value(spec: Variable) -> dict[str, Any]:
    if spec.type == "enum":
        return {"type": "string", "enum": list(spec.choices or [])}
    if spec.type == "map":
        assert spec.values is not None
        return {"type": "object", "additionalProperties": _value(spec.values)}
    return dict(_JSON_TYPES[spec.type])


def _operation(
    ops: list[str], path: dict[str, Any], value: dict[str, Any] | None
) -> dict[str, Any]:
    properties: dict[str, Any] = {"op": {"type": "string", "enum": ops}, "path": path}
    required = ["op", "path"]
    if value is not None:
        properties["value"] = value
        required.append("value")
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


def _alternatives(name: str, spec: Variable) -> list[dict[str, Any]]:
    path = {"type": "string", "const": name}
    value = _value(spec)
    out = [_operation(["set"], path, value), _operation(["unset"], path, None)]
    if spec.type in ("int", "float"):
        out.append(_operation(["inc"], path, value))
    elif spec.type in ("set", "list"):
        item = value.get("items", _ANY_VALUE)
        out.append(_operation(["append", "remove"], path, item))
    elif spec.type == "map":
        assert spec.values is not None
        entry_path = {"type": "string", "pattern": f"^{name}\\.[^.]+$"}
        out.append(_operation(["set"], entry_path, _value(spec.values)))
        if spec.values.type in ("int", "float"):
            out.append(_operation(["inc"], entry_path, _value(spec.values)))
        out.append(_operation(["unset"], entry_path, None))
    return out


def delta_json_schema(schema: StateSchema) -> dict[str, Any]:
    """``{"operations": [...]}`` where each operation fits a variable of ``schema``
    (any name and value when the schema is permissive)."""
    alternatives = [
        alternative
        for name, spec in sorted(schema.variables.items())
        for alternative in _alternatives(name, spec)
    ]
    if schema.permissive:
        alternatives.append(
            _operation(
                ["set", "inc", "append", "remove"],
                {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_-]*(\.[^.]+)?$"},
                _ANY_VALUE,
            )
        )
        alternatives.append(_operation(["unset"], {"type": "string"}, None))
    items: dict[str, Any] = {"anyOf": alternatives} if alternatives else {"not": {}}
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": items}},
        "required": ["operations"],
        "additionalProperties": False,
    }


def response_format(schema: StateSchema) -> dict[str, Any]:
    """The ``response_format`` argument of a chat completion asking for a delta."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "state_delta", "schema": delta_json_schema(schema)},
    }
