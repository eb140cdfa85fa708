"""Fault: the API is unreachable for longer than the reporter's patience at the end of a run.

The real job code (trainer.job's ExperimentRun, serial CartPole) reports to the real app; its
connection to the API drops right after the first metrics batch arrives and comes back only
once the reporter has given up waiting (patience 0.5 s through ROLLOUT_REPORTER_PATIENCE_S).
The job then reports its final status saying what it could not deliver, and the API recovers
the missing rows from the job dir's JSONL copy before it ends the run and revokes the token:
every point the job produced is stored exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.layout import experiment_job_dir
from tests.service.faults import assert_stored_exactly, jsonl_rows
from trainer.job import ExperimentRun, JobEnv, StopFlag
from trainer.reporter import Backoff, Reporter
from trainer.wire import FINAL_STATUS_FILE, FinalStatusRecord

BATCH = 64
CONFIG = {
    "env_id": "CartPole-v1",
    "num_envs_per_env_runner": 2,
    "train_batch_size_per_learner": BATCH,
    "minibatch_size": BATCH,
    "num_epochs": 1,
    "stop": {"env_steps": 8 * BATCH},
    "checkpoint_every": 4,
}


class Outage(httpx.BaseTransport):
    """The app's transport; every request fails to connect while `down`. The API goes down
    once the first metrics batch is stored."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.down = False
        self.refused = 0
        self.delivered_rows = 0  # in the batch that got through: as many as were ready

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            self.refused += 1
            raise httpx.ConnectError("the API is down", request=request)
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/metrics") and response.status_code == 200:
            self.delivered_rows = len(json.loads(request.content)["rows"])
            self.down = True
        return response


def outage_reporter(env: JobEnv, outage: Outage) -> Reporter:
    """The job's reporter, talking to the app through `outage`, retrying fast."""
    return Reporter(
        env.api_url,
        env.token,
        env.experiment_id,
        env.job_dir,
        backoff=Backoff(initial_s=0.01, max_s=0.05),
        transport=outage,
    )


