"""The ``clotho`` command line (Typer). See ``docs/cli.md`` and the README."""

from __future__ import annotations

from collections.abc import Sequence

from . import db, demo, tree  # noqa: F401  (they register their commands)
from ._app import app

__all__ = ["app", "main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (the ``clotho`` entry point)."""
    app(args=list(argv) if argv is not None else None, prog_name="clotho")
