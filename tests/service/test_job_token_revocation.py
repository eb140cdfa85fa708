"""A job token is revoked when its experiment ends: a job still running behind a terminal status
(a zombie) can no longer write metrics, best_return, logs, status or checkpoints. A job that
reports its last metrics and checkpoint and then its final status keeps working in that order,
and a stopping experiment still takes its final checkpoint. Both databases."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.checkpoints import storage

JOBS = "/api/v1/jobs/experiments"


class Job:
    """Calls the job-side routes the way trainer/reporter.py does."""

    def __init__(self, client: TestClient, experiment_id: int, token: str) -> None:
        self.client = client
        self.base = f"{JOBS}/{experiment_id}"
        self.headers = {"Authorization": f"Bearer {token}"}

    def metrics(self, step: int, ret: float) -> Any:
        row = {"step": step, "time_s": 1.0, "values": {"episode_return_mean": ret}}
        return self.client.post(f"{self.base}/metrics", json={"rows": [row]}, headers=self.headers)

    def logs(self, *lines: str) -> Any:
        return self.client.post(
            f"{self.base}/logs", json={"lines": list(lines)}, headers=self.headers
        )

    def status(self, status: str) -> Any:
        body = {"status": status, "reason": f"job: {status}"}
        return self.client.post(f"{self.base}/status", json=body, headers=self.headers)

    def checkpoint(self, iteration: int, ret: float) -> Any:
        params = {"iteration": iteration, "env_steps": iteration * 100, "episode_return_mean": ret}
        return self.client.put(
            f"{self.base}/checkpoints", params=params, content=b"x" * 1000, headers=self.headers
        )

    def config(self) -> Any:
        return self.client.get(self.base, headers=self.headers)


def assert_revoked(response: Any) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "forbidden" and "revoked" in error["message"]


def shown(client: TestClient, exp_id: int) -> dict[str, Any]:
    """Everything a job could have changed, as the API shows it."""
    base = f"/api/v1/experiments/{exp_id}"
    exp = client.get(base).json()
    return {
        "status": exp["status"],
        "best_return": exp["best_return"],
        "env_steps": exp["env_steps"],
        "metrics": client.get(f"{base}/metrics").json()["series"],
        "logs": client.get(f"{base}/logs").json()["lines"],
        "checkpoints": [
            (c["iteration"], c["sha256"]) for c in client.get(f"{base}/checkpoints").json()
        ],
    }


@pytest.mark.parametrize("end", ["succeeded", "failed", "stopped"])
def test_an_ended_experiments_token_writes_nothing(
    client, create_experiment, job_token, transition, end
):
    exp_id = create_experiment()["id"]
    transition(exp_id, "queued", "running")
    job = Job(client, exp_id, job_token(exp_id))
    assert job.metrics(100, 10.0).status_code == 200
    assert job.checkpoint(1, 10.0).status_code == 200
    assert job.logs("iteration 1").status_code == 200
    transition(exp_id, end)  # by the reconciler (job gone) or the job's own report
    before = shown(client, exp_id)

    assert_revoked(job.metrics(200, 999.0))  # would raise best_return and env_steps
    assert_revoked(job.metrics(100, 999.0))  # would rewrite an existing point
    assert_revoked(job.logs("late line"))
    assert_revoked(job.checkpoint(1, 999.0))  # would replace the best checkpoint's archive
    assert_revoked(job.checkpoint(2, 999.0))
    assert_revoked(job.status("running"))
    assert_revoked(job.config())
    assert shown(client, exp_id) == before


def test_final_metrics_and_checkpoint_then_final_status_then_nothing(
    client, create_experiment, job_token, transition
):
    exp_id = create_experiment()["id"]
    transition(exp_id, "queued", "running")
    job = Job(client, exp_id, job_token(exp_id))
    assert job.metrics(100, 5.0).status_code == 200
    assert job.metrics(200, 7.0).status_code == 200
    assert job.checkpoint(2, 7.0).status_code == 200
    assert job.logs("final checkpoint saved at iteration 2").status_code == 200
    assert job.status("succeeded").status_code == 200
    assert job.status("succeeded").status_code == 200  # a retried final report: a no-op
    assert_revoked(job.status("failed"))
    assert_revoked(job.metrics(300, 9.0))
    after = shown(client, exp_id)
    assert after["status"] == "succeeded" and after["best_return"] == 7.0
    assert after["metrics"]["episode_return_mean"]["step"] == [100, 200]
    assert [c[0] for c in after["checkpoints"]] == [2]


def test_a_stopping_experiment_takes_its_final_checkpoint(
    client, create_experiment, job_token, transition
):
    exp_id = create_experiment()["id"]
    transition(exp_id, "queued", "running")
    job = Job(client, exp_id, job_token(exp_id))
    assert job.metrics(100, 5.0).status_code == 200
    stopping = client.post(f"/api/v1/experiments/{exp_id}/stop")
    assert stopping.json()["status"] == "stopping"
    assert job.status("running").status_code == 200  # late "running": ignored, the stop wins
    assert job.metrics(150, 6.0).status_code == 200
    assert job.checkpoint(3, 6.0).status_code == 200
    assert job.status("stopped").status_code == 200
    assert_revoked(job.checkpoint(4, 8.0))
    after = shown(client, exp_id)
    assert after["status"] == "stopped" and after["best_return"] == 6.0
    assert [c[0] for c in after["checkpoints"]] == [3]


def test_an_upload_that_streams_past_the_end_is_not_kept(
    client, create_experiment, job_token, transition, app, monkeypatch
):
    """The end is checked again, under the row lock, when the streamed archive is recorded."""
    exp_id = create_experiment()["id"]
    transition(exp_id, "queued", "running")
    job = Job(client, exp_id, job_token(exp_id))
    receive = storage.receive

    async def receive_then_end(*args: Any, **kwargs: Any) -> Any:
        stored = await receive(*args, **kwargs)
        transition(exp_id, "failed")  # the experiment ended while the body streamed
        return stored

    monkeypatch.setattr(storage, "receive", receive_then_end)
    assert_revoked(job.checkpoint(1, 5.0))
    assert shown(client, exp_id)["checkpoints"] == []
    leftovers = [p for p in app.state.settings.checkpoints_dir.rglob("*") if p.is_file()]
    assert leftovers == []
