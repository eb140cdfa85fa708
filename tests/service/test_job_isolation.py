"""A real job on the shared local Ray cluster holds only its own job token: none of the
service's secrets are in the environment of its driver or its EnvRunner actors (where user env
modules run), and Ray's job listing, which its dashboard shows to anyone, holds no job token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from app.core.auth import hash_token
from app.core.db import make_engine, make_sessionmaker
from app.experiments.models import Experiment
from app.jobs.ray_head import LocalRayHead, cluster_environ
from tests.conftest import SERVICE_SECRETS
from tests.service import env_spy
from tests.service.test_e2e_jobs import LiveService, make_settings, wait_for

pytestmark = pytest.mark.ray

API_TOKEN = SERVICE_SECRETS["ROLLOUT_API_TOKEN"]
DB_PASSWORD = "db-password-never-in-jobs"


@pytest.fixture
def secured_service(
    ray_head: LocalRayHead, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LiveService]:
    """`rollout serve` with ROLLOUT_API_TOKEN (and a database URL) in its environment."""
    for key, value in SERVICE_SECRETS.items():
        monkeypatch.setenv(key, value)
    settings = make_settings(tmp_path / "data", ray_head.address).model_copy(
        update={"api_token": SecretStr(API_TOKEN)}
    )
    live = LiveService(settings)
    live.http.headers["Authorization"] = f"Bearer {API_TOKEN}"
    live.start()
    try:
        yield live
    finally:
        live.stop()


def as_json(details: Any) -> Any:
    """Ray's JobDetails as the JSON its dashboard serves."""
    dump = getattr(details, "model_dump", None) or details.dict
    return json.loads(json.dumps(dump(), default=str))


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON-like value, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings(item)


def job_token_hash(live: LiveService, exp_id: int) -> str | None:
    engine = make_engine(live.settings.resolved_database_url)
    try:
        with make_sessionmaker(engine)() as session:
            return session.get(Experiment, exp_id).job_token_hash
    finally:
        engine.dispose()


def spy_config(dump_dir: Path, num_env_runners: int) -> dict[str, Any]:
    dump_dir.mkdir()
    return {
        "env_id": f"tests.service.env_spy:{env_spy.ENV_ID}",
        "env_config": {"dump_dir": str(dump_dir)},
        "num_env_runners": num_env_runners,
        "num_envs_per_env_runner": 2,
        "train_batch_size_per_learner": 256,
        "minibatch_size": 128,
        "num_epochs": 1,
        "stop": {"env_steps": 50_000_000},
        "checkpoint_every": 0,
    }


def test_a_job_holds_no_service_secret_and_ray_lists_no_job_token(
    secured_service: LiveService, ray_head: LocalRayHead, tmp_path: Path
) -> None:
    # Imported late: Ray reads RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER (set by the ray_head fixture)
    # when it is first imported.
    from ray.job_submission import JobSubmissionClient

    live = secured_service
    # Serial mode builds the env in the job driver; one EnvRunner builds it in a Ray worker.
    dirs = {"driver": tmp_path / "driver", "worker": tmp_path / "worker"}
    ids = {
        "driver": live.submit(spy_config(dirs["driver"], 0), name="spy in the driver"),
        "worker": live.submit(spy_config(dirs["worker"], 1), name="spy in a worker"),
    }
    hashes: dict[str, str | None] = {}
    infos: dict[str, Any] = {}
    try:
        client = JobSubmissionClient(ray_head.dashboard_url)
        for kind, exp_id in ids.items():
            wait_for(lambda e=exp_id: live.metric_steps(e), 120, f"metrics of {kind}")
            hashes[kind] = job_token_hash(live, exp_id)
            ray_job_id = live.experiment(exp_id)["ray_job_id"]
            listed = [as_json(i) for i in client.list_jobs() if i.submission_id == ray_job_id]
            infos[kind] = {"listed": listed, "info": as_json(client.get_job_info(ray_job_id))}
    finally:
        for exp_id in ids.values():
            live.http.post(f"/experiments/{exp_id}/stop")
        for exp_id in ids.values():
            live.wait_status(exp_id, {"stopped", "failed", "succeeded"}, 120)

    for kind, exp_id in ids.items():
        token_hash = hashes[kind]
        assert token_hash, f"the {kind} job redeemed its claim for a token"
        # Ray's job listing: the runtime_env is there, the job token and service secrets not.
        env_vars = infos[kind]["info"]["runtime_env"]["env_vars"]
        assert infos[kind]["listed"] and env_vars["ROLLOUT_EXPERIMENT_ID"] == str(exp_id)
        for value in strings(infos[kind]):
            assert hash_token(value) != token_hash
            assert API_TOKEN not in value and DB_PASSWORD not in value
        assert "ROLLOUT_JOB_TOKEN" not in env_vars
        spent = httpx.post(
            f"{live.url}/api/v1/jobs/experiments/{exp_id}/token",
            headers={"Authorization": f"Bearer {env_vars['ROLLOUT_JOB_CLAIM']}"},
        )
        assert spent.status_code == 403, "a claim read from Ray's listing is already spent"

        # What user code sees in the process that built its env.
        records = [json.loads(p.read_text()) for p in dirs[kind].glob("env-*.json")]
        argv = [" ".join(r["argv"]) for r in records]
        where = "trainer/job.py" if kind == "driver" else "default_worker.py"
        assert any(where in a for a in argv), argv
        for record in records:
            environ: dict[str, str] = record["environ"]
            assert not set(SERVICE_SECRETS) & set(environ), sorted(environ)
            assert "ROLLOUT_JOB_TOKEN" not in environ
            for value in environ.values():
                assert API_TOKEN not in value and DB_PASSWORD not in value
                assert hash_token(value) != token_hash


def test_the_cluster_environment_drops_the_service_settings() -> None:
    environ = {
        "PATH": "/usr/bin",
        "RAY_AUTH_MODE": "disabled",
        "ROLLOUT_API_TOKEN": "x",
        "ROLLOUT_DATABASE_URL": "postgresql://u:p@h/d",
        "ROLLOUT_DATA_DIR": "/data",
        "PGPASSWORD": "p",
    }
    assert cluster_environ(environ) == {"PATH": "/usr/bin", "RAY_AUTH_MODE": "disabled"}