def test_an_outage_longer_than_the_reporters_patience_loses_no_point(
    app: FastAPI,
    client: TestClient,
    settings: Settings,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ROLLOUT_REPORTER_PATIENCE_S", "0.5")
    exp_id = create_experiment(name="outage", config=CONFIG)["id"]
    env = JobEnv(
        "http://testserver",
        job_token(exp_id),
        str(exp_id),
        experiment_job_dir(settings.data_dir, exp_id),
    )
    outage = Outage(client._transport)
    reporter = outage_reporter(env, outage)
    give_up = reporter.close

    def close_then_come_back(timeout_s: float = 60.0) -> bool:
        delivered = give_up(timeout_s)
        outage.down = False  # the API is back just as the job reports its final status
        return delivered

    reporter.close = close_then_come_back  # type: ignore[method-assign]
    try:
        assert ExperimentRun(env, reporter, StopFlag()).run() == 0
    finally:
        reporter.shutdown()
    assert outage.refused > 0

    api = httpx.Client(base_url="http://testserver/api/v1", transport=client._transport)
    exp = api.get(f"/experiments/{exp_id}").json()
    assert exp["status"] == "succeeded", exp
    jsonl = env.job_dir / "metrics.jsonl"
    rows = jsonl_rows(jsonl)
    assert len(rows) == 8  # every iteration samples at least BATCH steps
    # The status says what did not arrive: every row after the first batch, both checkpoints.
    missed = len(rows) - outage.delivered_rows  # the first batch may hold more than one row
    assert 0 < missed < len(rows)
    reason = exp["events"][-1]["reason"]
    assert "stop criterion met: env_steps" in reason
    assert f"not delivered to the API: {missed} metric rows" in reason
    assert "the checkpoints of iterations 4, 8" in reason and str(env.job_dir) in reason
    # ...and the API recovered the rows from the job dir before it ended the run.
    assert assert_stored_exactly(api, exp_id, jsonl) == len(rows)
    lines = api.get(f"/experiments/{exp_id}/logs").json()["lines"]
    assert any(f"recovered {missed} metric rows" in line for line in lines)


def test_a_run_that_ends_during_a_long_outage_ends_with_the_status_it_earned(
    app: FastAPI,
    client: TestClient,
    settings: Settings,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API goes down after the first metrics batch and stays down until the job has
    ended: the job leaves its final status in its job dir and exits cleanly; once Ray says the
    job ended, the reconciler stores its rows and checkpoints from the job dir and ends the run
    `succeeded`, its reason naming what was recovered and nothing as missing."""
    from app.jobs.launcher import RayJob, RayJobState
    from app.jobs.reconciler import Reconciler
    from tests.service.test_jobs_reconciler import FixedLoad, ScriptedRay

    monkeypatch.setenv("ROLLOUT_REPORTER_PATIENCE_S", "0.5")
    ray = ScriptedRay()
    reconciler = Reconciler(settings, app.state.sessionmaker, ray, idle_cores=FixedLoad())  # type: ignore[arg-type]
    exp_id = create_experiment(name="long outage", config=CONFIG)["id"]
    asyncio.run(reconciler.tick())  # queued and launched, as a Ray job that runs
    (submission_id, _), *_ = ray.submitted
    env = JobEnv(
        "http://testserver",
        job_token(exp_id),
        str(exp_id),
        experiment_job_dir(settings.data_dir, exp_id),
    )
    outage = Outage(client._transport)  # down from the first metrics batch on, for good
    reporter = outage_reporter(env, outage)
    try:
        assert ExperimentRun(env, reporter, StopFlag()).run() == 0  # not a failure
    finally:
        reporter.shutdown()
    left = FinalStatusRecord.model_validate_json((env.job_dir / FINAL_STATUS_FILE).read_bytes())
    assert left.report.status == "succeeded" and left.checkpoints == [4, 8]
    archives = {p.name: p.read_bytes() for p in env.job_dir.glob("checkpoints/iter_*.tar.gz")}
    assert sorted(archives) == ["iter_000004.tar.gz", "iter_000008.tar.gz"]

    api = httpx.Client(base_url="http://testserver/api/v1", transport=client._transport)
    assert api.get(f"/experiments/{exp_id}").json()["status"] == "running"  # nothing arrived
    ray.jobs[submission_id] = RayJob(RayJobState.SUCCEEDED)  # the API is back; Ray says ended
    asyncio.run(reconciler.tick())

    exp = api.get(f"/experiments/{exp_id}").json()
    assert exp["status"] == "succeeded", exp["events"][-1]
    reason = exp["events"][-1]["reason"]
    rows = jsonl_rows(env.job_dir / "metrics.jsonl")
    assert reason.startswith("stop criterion met: env_steps")
    missed = len(rows) - outage.delivered_rows  # the first batch may hold more than one row
    assert 0 < missed < len(rows)
    recovered = f"recovered from the job dir: {missed} metric rows, the checkpoints of "
    assert recovered + "iterations 4, 8" in reason and "missing" not in reason
    assert assert_stored_exactly(api, exp_id, env.job_dir / "metrics.jsonl") == len(rows)
    stored = api.get(f"/experiments/{exp_id}/checkpoints").json()
    assert [c["iteration"] for c in stored] == [4, 8]
    latest = api.get(f"/experiments/{exp_id}/checkpoints/latest/download")
    assert latest.status_code == 200 and latest.content == archives["iter_000008.tar.gz"]
    # What was stored left the job dir; the log holds the lines the job could not send.
    assert not list(env.job_dir.glob("checkpoints/iter_*"))
    assert not (env.job_dir / FINAL_STATUS_FILE).exists()
    lines = api.get(f"/experiments/{exp_id}/logs").json()["lines"]
    assert any(line.startswith("iter 8 ") for line in lines), lines[-5:]
