"""Campaign folders: ``campaign.toml`` and the files it names.

A campaign gives a session its title, its world-state schema, its model settings,
its character, its lorebooks and card, and its templates. Example::

    title = "The Goblin Cave"

    [model]
    model = "openai/gpt-4o-mini"
    timeout = 60

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

The file is read into :class:`CampaignFile` (pydantic, strict: a value of the wrong
type and an unknown key are refused, the key named with the nearest known one); a
refusal is one line naming the file, the key (``[model].timeout``), its line when it
can be told, and what was wrong.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, ValidationInfo

from clotho.errors import ClothoError
from mnemosyne import PERMISSIVE, SchemaError, StateSchema, jsontext, schema_from_mapping
from mnemosyne.validation import known_keys, problem_line, toml_place
from orchestrator.config import ModelSettings
from orchestrator.setup import Character, TurnSetup
from planner.lore import VectorSettings
from planner.worldinfo import ScanSettings

__all__ = [
    "CAMPAIGN_FILE",
    "Campaign",
    "CampaignError",
    "CampaignFile",
    "CharacterTable",
    "LoreTable",
    "ModelTable",
    "load_campaign",
]

CAMPAIGN_FILE = "campaign.toml"


class CampaignError(ClothoError, ValueError):
    """A campaign folder or one of its files cannot be used; the message names it."""

    code = "invalid_campaign"


def _in_folder(name: str, info: ValidationInfo) -> str:
    """A file the campaign names: inside its folder, and there."""
    folder: Path | None = (info.context or {}).get("folder")
    if folder is None:
        return name
    target = (folder / name).resolve()
    if folder.resolve() not in target.parents:
        raise ValueError(f"{name!r}: the file must be inside the folder")
    if not target.is_file():
        raise ValueError(f"{name!r}: no such file")
    return name


#: The name of a file of the campaign's folder (checked when the folder is given as
#: the validation's ``context={"folder": ...}``).
FileName = Annotated[str, Field(min_length=1), AfterValidator(_in_folder)]


class _Table(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ModelTable(ModelSettings):
    """``[model]``: which models, and how they are called (the settings and their
    defaults are :class:`orchestrator.config.ModelSettings`'); ``[model.params]`` is
    sent as it is."""

    model: str | None = None
    """A litellm model string; the command line's ``--model`` comes first."""
    api_base: str | None = None
    extraction_model: str | None = None
    """The model that extracts state deltas (default: ``model``)."""
    summary_model: str | None = None
    """The model that writes running summaries (default: ``model``)."""
    planner_model: str | None = None
    """The model that plans lore lookups (default: ``model``)."""
    extract: bool = TurnSetup.extract
    """Whether replies go through state extraction."""


_NO_CHARACTER = Character()


class CharacterTable(_Table):
    """``[character]``: the character of a session without a card."""

    name: str = _NO_CHARACTER.name
    description: str = _NO_CHARACTER.description
    personality: str = _NO_CHARACTER.personality
    scenario: str = _NO_CHARACTER.scenario


class LoreTable(ScanSettings):
    """``[lore]``: World Info's settings (:class:`planner.worldinfo.ScanSettings`,
    ``scan_depth``, ``budget_percent``, ``recursive``... in the table itself), the
    files copied into each new session, how lore is found by meaning and planned."""

    books: list[FileName] = Field(default_factory=list)
    """World Info files of the folder."""
    card: FileName | None = None
    """A character card (PNG or JSON) of the folder."""
    planner: Literal["rules", "model"] = "rules"
    """What proposes the lore lookups: rules, or a model call."""
    vectors: VectorSettings = Field(default_factory=VectorSettings)
    """``[lore.vectors]``."""

    @property
    def scan(self) -> ScanSettings:
        """The World Info settings alone."""
        return ScanSettings(**{name: getattr(self, name) for name in ScanSettings.model_fields})


class CampaignFile(_Table):
    """``campaign.toml``."""

    title: str | None = None
    player: str | None = None
    """What ``{{user}}`` becomes."""
    state: Any = None
    """The world-state schema: a table, or the name of a TOML file of the folder (read
    by :func:`mnemosyne.schema_from_mapping`, which names its own problems)."""
    model: ModelTable = Field(default_factory=ModelTable)
    character: CharacterTable = Field(default_factory=CharacterTable)
    lore: LoreTable = Field(default_factory=LoreTable)


@dataclass(frozen=True)
class Campaign:
    folder: Path
    title: str | None
    schema: StateSchema
    model: ModelTable = field(default_factory=ModelTable)
    character: CharacterTable = field(default_factory=CharacterTable)
    player: str | None = None
    """``player = "Name"``: what ``{{user}}`` becomes."""
    lore: LoreTable = field(default_factory=LoreTable)

    @property
    def book_files(self) -> list[Path]:
        return [self.folder / name for name in self.lore.books]

    @property
    def card_file(self) -> Path | None:
        return self.folder / self.lore.card if self.lore.card else None

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


def _read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML, read within the limits."""
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
        return text, tomllib.loads(text, parse_float=_finite)
    except tomllib.TOMLDecodeError as error:
        raise CampaignError(f"{path}: not valid TOML: {error}") from error
    except CampaignError as error:
        raise CampaignError(f"{path}: not a campaign file: {error}") from error


def load_campaign(folder: Path) -> Campaign:
    """Read a campaign folder.

    Raises:
        CampaignError: the folder, its ``campaign.toml`` or a file it names is missing
            or wrong; the message names the file and the key (and its line).
    """
    if not folder.is_dir():
        raise CampaignError(f"{folder}: not a campaign folder (no such folder)")
    path = folder / CAMPAIGN_FILE
    if not path.is_file():
        raise CampaignError(f"{folder}: not a campaign folder (no {CAMPAIGN_FILE})")
    text, data = _read_toml(path)
    try:
        read = CampaignFile.model_validate(data, context={"folder": folder})
    except ValidationError as error:
        where = problem_line(
            error, str(path), place=_toml_place, model=CampaignFile, line=_line_finder(text)
        )
        raise CampaignError(where) from None
    schema = PERMISSIVE if read.state is None else _state_schema(path, folder, read.state)
    return Campaign(
        folder.resolve(),
        read.title,
        schema,
        model=read.model,
        character=read.character,
        player=read.player,
        lore=read.lore,
    )


def _toml_place(loc: Sequence[int | str]) -> str:
    """A key as :func:`toml_place` writes it; a table as ``[lore]``."""
    if loc and known_keys(CampaignFile, loc):
        return f"[{'.'.join(str(part) for part in loc)}]"
    return toml_place(loc)


_HEADER = re.compile(r"\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"\s*([A-Za-z0-9_-]+)\s*=")


def _line_finder(text: str) -> Callable[[Sequence[int | str]], int | None]:
    """The line of ``[table] key = ...`` for a place, when the file writes it so
    (a dotted or quoted key, an inline table: no line)."""
    lines = text.splitlines()

    def line(loc: Sequence[int | str]) -> int | None:
        keys = [str(part) for part in loc if not isinstance(part, int)]
        if not keys:
            return None
        table, key = ".".join(keys[:-1]), keys[-1]
        current = ""
        for number, content in enumerate(lines, start=1):
            header = _HEADER.match(content)
            if header:
                current = header.group(1).replace(" ", "")
                if current == ".".join(keys):
                    return number
                continue
            found = _KEY.match(content)
            if found and found.group(1) == key and current == table:
                return number
        return None

    return line


def _state_schema(path: Path, folder: Path, state: object) -> StateSchema:
    """The schema ``state =`` gives: a TOML file of the folder, or a table in place."""
    if isinstance(state, str):
        schema_path = (folder / state).resolve()
        if folder.resolve() not in schema_path.parents:
            raise CampaignError(f"{path}: state = {state!r}: the file must be inside the folder")
        source, (_, mapping) = str(schema_path), _read_toml(schema_path)
    elif isinstance(state, dict):
        source, mapping = f"{path} [state]", state
    else:
        raise CampaignError(f"{path}: state: a table, or the name of a TOML file, not {state!r}")
    try:
        return schema_from_mapping(mapping, source=source)
    except SchemaError as error:
        raise CampaignError("; ".join(error.problems)) from error
