"""The errors of the prompt builder."""

from __future__ import annotations

__all__ = ["PromptError", "TemplateError"]


class PromptError(Exception):
    """A prompt cannot be built; the message says what was wrong."""


class TemplateError(PromptError):
    """A template is unknown, malformed or failed to render (its file and line named)."""
