"""``clotho db``: the database's schema."""

from __future__ import annotations

from sqlalchemy import Engine

from mnemosyne._engine import create_store_engine, describe, schema_revision, upgrade
from mnemosyne._schema import SCHEMA_REVISION

from ._app import Cli, command, db_app
from .style import out


def _engine(cli: Cli) -> Engine:
    return create_store_engine(cli.settings.resolved_database_url)


@command(db_app, "upgrade")
def db_upgrade(cli: Cli) -> None:
    """Apply the migrations to the database (a server database needs this once per release)."""
    engine = _engine(cli)
    try:
        before = schema_revision(engine)
        if before != SCHEMA_REVISION:
            upgrade(engine)
        after = schema_revision(engine)
    finally:
        engine.dispose()
    document = {"database": describe(engine), "before": before, "after": after}
    cli.emit(
        document,
        lambda: out(
            f"{describe(engine)}: schema {before or '(none)'} -> {after}"
            if before != after
            else f"{describe(engine)}: schema already at {after}"
        ),
    )


@command(db_app, "status")
def db_status(cli: Cli) -> None:
    """The database's schema revision and the one this Clotho expects."""
    engine = _engine(cli)
    try:
        current = schema_revision(engine)
    finally:
        engine.dispose()
    document = {
        "database": describe(engine),
        "revision": current,
        "expected": SCHEMA_REVISION,
        "current": current == SCHEMA_REVISION,
    }
    cli.emit(
        document,
        lambda: out(
            f"{describe(engine)}: schema {current or '(none)'}, expected {SCHEMA_REVISION}"
        ),
    )
