"""One line for a pydantic :class:`~pydantic.ValidationError`: where and what was wrong.

Every file format read through a pydantic model (campaign files, tree files, chats,
World Info settings) reports a refusal the same way::

    campaign.toml: [model].timeout: Input should be a valid number (got 'soon')
    tree.json: nodes[12].role: Input should be 'system', 'user' or 'assistant' (got 'narrator')
    campaign.toml: [lore].scan_dept: unknown key (did you mean 'scan_depth'?)

The first few problems are named and the rest counted: a file with ten thousand bad
nodes gets one readable line. :func:`json_place` writes a place as a JSON path
(``nodes[12].role``), :func:`toml_place` as a TOML key (``[model].timeout``).
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ValidationError

from .jsontext import preview

__all__ = ["SHOWN_PROBLEMS", "json_place", "known_keys", "problem_line", "toml_place"]

#: Problems named in a message; the rest are counted.
SHOWN_PROBLEMS = 3

Place = Sequence[int | str]

#: Error types whose input is not worth showing (a missing key has none; an unknown
#: key's value says nothing about the mistake, its name does).
_NO_INPUT = frozenset({"missing", "extra_forbidden"})


def json_place(loc: Place) -> str:
    """``("nodes", 12, "role")`` as ``nodes[12].role``; the empty place as ``(top)``."""
    out = ""
    for part in loc:
        if part == "[key]":  # pydantic's mark of a dict's key (the key is the part before)
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top)"


def toml_place(loc: Place) -> str:
    """``("model", "timeout")`` as ``[model].timeout``; a top-level key as itself;
    list items as ``[lore].books[2]``."""
    keys = [str(part) for part in loc if not isinstance(part, int)]
    if not keys:
        return "(top)"
    last_key = max(i for i, part in enumerate(loc) if not isinstance(part, int))
    table, rest = loc[:last_key], loc[last_key:]
    tail = json_place(rest)
    if not table:
        return tail
    return f"[{json_place(table)}].{tail}"


def known_keys(model: Any, loc: Place) -> list[str]:
    """The keys a model (or a TypedDict) takes at ``loc`` (its fields' names or
    aliases), following nested models, lists and dicts of them; ``[]`` when the place
    is not a model's."""
    kind = model
    for part in loc:
        kind = _model_in(kind)
        keys = _keys(kind)
        if isinstance(part, str) and keys is not None:
            if part not in keys:
                return []
            kind = keys[part]
        else:  # an index of a list, a key of a dict
            kind = _item_of(kind)
    return list(_keys(_model_in(kind)) or ())


def _keys(kind: Any) -> dict[str, Any] | None:
    """A model's or a TypedDict's keys (aliases where they have one) and their types."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return {field.alias or name: field.annotation for name, field in kind.model_fields.items()}
    if isinstance(kind, type) and issubclass(kind, dict) and hasattr(kind, "__required_keys__"):
        # a TypedDict (typing's or typing_extensions', which typing.is_typeddict misses)
        return typing.get_type_hints(kind, include_extras=True)
    return None


def _model_in(kind: Any) -> Any:
    """The model of ``X | None`` or ``Annotated[X, ...]``, else ``kind`` itself."""
    origin = typing.get_origin(kind)
    if origin is typing.Annotated:
        return _model_in(typing.get_args(kind)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(kind):
            inner = _model_in(arg)
            if _keys(inner) is not None:
                return inner
    return kind


def _item_of(kind: Any) -> Any:
    """The item type of ``list[X]`` or the value type of ``dict[K, X]``."""
    args = typing.get_args(kind)
    return args[-1] if args else None


def _problem(item: Any, model: Any, patterns: Mapping[str, str]) -> str:
    kind = item["type"]
    if kind == "missing":
        return "missing"
    if kind == "extra_forbidden":
        loc = item["loc"]
        known = known_keys(model, loc[:-1]) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.7)
        if close:
            return f"unknown key (did you mean {close[0]!r}?)"
        return f"unknown key (known: {', '.join(known)})" if known else "unknown key"
    if kind in ("dict_type", "model_type") or (
        kind == "is_instance_of" and item["ctx"]["class"].startswith("dict")
    ):  # a JSON or TOML file's words
        return f"Input should be an object (got {preview(item.get('input'))})"
    if kind == "string_pattern_mismatch" and item["ctx"]["pattern"] in patterns:
        return f"{patterns[item['ctx']['pattern']]} (got {preview(item.get('input'))})"
    message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in ("value_error", "assertion_error") or kind in _NO_INPUT:
        return message
    return f"{message} (got {preview(item.get('input'))})"


def problem_line(
    error: ValidationError,
    source: str | None = None,
    *,
    place: Callable[[Place], str] = json_place,
    model: Any = None,
    line: Callable[[Place], int | None] | None = None,
    patterns: Mapping[str, str] | None = None,
    shown: int = SHOWN_PROBLEMS,
) -> str:
    """One line naming the first ``shown`` problems of ``error`` and counting the rest.

    Args:
        source: the file (or what it is) the value came from, first on the line.
        place: how a place is written (:func:`json_place`, :func:`toml_place`).
        model: the model validated (a class, or a type such as ``list[Node]``): an
            unknown key is then answered with the nearest known one.
        line: the line of the file a place is on, when it can be told (``(line 7)``).
        patterns: what a string pattern means (``{ID: "expected an id"}``), said
            instead of pydantic's "should match pattern '^[0-9a-f]{32}$'".
    """
    problems = []
    for item in error.errors(include_url=False)[:shown]:
        number = line(item["loc"]) if line is not None else None
        at = f" (line {number})" if number else ""
        problems.append(f"{place(item['loc'])}{at}: {_problem(item, model, patterns or {})}")
    more = error.error_count() - len(problems)
    joined = "; ".join(problems) + (f"; and {more:,} more" if more > 0 else "")
    return f"{source}: {joined}" if source else joined
