"""Campaign folders: ``campaign.toml`` and the files it names.

Today a campaign gives a session its title and its world-state schema; cards,
lorebooks, templates and model settings join with later issues. Example::

    title = "The Goblin Cave"

    [state.variables.hp]
    type = "int"
    default = 100
    min = 0
    max = "max_hp"

    [state.variables.max_hp]
    type = "int"
    default = 100

or ``state = "state.toml"`` to keep the schema in its own file (its top level is
then what ``[state]`` holds: ``[variables.hp]`` ...). See ``docs/state.md``.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any

from clotho.errors import ClothoError
from mnemosyne import PERMISSIVE, SchemaError, StateSchema, jsontext, schema_from_mapping

__all__ = ["CAMPAIGN_FILE", "Campaign", "CampaignError", "load_campaign"]

CAMPAIGN_FILE = "campaign.toml"


class CampaignError(ClothoError, ValueError):
    """A campaign folder or one of its files cannot be used; the message names it."""

    code = "invalid_campaign"


@dataclass(frozen=True)
class Campaign:
    folder: Path
    title: str | None
    schema: StateSchema
    model: dict[str, Any] = field(default_factory=dict)
    """``[model]``: model, api_base, context_window, extraction_model, summary_model,
    timeout, retries, and ``[model.params]`` (sent as they are)."""
    character: dict[str, str] = field(default_factory=dict)
    """``[character]``: name, description, personality, scenario."""
    player: str | None = None
    """``player = "Name"``: what ``{{user}}`` becomes."""
    lore: dict[str, Any] = field(default_factory=dict)
    """``[lore]``: ``books`` (World Info files) and ``card`` (a character card) in the
    folder, copied into each new session; ``scan``, the World Info settings
    (``scan_depth``, ``budget_percent``, ``recursive``... in the table), and ``vectors``
    (``[lore.vectors]``), both parsed; ``planner`` (``rules`` or ``model``)."""

    @property
    def book_files(self) -> list[Path]:
        return [self.folder / name for name in self.lore.get("books", [])]

    @property
    def card_file(self) -> Path | None:
        card = self.lore.get("card")
        return self.folder / card if card else None

    @property
    def templates(self) -> Path:
        """The folder whose ``*.j2`` files override the package's templates."""
        return self.folder / "templates"


MAX_TOML_BYTES = 4 * 1024 * 1024
"""A campaign's TOML file (``campaign.toml``, a state schema): settings and a schema are
a few KB; larger is not a campaign file, and is refused before it is read."""

# What of TOML is not its skeleton: strings of the four kinds, and comments.
_TOML_TEXT = re.compile(
    r'''"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|#[^\n]*'''
)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        raise CampaignError(f"{literal} is not a finite number")
    return value


def _check_toml(text: str) -> None:
    """Refuse what :mod:`tomllib` would fail on with a traceback: arrays and inline
    tables nested deeper than it recurses (``RecursionError``), integers longer than
    ``int()`` reads (``ValueError``); the limits are :mod:`mnemosyne.jsontext`'s."""
    skeleton = _TOML_TEXT.sub('""', text)
    if re.search(f"[0-9_]{{{jsontext.MAX_DIGITS + 1}}}", skeleton):
        raise CampaignError(f"a number of more than {jsontext.MAX_DIGITS} digits (the limit)")
    brackets = _NOT_BRACKET.sub("", skeleton)
    if len(brackets) > jsontext.MAX_DEPTH and (
        max(accumulate(map(_STEP.__getitem__, brackets))) > jsontext.MAX_DEPTH
    ):
        raise CampaignError(f"nested too deep: more than {jsontext.MAX_DEPTH} levels (the limit)")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        size = path.stat().st_size
        if size > MAX_TOML_BYTES:
            raise CampaignError(f"{path}: {size:,} bytes, more than the {MAX_TOML_BYTES:,} allowed")
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as error:
        raise CampaignError(f"{path}: no such file") from error
    except (OSError, UnicodeDecodeError) as error:
        raise CampaignError(f"{path}: cannot be read ({error})") from error
    try:
        _check_toml(text)
        return tomllib.loads(text, parse_float=_finite)
    except tomllib.TOMLDecodeError as error:
        raise CampaignError(f"{path}: not valid TOML: {error}") from error
    except CampaignError as error:
        raise CampaignError(f"{path}: not a campaign file: {error}") from error


