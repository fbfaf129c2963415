"""The errors of the application shell (settings, CLI, wiring).

Errors of the store come from :mod:`mnemosyne.errors`; these are the shell's own.
"""

from __future__ import annotations

__all__ = ["ClothoError", "NoSessionError", "UsageError"]


class ClothoError(Exception):
    """Base of the errors the shell raises on purpose."""

    code = "clotho_error"


class NoSessionError(ClothoError, LookupError):
    """No session was named and none was used before."""

    code = "no_session"


class UsageError(ClothoError, ValueError):
    """An option's value cannot be used (not JSON, not a folder, ...)."""

    code = "bad_input"
