"""The Jinja2 templates: the package's own, any of them overridden by a campaign's.

Templates are rendered in Jinja2's immutable sandbox: a campaign folder is content a
player may have downloaded, and its templates must not reach Python objects or
change the values they are given. Card and lore text is *data* given to the
templates, never rendered as a template itself (it keeps SillyTavern's ``{{char}}`` and
``{{user}}`` macros, which :func:`prompts.macros` substitutes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateError

__all__ = ["TEMPLATE_NAMES", "Templates", "UsedTemplate"]

PACKAGE_DIR = Path(__file__).parent / "templates"
SUFFIX = ".j2"

#: Every template the engine renders; a campaign may override any of them with a file
#: of the same name in its ``templates/`` folder.
TEMPLATE_NAMES = (
    "system",
    "character",
    "cast",
    "away",
    "lore",
    "summary",
    "state",
    "persona",
    "continue",
    "impersonate",
    "summarize",
    "recap",
    "extract",
    "plan",
)


@dataclass(frozen=True)
class UsedTemplate:
    """Which file a template came from and its source text (for the trace)."""

    name: str
    origin: str
    """``package`` or the path of the campaign's file."""
    source: str


class Templates:
    """The templates of one campaign (or the package's alone)."""

    def __init__(self, override_dir: Path | None = None) -> None:
        self._override = override_dir if override_dir and override_dir.is_dir() else None
        loaders: list[jinja2.BaseLoader] = [jinja2.FileSystemLoader(PACKAGE_DIR)]
        if self._override is not None:
            loaders.insert(0, jinja2.FileSystemLoader(self._override))
        self._env = ImmutableSandboxedEnvironment(
            loader=jinja2.ChoiceLoader(loaders),
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
            undefined=jinja2.ChainableUndefined,
        )
        self._cache: dict[str, tuple[jinja2.Template, UsedTemplate]] = {}

    def _load(self, name: str) -> tuple[jinja2.Template, UsedTemplate]:
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        if name not in TEMPLATE_NAMES:
            raise TemplateError(f"no template named {name!r} (known: {', '.join(TEMPLATE_NAMES)})")
        filename = name + SUFFIX
        origin = "package"
        if self._override is not None and (self._override / filename).is_file():
            origin = str(self._override / filename)
        try:
            source = (Path(origin) if origin != "package" else PACKAGE_DIR / filename).read_text(
                encoding="utf-8"
            )
            template = self._env.get_template(filename)
        except jinja2.TemplateSyntaxError as error:
            raise TemplateError(
                f"template {origin if origin != 'package' else filename}, line {error.lineno}: "
                f"{error.message}"
            ) from None
        except (OSError, UnicodeDecodeError) as error:
            raise TemplateError(f"template {filename} cannot be read: {error}") from None
        loaded = (template, UsedTemplate(name, origin, source))
        self._cache[name] = loaded
        return loaded

    def used(self, name: str) -> UsedTemplate:
        """Where template ``name`` comes from and its source."""
        return self._load(name)[1]

    def render(self, name: str, context: Mapping[str, Any]) -> str:
        """Render template ``name``; surrounding blank space is stripped.

        Raises:
            TemplateError: the template is unknown, malformed or fails while rendering
                (the message names its file and line).
        """
        template, used = self._load(name)
        try:
            return template.render(**context).strip()
        except jinja2.TemplateError as error:
            where = used.origin if used.origin != "package" else name + SUFFIX
            raise TemplateError(f"template {where} failed: {error}") from None
