"""``clotho db``: the database's schema."""

from __future__ import annotations

from mnemosyne import schema_status, upgrade_schema

from ._app import Cli, command, db_app
from .style import out


@command(db_app, "upgrade")
def db_upgrade(cli: Cli) -> None:
    """Apply the migrations to the database (a server database needs this once per release)."""
    before, after = upgrade_schema(cli.settings.resolved_database_url)
    document = {"database": after.database, "before": before.revision, "after": after.revision}
    cli.emit(
        document,
        lambda: out(
            f"{after.database}: schema {before.revision or '(none)'} -> {after.revision}"
            if before.revision != after.revision
            else f"{after.database}: schema already at {after.revision}"
        ),
    )


@command(db_app, "status")
def db_status(cli: Cli) -> None:
    """The database's schema revision and the one this Clotho expects."""
    status = schema_status(cli.settings.resolved_database_url)
    document = {
        "database": status.database,
        "revision": status.revision,
        "expected": status.expected,
        "current": status.current,
    }
    cli.emit(
        document,
        lambda: out(
            f"{status.database}: schema {status.revision or '(none)'}, expected {status.expected}"
        ),
    )
