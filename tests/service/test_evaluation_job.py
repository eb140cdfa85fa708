"""trainer.evaluation_job against the real API (in-process, SQLite and PostgreSQL): it fetches
its spec and checkpoint with its token, posts every episode, uploads the video and reports;
an env that cannot render still gets its returns; a failure is reported with its error."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import trainer.evaluation_job as evaluation_job
from app.core.db import transaction
from app.evaluations import service as evaluations
from tests.trainer import render_envs
from trainer.algorithm import PPO
from trainer.checkpoint import META_FILE, pack
from trainer.config import PPOConfig
from trainer.evaluation import evaluate
from trainer.evaluation_job import EvaluationJobEnv, JobApi, run
from trainer.reporter import Backoff
from trainer.video import probe

API = "/api/v1"


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A briefly trained CartPole checkpoint, and the same weights for an env that cannot
    render (same spaces)."""
    root = tmp_path_factory.mktemp("archives")
    config = PPOConfig(train_batch_size_per_learner=256, minibatch_size=128, num_epochs=1, seed=3)
    algo = PPO(config)
    algo.train()
    directory = algo.save_checkpoint(root / "cartpole")
    algo.stop()
    other = root / "norender"
    shutil.copytree(directory, other)
    meta = json.loads((other / META_FILE).read_text())
    meta["config"]["env_id"] = f"tests.trainer.render_envs:{render_envs.NO_RENDER}"
    (other / META_FILE).write_text(json.dumps(meta))
    return {"cartpole": pack(directory), "norender": pack(other)}


@pytest.fixture
def start_job(
    client: TestClient, app: FastAPI, create_experiment, job_token, tmp_path: Path
) -> Callable[..., tuple[int, int]]:
    """Upload `archive` as an experiment's checkpoint, create an evaluation of it, launch it as
    the scheduler would and run the job in-process; returns (evaluation id, exit code)."""

    def start(archive: Path, **body: Any) -> tuple[int, int]:
        exp = create_experiment()
        response = client.put(
            f"{API}/jobs/experiments/{exp['id']}/checkpoints",
            params={"iteration": 1, "env_steps": 256},
            content=archive.read_bytes(),
            headers={"Authorization": f"Bearer {job_token(exp['id'])}"},
        )
        assert response.status_code == 200, response.text
        created = client.post(f"{API}/experiments/{exp['id']}/evaluations", json=body)
        assert created.status_code == 201, created.text
        eid = created.json()["id"]
        with transaction(app.state.sessionmaker) as session:
            token = evaluations.issue_job_token(session, eid)
            evaluations.transition(session, eid, "running", "test: submitted")
        env = EvaluationJobEnv("http://testserver", token, eid, tmp_path / f"job-{eid}")
        env.job_dir.mkdir()
        api = JobApi(
            env.api_url,
            token,
            eid,
            backoff=Backoff(initial_s=0.01, max_s=0.02),
            transport=client._transport,
        )
        try:
            return eid, run(env, api)
        finally:
            api.close()

    return start


def test_the_job_evaluates_posts_every_episode_and_uploads_the_video(
    client: TestClient, start_job, archives: dict[str, Path]
) -> None:
    eid, code = start_job(archives["cartpole"], episodes=5, seed=9)
    assert code == 0
    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["status"] == "succeeded", (got["error"], got["log_tail"])
    local = evaluate(archives["cartpole"], 5, seed=9)  # what `rollout evaluate` computes
    assert got["returns"] == local.returns and got["lengths"] == local.lengths
    assert got["return_mean"] == pytest.approx(local.mean)
    assert got["return_std"] == pytest.approx(local.std)
    assert got["job_started_at"] is not None and "5 episodes" in got["reason"]
    video = got["video"]
    assert video["media_type"] == "video/webm" and video["codec"] == "vp9"
    assert video["frames"] == local.lengths[0] + 1 and (video["width"], video["height"]) == (
        600,
        400,
    )
    assert not video["subsampled"] and not video["cut"] and got["video_message"] is None
    response = client.get(video["url"])
    assert response.status_code == 200 and len(response.content) == video["size_bytes"]
    file = Path(client.app.state.settings.data_dir) / "downloaded.webm"
    file.write_bytes(response.content)
    decoded = probe(file)
    assert decoded["frames"] == video["frames"] and decoded["codec"] == "vp9"


def test_without_rendering_the_returns_are_recorded_with_a_message(
    client: TestClient, start_job, archives: dict[str, Path]
) -> None:
    eid, code = start_job(archives["norender"], episodes=3, seed=1, deterministic=False)
    assert code == 0
    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["status"] == "succeeded" and got["episodes_done"] == 3
    assert got["returns"] == evaluate(archives["norender"], 3, seed=1, deterministic=False).returns
    assert got["video"] is None and "cannot render frames" in got["video_message"]
    assert client.get(f"{API}/evaluations/{eid}/video").status_code == 404


def test_a_failing_job_reports_its_error(client: TestClient, start_job, tmp_path: Path) -> None:
    broken = tmp_path / "broken.tar.gz"
    broken.write_bytes(b"not a checkpoint archive")
    eid, code = start_job(broken, episodes=2, record_video=False)
    assert code == 1
    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["status"] == "failed" and got["reason"] == "job raised"
    assert "not a checkpoint" in got["error"] and "Traceback" in got["log_tail"]


def test_a_failure_whose_message_holds_nul_is_still_reported(
    client: TestClient, start_job, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API refuses NUL (PostgreSQL cannot store it): the job makes it visible instead of
    losing its failure report."""

    def broken_env(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("the env returned b'\x00\x01'\x00")

    monkeypatch.setattr(evaluation_job, "_evaluate", broken_env)
    archive = tmp_path / "any.tar.gz"
    archive.write_bytes(b"x")
    eid, code = start_job(archive, episodes=1, record_video=False)
    assert code == 1
    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["status"] == "failed"
    assert got["error"] == "ValueError: the env returned b'\ufffd\x01'\ufffd"
