"""Alembic environment: migrations run on the connection mnemosyne hands over.

``mnemosyne._engine.upgrade`` opens the transaction (and the lock) and passes the
connection in ``config.attributes["connection"]``; a URL in the config is the
fallback for running ``alembic`` by hand during development.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from mnemosyne._schema import metadata

config = context.config
target_metadata = metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.begin() as conn:
            _migrate(conn)
        return
    _migrate(connection)


def _migrate(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run()
