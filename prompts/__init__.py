"""Prompts: Jinja2 templates shipped with the package, and how a prompt is assembled.

A campaign overrides any template with a file of the same name in its
``templates/`` folder (see ``docs/prompts.md``). Rendering is sandboxed.
"""

from ._templates import TEMPLATE_NAMES, Templates, UsedTemplate
from .build import (
    FRAMING,
    PART_TEMPLATES,
    PARTS,
    SYSTEM_PROMPT_PART,
    TOKEN_COUNTS,
    Injection,
    Prompt,
    TokenCounts,
    assemble,
    fit,
    history_message,
    macros,
    render_parts,
    sent_text,
)
from .errors import PromptError, TemplateError
from .note import NOTE_PART, PlacedNote, place_note, with_note

__all__ = [
    "FRAMING",
    "NOTE_PART",
    "PARTS",
    "PART_TEMPLATES",
    "SYSTEM_PROMPT_PART",
    "TEMPLATE_NAMES",
    "TOKEN_COUNTS",
    "Injection",
    "PlacedNote",
    "Prompt",
    "PromptError",
    "TemplateError",
    "Templates",
    "TokenCounts",
    "UsedTemplate",
    "assemble",
    "fit",
    "history_message",
    "macros",
    "place_note",
    "render_parts",
    "sent_text",
    "with_note",
]