def load_campaign(folder: Path) -> Campaign:
    """Read a campaign folder.

    Raises:
        CampaignError: the folder, its ``campaign.toml`` or the schema file it names
            is missing or wrong; the message names the file and the line or key.
    """
    if not folder.is_dir():
        raise CampaignError(f"{folder}: not a campaign folder (no such folder)")
    path = folder / CAMPAIGN_FILE
    if not path.is_file():
        raise CampaignError(f"{folder}: not a campaign folder (no {CAMPAIGN_FILE})")
    data = _read_toml(path)
    title = data.get("title")
    if title is not None and not isinstance(title, str):
        raise CampaignError(f"{path}: title: expected text, got {title!r}")
    model = _model_table(path, data.get("model", {}))
    character = _text_table(path, "character", data.get("character", {}), CHARACTER_KEYS)
    player = _text(path, "player", data.get("player"))
    lore = _lore_table(path, folder, data.get("lore", {}))
    state = data.get("state")
    schema = PERMISSIVE if state is None else _state_schema(path, folder, state)
    return Campaign(
        folder.resolve(), title, schema, model=model, character=character, player=player, lore=lore
    )


def _state_schema(path: Path, folder: Path, state: object) -> StateSchema:
    """The schema ``state =`` gives: a TOML file of the folder, or a table in place."""
    if isinstance(state, str):
        schema_path = (folder / state).resolve()
        if folder.resolve() not in schema_path.parents:
            raise CampaignError(f"{path}: state = {state!r}: the file must be inside the folder")
        source, mapping = str(schema_path), _read_toml(schema_path)
    elif isinstance(state, dict):
        source, mapping = f"{path} [state]", state
    else:
        raise CampaignError(f"{path}: state: a table, or the name of a TOML file, not {state!r}")
    try:
        return schema_from_mapping(mapping, source=source)
    except SchemaError as error:
        raise CampaignError("; ".join(error.problems)) from error


CHARACTER_KEYS = ("name", "description", "personality", "scenario")
MODEL_KEYS: dict[str, type | tuple[type, ...]] = {
    "model": str,
    "api_base": str,
    "extraction_model": str,
    "summary_model": str,
    "planner_model": str,
    "context_window": int,
    "reply_tokens": int,
    "timeout": (int, float),
    "retries": int,
    "extract": bool,
    "params": dict,
}


def _text(path: Path, key: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CampaignError(f"{path}: {key}: expected text, got {value!r}")
    return value


def _text_table(path: Path, name: str, table: Any, keys: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(table, dict):
        raise CampaignError(f"{path}: [{name}] must be a table, not {table!r}")
    for key, value in table.items():
        if key not in keys:
            raise CampaignError(f"{path}: [{name}] {key}: unknown (known: {', '.join(keys)})")
        _text(path, f"{name}.{key}", value)
    return dict(table)


def _model_table(path: Path, table: Any) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise CampaignError(f"{path}: [model] must be a table, not {table!r}")
    for key, value in table.items():
        kind = MODEL_KEYS.get(key)
        if kind is None:
            raise CampaignError(f"{path}: [model] {key}: unknown (known: {', '.join(MODEL_KEYS)})")
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise CampaignError(f"{path}: [model] {key}: wrong type ({value!r})")
    return dict(table)


def _inside(path: Path, folder: Path, key: str, name: Any) -> str:
    if not isinstance(name, str) or not name:
        raise CampaignError(f"{path}: [lore] {key}: expected a file name, got {name!r}")
    target = (folder / name).resolve()
    if folder.resolve() not in target.parents:
        raise CampaignError(f"{path}: [lore] {key} = {name!r}: the file must be inside the folder")
    if not target.is_file():
        raise CampaignError(f"{path}: [lore] {key} = {name!r}: no such file")
    return name


def _lore_table(path: Path, folder: Path, table: Any) -> dict[str, Any]:
    from planner.errors import PlannerError
    from planner.lore import vector_settings
    from planner.worldinfo import ScanSettings

    if not isinstance(table, dict):
        raise CampaignError(f"{path}: [lore] must be a table, not {table!r}")
    lore = dict(table)
    books = lore.pop("books", [])
    if not isinstance(books, list):
        raise CampaignError(f"{path}: [lore] books: a list of file names, not {books!r}")
    card = lore.pop("card", None)
    vectors = lore.pop("vectors", {})
    planner = lore.pop("planner", "rules")
    if planner not in ("rules", "model"):
        raise CampaignError(f"{path}: [lore] planner: 'rules' or 'model', not {planner!r}")
    try:
        scan, search = ScanSettings.from_mapping(lore), vector_settings(vectors)
    except PlannerError as error:
        raise CampaignError(f"{path}: [lore] {error}") from None
    out: dict[str, Any] = {
        "books": [_inside(path, folder, "books", name) for name in books],
        "scan": scan,
        "vectors": search,
        "planner": planner,
    }
    if card is not None:
        out["card"] = _inside(path, folder, "card", card)
    return out
