"""An experiment's config at rest is a PPOConfig (app/core/stored_config.py): validated once at
the boundary, stored only typed, loaded typed; a row that no longer validates is still listed
and shown, refused as a job, and cannot be forked unchanged. `evaluation_every` is the run's
setting beside its config (and a sweep's or study's for its runs), not a config field."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.core.db import transaction
from app.core.stored_config import StaleConfig
from app.experiments.models import Experiment
from tests.service.conftest import SMALL_CONFIG, store_raw_config
from trainer.config import PPOConfig

API = "/api/v1"


def _fields(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {f["field"]: f["message"] for f in response.json()["error"]["fields"]}


def test_a_stored_config_loads_as_the_ppoconfig_that_was_validated(
    app: FastAPI, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    created = create_experiment(config={"env_id": "CartPole-v1", "lr": 1e-3})
    with app.state.sessionmaker() as session:
        exp = session.get(Experiment, created["id"])
        assert exp is not None
        assert isinstance(exp.config, PPOConfig) and exp.config.lr == 1e-3
        assert exp.config.to_json_dict() == created["config"]


def test_the_column_refuses_anything_but_a_validated_config(
    app: FastAPI, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    created = create_experiment()
    with app.state.sessionmaker() as session:
        exp = session.get(Experiment, created["id"])
        assert exp is not None
        exp.config = {"lr": -1}  # type: ignore[assignment]
        with pytest.raises(Exception, match="stores a validated PPOConfig, not dict"):
            session.flush()
        session.rollback()
    with app.state.sessionmaker() as session:
        stored = session.scalar(select(Experiment).where(Experiment.id == created["id"]))
        assert stored is not None and stored.config.to_json_dict() == created["config"]


def test_a_config_that_no_longer_validates_is_listed_shown_refused_as_a_job_and_not_forked(
    app: FastAPI,
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
    transition: Callable[..., None],
) -> None:
    stale_one, fine = create_experiment(name="stale"), create_experiment(name="fine")
    transition(stale_one["id"], "queued", "running")
    token = job_token(stale_one["id"])
    stale = {**stale_one["config"], "lr": -1.0, "retired_field": 3}
    store_raw_config(app.state.sessionmaker, stale_one["id"], stale)
    with app.state.sessionmaker() as session:
        exp = session.get(Experiment, stale_one["id"])
        assert exp is not None and isinstance(exp.config, StaleConfig)
        assert {e["field"] for e in exp.config.errors} == {"config.lr", "config.retired_field"}
        assert "config.lr" in exp.config.reason and "-1" not in exp.config.reason
    listed = {e["name"]: e for e in client.get(f"{API}/experiments").json()["items"]}
    assert set(listed) == {"stale", "fine"} and listed["stale"]["config"] == stale
    page = client.get(f"{API}/experiments/{stale_one['id']}")
    assert page.status_code == 200 and page.json()["config"] == stale
    spec = client.get(
        f"{API}/jobs/experiments/{stale_one['id']}", headers={"Authorization": f"Bearer {token}"}
    )
    assert spec.status_code == 409, spec.text
    error = spec.json()["error"]
    assert "no longer validates" in error["message"]
    assert {f["field"] for f in error["fields"]} == {"config.lr", "config.retired_field"}
    fields = _fields(client.post(f"{API}/experiments/{stale_one['id']}/fork", json={}))
    assert set(fields) == {"config.lr", "config.retired_field"}
    fixed = client.post(
        f"{API}/experiments/{stale_one['id']}/fork",
        json={"overrides": {"lr": 1e-3}},
    )
    assert fixed.status_code == 422  # the retired field is still there: named, nothing stored
    assert len(client.get(f"{API}/experiments").json()["items"]) == 2
    assert client.get(f"{API}/experiments/{fine['id']}").json()["config"] == fine["config"]


# --- evaluation_every: the run's setting --------------------------------------------------------


def test_evaluation_every_is_given_beside_the_config_and_kept_by_fork_and_resume(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    created = create_experiment(evaluation_every=3)
    assert created["evaluation_every"] == 3 and "evaluation_every" not in created["config"]
    assert create_experiment()["evaluation_every"] == 0
    kept = client.post(f"{API}/experiments/{created['id']}/fork", json={}).json()
    assert kept["evaluation_every"] == 3 and kept["parent_id"] == created["id"]
    changed = client.post(
        f"{API}/experiments/{created['id']}/fork", json={"evaluation_every": 0}
    ).json()
    assert changed["evaluation_every"] == 0


def test_evaluation_every_in_a_config_is_refused_saying_where_it_belongs(
    client: TestClient,
) -> None:
    body = {"name": "old file", "config": {**SMALL_CONFIG, "evaluation_every": 2}}
    fields = _fields(client.post(f"{API}/experiments", json=body))
    assert list(fields) == ["config.evaluation_every"]
    assert "a setting of the experiment" in fields["config.evaluation_every"]
    assert "beside `config`" in fields["config.evaluation_every"]
    bad = _fields(client.post(f"{API}/experiments", json={"name": "x", "evaluation_every": -1}))
    assert list(bad) == ["evaluation_every"]
    assert client.get(f"{API}/experiments").json()["items"] == []


def test_a_sweep_and_a_study_give_their_runs_their_evaluation_every(
    app: FastAPI, client: TestClient
) -> None:
    sweep = client.post(
        f"{API}/sweeps",
        json={"name": "s", "config": SMALL_CONFIG, "seeds": [0, 1], "evaluation_every": 4},
    )
    assert sweep.status_code == 201, sweep.text
    assert sweep.json()["evaluation_every"] == 4
    assert [m["evaluation_every"] for m in sweep.json()["members"]] == [4, 4]
    space = {"lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}}
    config = {**SMALL_CONFIG, "stop": {"env_steps": 10_000}}
    study = client.post(
        f"{API}/studies",
        json={"name": "t", "config": config, "space": space, "n_trials": 2, "evaluation_every": 5},
    )
    assert study.status_code == 201, study.text
    from app.studies import service as studies

    with transaction(app.state.sessionmaker) as session:
        studies.advance(session, study.json()["id"])
    trials = client.get(f"{API}/studies/{study.json()['id']}").json()["trials"]
    runs = [client.get(f"{API}/experiments/{t['experiment_id']}").json() for t in trials]
    assert len(runs) == 2 and [r["evaluation_every"] for r in runs] == [5, 5]
    refused = client.post(
        f"{API}/sweeps", json={"name": "s", "config": {**SMALL_CONFIG, "evaluation_every": 1}}
    )
    assert list(_fields(refused)) == ["config.evaluation_every"]
