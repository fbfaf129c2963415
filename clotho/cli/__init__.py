"""The ``clotho`` command line (Typer). See ``docs/cli.md`` and the README."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import import_module

from ._app import app

__all__ = ["app", "main"]

# The command modules register their commands when imported; this order is the order
# of ``clotho --help``.
for _module in (
    "tree",
    "tags",
    "state",
    "editor",
    "play",
    "replay",
    "tracediff",
    "cascade",
    "lore",
    "cast",
    "search",
    "watch",
    "exchange",
    "stfolder",
    "serve",
    "db",
    "demo",
):
    import_module(f"{__name__}.{_module}")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line (the ``clotho`` entry point)."""
    app(args=list(argv) if argv is not None else None, prog_name="clotho")
