"""Migrations build the schema the models describe, and downgrade cleanly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.core.db import downgrade, make_engine, migrate
from app.models import all_models


def _diff(engine) -> list:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return compare_metadata(context, all_models())


def test_migrations_match_models_and_downgrade(database_url):
    engine = make_engine(database_url)
    try:
        migrate(engine)
        assert _diff(engine) == []
        tables = set(inspect(engine).get_table_names())
        assert {"experiments", "metric_points", "checkpoints", "experiment_events"} <= tables
        downgrade(engine, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        migrate(engine)
        assert _diff(engine) == []
    finally:
        engine.dispose()


def test_drift_is_detected(database_url):
    """The comparison fails when a model gains a column no migration creates."""
    from sqlalchemy import Column, Integer, MetaData, Table

    engine = make_engine(database_url)
    try:
        migrate(engine)
        metadata = MetaData()
        for table in all_models().sorted_tables:
            table.to_metadata(metadata)
        Table("experiments", metadata, Column("unmigrated", Integer), extend_existing=True)
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            diff = compare_metadata(context, metadata)
        assert any(d[0] == "add_column" and d[3].name == "unmigrated" for d in diff)
    finally:
        engine.dispose()
