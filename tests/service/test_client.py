"""`RolloutClient` against the real app (ASGI test transport) on SQLite and PostgreSQL: typed
results, the error envelope as `APIError` (422 fields, 404, 409), waits, streamed downloads,
evaluations; and against a live `rollout serve` with an API token: the token travels in the
Authorization header only, HTTP and websocket."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.client import (
    APIError,
    MetricsMessage,
    RolloutClient,
    ServiceUnreachable,
    StatusMessage,
    WaitTimeout,
)
from app.core.db import make_engine, make_sessionmaker, transaction
from app.evaluations import service as evaluations
from app.experiments import service as experiments
from app.experiments.schemas import ExperimentDetail
from app.jobs.ray_head import free_ports
from app.studies import service as studies
from app.studies.schemas import StudyBest, StudyDetail
from tests.serve_process import rollout_serve
from tests.service.conftest import SMALL_CONFIG
from trainer.config import PPOConfig

pytestmark = pytest.mark.timeout(120)
JOB = "/api/v1/jobs"
TOKEN = "s3cret-token-for-tests"


@pytest.fixture
def rollout(client: TestClient) -> Iterator[RolloutClient]:
    with RolloutClient("http://testserver", http=client) as c:
        yield c


@pytest.fixture
def job(client: TestClient, job_token: Callable[[int], str]) -> Callable[..., httpx.Response]:
    """A call on the job side of one experiment, with its own job token."""

    def call(method: str, exp_id: int, path: str, **kwargs: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {job_token(exp_id)}"}
        response = client.request(
            method, f"{JOB}/experiments/{exp_id}{path}", headers=headers, **kwargs
        )
        assert response.is_success, response.text
        return response

    return call


def _checkpoint(job, exp_id: int, iteration: int, data: bytes, ret: float) -> None:
    params = {"iteration": iteration, "env_steps": iteration * 1000, "episode_return_mean": ret}
    job("PUT", exp_id, "/checkpoints", params=params, content=data)


def test_submit_get_list_typed(rollout: RolloutClient):
    exp = rollout.submit(SMALL_CONFIG, name="typed", tags=["b", "a"])
    assert isinstance(exp, ExperimentDetail)
    assert exp.status.value == "pending" and exp.tags == ["a", "b"]
    assert exp.config["train_batch_size_per_learner"] == 256
    assert [e.to_status.value for e in exp.events] == ["pending"]
    # A PPOConfig sends only the fields that were set: the env's preset fills the rest.
    from_model = rollout.submit(PPOConfig(env_id="Acrobot-v1", seed=3), name="model")
    assert from_model.config["seed"] == 3 and from_model.config["num_envs_per_env_runner"] == 16

    assert rollout.get(exp.id).name == "typed"
    page = rollout.list_experiments(tag="a")
    assert [e.id for e in page.items] == [exp.id] and page.next_cursor is None
    assert {e.id for e in rollout.list_experiments(status=["pending", "queued"]).items} == {
        exp.id,
        from_model.id,
    }
    assert [e.to_status.value for e in rollout.events(exp.id)] == ["pending"]


def test_iter_experiments_follows_cursors(rollout: RolloutClient):
    ids = [rollout.submit(SMALL_CONFIG, name=f"e{i}").id for i in range(5)]
    assert rollout.list_experiments(limit=2).next_cursor is not None
    assert [e.id for e in rollout.iter_experiments(limit=2)] == ids[::-1]


def test_invalid_config_is_an_api_error_naming_the_fields(rollout: RolloutClient):
    with pytest.raises(APIError) as info:
        rollout.submit({"env_id": "CartPole-v1", "lr": -1, "gamma": 2}, name="bad")
    err = info.value
    assert err.status == 422 and err.code == "invalid_input"
    assert {f.field for f in err.fields} == {"config.lr", "config.gamma"}
    assert err.field in ("config.lr", "config.gamma")
    assert "config.lr:" in err.describe() and str(err).startswith("error 422: ")
    assert rollout.list_experiments().items == []  # nothing stored

    with pytest.raises(APIError) as info:
        rollout.submit(SMALL_CONFIG, name="")
    assert info.value.status == 422 and info.value.field == "name"


def test_not_found_and_conflict(rollout: RolloutClient, tmp_path: Path):
    for call in (
        lambda: rollout.get(999),
        lambda: rollout.stop(999),
        lambda: rollout.checkpoints(999),
        lambda: rollout.evaluation(999),
    ):
        with pytest.raises(APIError) as info:
            call()
        assert info.value.status == 404 and info.value.code == "not_found"
        assert info.value.fields == [] and info.value.field is None

    exp = rollout.submit(SMALL_CONFIG, name="conflicts")
    with pytest.raises(APIError) as info:
        rollout.resume(exp.id)  # no checkpoint yet
    assert info.value.status == 409
    with pytest.raises(APIError) as info:
        rollout.delete(exp.id)  # not finished
    assert info.value.status == 409
    assert rollout.stop(exp.id).status.value == "stopped"
    with pytest.raises(APIError) as info:
        rollout.stop(exp.id)
    assert info.value.status == 409 and "already ended" in info.value.message
    out = tmp_path / "downloads"
    out.mkdir()
    with pytest.raises(APIError) as info:
        rollout.download_checkpoint(exp.id, "best", out / "x.tar.gz")
    assert info.value.status == 404
    assert list(out.iterdir()) == []  # no partial file left behind
    rollout.delete(exp.id)
    with pytest.raises(APIError):
        rollout.get(exp.id)


def test_fork_merges_overrides_and_rejects_bad_ones(rollout: RolloutClient):
    exp = rollout.submit(SMALL_CONFIG, name="base", tags=["t"])
    fork = rollout.fork(exp.id, {"lr": 1e-3, "stop": {"env_steps": 5000}}, name="forked")
    assert fork.parent_id == exp.id and fork.name == "forked" and fork.tags == ["t"]
    assert fork.config["lr"] == 1e-3 and fork.config["stop"]["env_steps"] == 5000
    assert fork.config["train_batch_size_per_learner"] == 256
    with pytest.raises(APIError) as info:
        rollout.fork(exp.id, {"num_epochs": 0})
    assert info.value.status == 422 and info.value.field == "config.num_epochs"


def test_metrics_checkpoints_downloads_and_wait(
    rollout: RolloutClient, job, transition, tmp_path: Path
):
    exp = rollout.submit(SMALL_CONFIG, name="trained")
    transition(exp.id, "queued", "running")
    rows = [
        {"step": s, "time_s": s / 1000, "values": {"episode_return_mean": s / 100}}
        for s in (1000, 2000, 3000)
    ]
    job("POST", exp.id, "/metrics", json={"rows": rows})
    _checkpoint(job, exp.id, 1, b"best-archive", 30.0)
    _checkpoint(job, exp.id, 2, b"latest-archive", 10.0)

    series = rollout.metrics(exp.id, ["episode_return_mean"]).series["episode_return_mean"]
    assert series.step == [1000, 2000, 3000] and series.value == [10.0, 20.0, 30.0]
    assert set(rollout.metric_names(exp.id)) >= {"episode_return_mean", "time_s"}
    checkpoints = rollout.checkpoints(exp.id)
    assert [(c.iteration, c.is_best, c.is_latest) for c in checkpoints] == [
        (1, True, False),
        (2, False, True),
    ]

    best = rollout.download_checkpoint(exp.id, "best", tmp_path / "best.tar.gz")
    assert best == tmp_path / "best.tar.gz" and best.read_bytes() == b"best-archive"
    # Into a directory: under the service's file name.
    latest = rollout.download_checkpoint(exp.id, "latest", tmp_path)
    assert latest.name == f"experiment-{exp.id}-iteration-2.tar.gz"
    assert latest.read_bytes() == b"latest-archive"
    by_id = rollout.download_checkpoint(exp.id, checkpoints[0].id, tmp_path / "one.tar.gz")
    assert by_id.read_bytes() == b"best-archive"
    assert not list(tmp_path.glob("*.part"))

    with pytest.raises(WaitTimeout) as info:
        rollout.wait(exp.id, timeout=0.3, poll_s=0.05)
    assert info.value.last.status.value == "running"

    def finish() -> None:
        time.sleep(0.5)
        job("POST", exp.id, "/status", json={"status": "succeeded", "reason": "done"})

    threading.Thread(target=finish).start()
    done = rollout.wait(exp.id, timeout=30, poll_s=0.1)
    assert done.status.value == "succeeded" and done.best_return == 30.0
    assert rollout.resume(exp.id).resume_from_checkpoint_id == checkpoints[1].id


def test_evaluate_and_wait_for_the_evaluation(
    rollout: RolloutClient, app: FastAPI, client: TestClient, job
):
    exp = rollout.submit(SMALL_CONFIG, name="evaluated")
    with pytest.raises(APIError) as info:
        rollout.evaluate(exp.id)  # no checkpoint yet
    assert info.value.status == 409
    _checkpoint(job, exp.id, 1, b"archive", 42.0)
    with pytest.raises(APIError) as info:
        rollout.evaluate(exp.id, episodes=0)
    assert info.value.status == 422 and info.value.field == "episodes"

    created = rollout.evaluate(exp.id, "best", episodes=2, seed=7, record_video=False)
    assert created.status.value == "pending" and created.seed == 7 and created.episodes == 2
    assert [e.id for e in rollout.evaluations(exp.id)] == [created.id]
    with pytest.raises(WaitTimeout):
        rollout.wait_evaluation(created.id, timeout=0.2, poll_s=0.05)

    with transaction(app.state.sessionmaker) as session:
        token = evaluations.issue_job_token(session, created.id)
        evaluations.transition(session, created.id, "running", "test: submitted")
    auth = {"Authorization": f"Bearer {token}"}
    base = f"{JOB}/evaluations/{created.id}"

    def run_job() -> None:
        time.sleep(0.3)
        episodes = [
            {"index": 0, "episode_return": 10.0, "length": 10},
            {"index": 1, "episode_return": 20.0, "length": 20},
        ]
        client.post(f"{base}/episodes", json={"episodes": episodes}, headers=auth)
        client.post(f"{base}/status", json={"status": "succeeded"}, headers=auth)

    threading.Thread(target=run_job).start()
    done = rollout.wait_evaluation(created.id, timeout=30, poll_s=0.1)
    assert done.status.value == "succeeded"
    assert done.returns == [10.0, 20.0] and done.return_mean == 15.0 and done.return_std == 5.0
    with pytest.raises(APIError) as info:
        rollout.download_video(created.id)
    assert info.value.status == 404
    rollout.delete_evaluation(created.id)
    assert rollout.evaluations(exp.id) == []


def test_presets_resolve_and_references(rollout: RolloutClient):
    names = {p.name for p in rollout.presets().items}
    assert {"classic_control", "classic_control_continuous"} <= names
    resolved = rollout.resolve_config({"env_id": "Acrobot-v1"})
    assert resolved.preset == "classic_control" and resolved.config["num_epochs"] == 4
    with pytest.raises(APIError) as info:
        rollout.resolve_config({"env_id": "CartPole-v1", "gamma": 5})
    assert info.value.status == 422 and info.value.field == "config.gamma"
    assert rollout.references("NoSuchEnv-v0") == []
    (cartpole,) = rollout.references("CartPole-v1")
    assert cartpole.env_id == "CartPole-v1" and len(cartpole.env_steps.x) > 0


def test_sweeps_typed(rollout: RolloutClient, job) -> None:
    body = {"name": "s", "config": SMALL_CONFIG, "grid": {"lr": [1e-3, 3e-4]}, "seeds": [0, 1]}
    sweep = rollout.submit_sweep(body)
    assert sweep.size == 4 and [g.label for g in sweep.groups] == ["lr=0.001", "lr=0.0003"]
    assert all(m.sweep_id == sweep.id for m in sweep.members)
    assert [s.id for s in rollout.sweeps().items] == [sweep.id]
    first = sweep.members[0].id
    job("POST", first, "/status", json={"status": "running"})
    rows = [{"step": 100, "time_s": 1.0, "values": {"episode_return_mean": 12.5}}]
    job("POST", first, "/metrics", json={"rows": rows})
    groups = rollout.sweep_metrics(sweep.id, points=10).metrics["episode_return_mean"].groups
    assert groups[0].final.mean == 12.5 and groups[1].final.n == 0
    with pytest.raises(APIError) as info:
        rollout.submit_sweep({**body, "grid": {"seed": [1]}})
    assert info.value.status == 422 and info.value.field == "grid.seed"
    stopped = rollout.stop_sweep(sweep.id)
    assert stopped.counts == {"stopping": 1, "stopped": 3}
    with pytest.raises(APIError) as info:
        rollout.delete_sweep(sweep.id)  # a member is still stopping
    assert info.value.status == 409
    assert rollout.sweep(sweep.id).status == "stopping"


def test_studies_typed(rollout: RolloutClient, app: FastAPI, job) -> None:
    body = {
        "name": "st",
        "config": SMALL_CONFIG,
        "space": {"lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True}},
        "n_trials": 3,
        "max_parallel": 1,
    }
    study = rollout.create_study(body)
    assert isinstance(study, StudyDetail)
    assert study.status == "running" and study.trials == [] and study.interval_env_steps == 1000
    assert [s.id for s in rollout.studies().items] == [study.id]
    with pytest.raises(APIError) as info:
        rollout.best_trial(study.id)  # no complete trial yet
    assert info.value.status == 404 and "no complete trial" in info.value.message
    with transaction(app.state.sessionmaker) as session:
        studies.advance(session, study.id)
    (trial,) = rollout.study(study.id).trials
    assert trial.state == "running" and 1e-4 <= trial.params["lr"] <= 1e-2
    run = trial.experiment_id
    assert run is not None
    job("POST", run, "/status", json={"status": "running"})
    rows = [{"step": 5000, "time_s": 1.0, "values": {"episode_return_mean": 42.0}}]
    job("POST", run, "/metrics", json={"rows": rows})
    job("POST", run, "/status", json={"status": "succeeded"})
    with transaction(app.state.sessionmaker) as session:
        studies.advance(session, study.id)
    best = rollout.best_trial(study.id)
    assert isinstance(best, StudyBest)
    assert best.trial.number == 0 and best.trial.value == 42.0
    assert best.config["lr"] == pytest.approx(trial.params["lr"])
    with pytest.raises(APIError) as info:
        rollout.create_study({**body, "space": {"lr": {"type": "float", "low": 1, "high": 0}}})
    assert info.value.status == 422 and info.value.field == "space.lr.low"
    with pytest.raises(APIError) as info:
        rollout.delete_study(study.id)  # trial 1 is waiting
    assert info.value.status == 409
    stopped = rollout.stop_study(study.id)
    assert stopped.status == "stopping" and stopped.counts == {"complete": 1, "running": 1}
    with transaction(app.state.sessionmaker) as session:
        studies.advance(session, study.id)
    rollout.delete_study(study.id)
    with pytest.raises(APIError) as info:
        rollout.study(study.id)
    assert info.value.status == 404


def test_unreachable_service_is_service_unreachable():
    url = f"http://127.0.0.1:{free_ports(1)[0]}"
    with RolloutClient(url, timeout=2) as rollout:
        with pytest.raises(ServiceUnreachable, match="cannot reach the Rollout service"):
            rollout.list_experiments()
        with pytest.raises(ServiceUnreachable):
            next(iter(rollout.stream(1)))


# --- a live service with an API token --------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    data_dir = tmp_path_factory.mktemp("client-serve")
    env = {
        "ROLLOUT_JOBS_ENABLED": "false",
        "ROLLOUT_FRONTEND_DIR": str(data_dir / "no-frontend"),
        "ROLLOUT_API_TOKEN": TOKEN,
        "ROLLOUT_DATABASE_URL": None,
    }
    with rollout_serve(data_dir, env=env, stop_timeout_s=20) as server:
        yield server.url, data_dir


def _job_token(data_dir: Path, experiment_id: int) -> str:
    engine = make_engine(f"sqlite:///{data_dir / 'rollout.db'}")
    try:
        with transaction(make_sessionmaker(engine)) as session:
            return experiments.issue_job_token(session, experiment_id)
    finally:
        engine.dispose()


def test_token_goes_in_the_header_only(served: tuple[str, Path]):
    url, _ = served
    seen: list[httpx.Request] = []
    http = httpx.Client(base_url=url, event_hooks={"request": [seen.append]})
    with RolloutClient(url, TOKEN, http=http) as rollout:
        exp = rollout.submit(SMALL_CONFIG, name="authorised")
        assert rollout.get(exp.id).id == exp.id
        # The websocket too: the backlog ends with the current status.
        first_status = next(m for m in rollout.stream(exp.id) if isinstance(m, StatusMessage))
        assert first_status.status.value == "pending" and first_status.experiment is not None
    http.close()
    assert seen and all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in seen)
    assert all(TOKEN not in str(r.url) for r in seen)

    with RolloutClient(url) as anonymous:
        with pytest.raises(APIError) as info:
            anonymous.get(exp.id)
        assert info.value.status == 401 and info.value.code == "unauthorized"
        with pytest.raises(APIError) as info:
            next(iter(anonymous.stream(exp.id)))
        assert info.value.code == "stream_refused"
    with RolloutClient(url, "wrong") as wrong, pytest.raises(APIError) as info:
        wrong.list_experiments()
    assert info.value.status == 401


def test_stream_yields_backlog_then_live_messages(served: tuple[str, Path]):
    url, data_dir = served
    with RolloutClient(url, TOKEN) as rollout:
        exp = rollout.submit(SMALL_CONFIG, name="streamed")
        job = httpx.Client(
            base_url=f"{url}{JOB}/experiments/{exp.id}",
            headers={"Authorization": f"Bearer {_job_token(data_dir, exp.id)}"},
        )
        job.post("/status", json={"status": "running"}).raise_for_status()
        rows = [{"step": 100, "time_s": 0.5, "values": {"episode_return_mean": 9.5}}]
        job.post("/metrics", json={"rows": rows}).raise_for_status()

        messages = rollout.stream(exp.id, since_step=-1)
        backlog = next(messages)
        assert isinstance(backlog, MetricsMessage) and backlog.step == [100]
        assert backlog.last("episode_return_mean") == 9.5 and backlog.last("nothing") is None
        status = next(messages)
        assert isinstance(status, StatusMessage) and status.status.value == "running"
        job.post("/status", json={"status": "succeeded", "reason": "done"}).raise_for_status()
        live = next(m for m in messages if isinstance(m, StatusMessage))
        assert live.status.value == "succeeded" and live.reason == "done"
        messages.close()
        job.close()
        with pytest.raises(APIError) as info:
            next(iter(rollout.stream(10_000)))  # no such experiment: refused
        assert info.value.code == "stream_refused"
