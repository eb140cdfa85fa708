"""Migrations build the schema the models describe, and downgrade cleanly."""

from __future__ import annotations

import json

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


def test_evaluation_every_moves_from_the_configs_to_columns_and_back(database_url):
    """0011 takes `evaluation_every` out of every stored config into its row's column (0 where
    the config had none); the experiment's config then loads as a PPOConfig. Downgrading puts
    it back (always into experiments' resolved configs, where it was non-zero elsewhere)."""
    import sqlalchemy as sa

    from app.core.stored_config import load_config
    from trainer.config import PPOConfig

    engine = make_engine(database_url)
    resolved = PPOConfig(env_id="CartPole-v1").to_json_dict()
    now = "2026-12-07 06:00:00.000000"
    try:
        migrate(engine)
        downgrade(engine, "0010")
        with engine.begin() as conn:
            for i, every in ((1, 3), (2, 0)):
                conn.execute(
                    sa.text(
                        "INSERT INTO experiments (id, name, config, status, created_at, updated_at)"
                        " VALUES (:id, 'e', :config, 'pending', :now, :now)"
                    ),
                    {"id": i, "config": json.dumps({**resolved, "evaluation_every": every}),
                     "now": now},
                )  # fmt: skip
            conn.execute(
                sa.text(
                    "INSERT INTO sweeps (id, name, config, grid, seeds, max_parallel, created_at,"
                    " updated_at) VALUES (1, 's', :config, '{}', '[0]', 2, :now, :now)"
                ),
                {"config": json.dumps({"lr": 0.001, "evaluation_every": 5}), "now": now},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO sweeps (id, name, config, grid, seeds, max_parallel, created_at,"
                    " updated_at) VALUES (2, 't', :config, '{}', '[0]', 2, :now, :now)"
                ),
                {"config": json.dumps({"lr": 0.002}), "now": now},
            )
        migrate(engine)
        with engine.connect() as conn:
            experiments = conn.execute(
                sa.text("SELECT id, config, evaluation_every FROM experiments ORDER BY id")
            ).all()
            sweeps = conn.execute(
                sa.text("SELECT id, config, evaluation_every FROM sweeps ORDER BY id")
            ).all()
        configs = [_json(c) for _, c, _ in experiments]
        assert [e for _, _, e in experiments] == [3, 0]
        assert all("evaluation_every" not in c for c in configs)
        assert all(load_config(c) == PPOConfig(env_id="CartPole-v1") for c in configs)
        assert [(_json(c), e) for _, c, e in sweeps] == [({"lr": 0.001}, 5), ({"lr": 0.002}, 0)]
        downgrade(engine, "0010")
        with engine.connect() as conn:
            experiments = conn.execute(sa.text("SELECT config FROM experiments ORDER BY id")).all()
            sweeps = conn.execute(sa.text("SELECT config FROM sweeps ORDER BY id")).all()
        assert [_json(c)["evaluation_every"] for (c,) in experiments] == [3, 0]
        assert [_json(c) for (c,) in sweeps] == [
            {"lr": 0.001, "evaluation_every": 5},
            {"lr": 0.002},
        ]
        migrate(engine)
    finally:
        engine.dispose()


def _json(value: object) -> dict:
    """A JSON column as read by plain SQL (text on SQLite, already parsed on PostgreSQL)."""
    return json.loads(value) if isinstance(value, str) else value  # type: ignore[return-value]
