"""Service test fixtures: an app per test on a real, migrated database (SQLite or PostgreSQL).

API tests take the `client` fixture and run on both backends. SQLite gets a fresh file per
test, a copy of one migrated per test session (migrating a new file takes ~0.5 s, copying it
~1 ms; tests/service/test_migrations.py runs every migration from an empty database);
PostgreSQL one fresh database per test session, emptied after each test.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import JSON, Integer, column, create_engine, inspect, table, text, update

from app.core.config import Settings
from app.core.db import (
    SessionMaker,
    make_engine,
    make_sessionmaker,
    migrate,
    transaction,
)
from app.experiments import service as experiments
from app.main import create_app
from app.models import all_models
from tests.service.postgres import fresh_database, postgres_available

SMALL_CONFIG: dict[str, Any] = {
    "env_id": "CartPole-v1",
    "train_batch_size_per_learner": 256,
    "minibatch_size": 64,
    "num_epochs": 2,
    "stop": {"env_steps": 10_000},
    "keep_checkpoints": 2,
}


@pytest.fixture(autouse=True)
def _testclient_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starlette's TestClient sends `Host: testserver`; every app built here answers to it
    (tests of the Host check pass `allowed_hosts` themselves)."""
    monkeypatch.setenv("ROLLOUT_ALLOWED_HOSTS", "testserver")


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    if not postgres_available():
        pytest.skip("no PostgreSQL on 127.0.0.1:5432 and no initdb/pg_ctl to start one")
    with fresh_database() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_database: str) -> Iterator[str]:
    """The session's PostgreSQL database, emptied after the test."""
    try:
        yield postgres_database
    finally:
        _empty_postgres(postgres_database)


def _empty_postgres(url: str) -> None:
    engine = create_engine(url)
    existing = set(inspect(engine).get_table_names())
    tables = ", ".join(t.name for t in all_models().sorted_tables if t.name in existing)
    if tables:
        with engine.begin() as conn:
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head, once per test session."""
    path = tmp_path_factory.mktemp("sqlite-template") / "rollout.db"
    engine = make_engine(f"sqlite:///{path}")
    migrate(engine)
    engine.dispose()
    assert not path.with_name(path.name + "-wal").exists(), "the template's WAL was not merged"
    return path


@pytest.fixture
def database_url(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    if backend == "sqlite":
        path = tmp_path / "rollout.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    yield request.getfixturevalue("postgres_url")


@pytest.fixture
def sessionmaker(database_url: str) -> Iterator[SessionMaker]:
    """Sessions on a migrated `database_url` (both backends), without an app."""
    engine = make_engine(database_url)
    migrate(engine)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def make_settings(database_url: str, tmp_path: Path) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "database_url": database_url,
            "jobs_enabled": False,
            "frontend_dir": tmp_path / "no-frontend",
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    return create_app(settings)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def create_experiment(client: TestClient) -> Callable[..., dict[str, Any]]:
    def create(
        name: str = "exp", config: dict[str, Any] | None = None, tags=(), **fields: Any
    ) -> dict[str, Any]:
        body = {"name": name, "config": config or SMALL_CONFIG, "tags": list(tags), **fields}
        response = client.post("/api/v1/experiments", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    return create


@pytest.fixture
def job_token(app: FastAPI) -> Callable[[int], str]:
    """Issue a job token the way the launcher does."""

    def issue(experiment_id: int) -> str:
        with transaction(app.state.sessionmaker) as session:
            return experiments.issue_job_token(session, experiment_id)

    return issue


@pytest.fixture
def transition(app: FastAPI) -> Callable[..., None]:
    """Drive the lifecycle the way the jobs runtime does."""

    def move(experiment_id: int, *targets: str) -> None:
        for target in targets:
            with transaction(app.state.sessionmaker) as session:
                experiments.transition(session, experiment_id, target, f"test: {target}")

    return move


@pytest.fixture
def reaper() -> Iterator[Any]:
    """Processes a fault test caused; any still alive at the end are killed by pid."""
    from tests.service.faults import ProcessReaper

    reaped = ProcessReaper()
    try:
        yield reaped
    finally:
        reaped.reap()


def store_raw_config(sessionmaker: SessionMaker, experiment_id: int, config: Any) -> None:
    """Write an experiment's config as plain JSON, past the column type that stores only
    validated configs: what an older version with looser rules, or a hand edit, left behind."""
    raw = table("experiments", column("id", Integer), column("config", JSON))
    with transaction(sessionmaker) as session:
        session.execute(update(raw).where(raw.c.id == experiment_id).values(config=config))
