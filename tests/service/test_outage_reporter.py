"""Fault: the API is unreachable for longer than the reporter's patience at the end of a run.

The real job code (trainer.job's ExperimentRun, serial CartPole) reports to the real app; its
connection to the API drops right after the first metrics batch arrives and comes back only
once the reporter has given up waiting (patience 0.5 s through ROLLOUT_REPORTER_PATIENCE_S).
The job then reports its final status saying what it could not deliver, and the API recovers
the missing rows from the job dir's JSONL copy before it ends the run and revokes the token:
every point the job produced is stored exactly once.
"""

from __future__ import annotations

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

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            self.refused += 1
            raise httpx.ConnectError("the API is down", request=request)
        response = self.inner.handle_request(request)
        if request.url.path.endswith("/metrics") and response.status_code == 200:
            self.down = True
        return response


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
    reporter = Reporter(
        env.api_url,
        env.token,
        env.experiment_id,
        env.job_dir,
        backoff=Backoff(initial_s=0.01, max_s=0.05),
        transport=outage,
    )
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
    # The status says what did not arrive: every row after the first, both checkpoints.
    reason = exp["events"][-1]["reason"]
    assert "stop criterion met: env_steps" in reason
    assert f"not delivered to the API: {len(rows) - 1} metric rows" in reason
    assert "the checkpoints of iterations 4, 8" in reason and str(env.job_dir) in reason
    # ...and the API recovered the rows from the job dir before it ended the run.
    assert assert_stored_exactly(api, exp_id, jsonl) == len(rows)
    lines = api.get(f"/experiments/{exp_id}/logs").json()["lines"]
    assert any(f"recovered {len(rows) - 1} metric rows" in line for line in lines)
