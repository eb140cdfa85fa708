"""Alembic environment: the service passes its own connection; the CLI builds one from the URL.

The URL comes from the config (set by app.core.db.alembic_config) or, for the `alembic` command
line, from ROLLOUT_DATABASE_URL / the default settings.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from app.models import all_models

config = context.config
target_metadata = all_models()


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    from app.core.config import Settings

    return Settings().resolved_database_url


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(_url())
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
