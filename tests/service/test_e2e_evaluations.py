"""An evaluation end to end on the real local Ray cluster: the real service (uvicorn, SQLite)
launches `trainer.evaluation_job` as its own Ray job, which downloads the checkpoint, posts
every episode and uploads a video; we watch it over the experiment's websocket."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from app.jobs.ray_head import LocalRayHead
from tests.service.evaluation_seed import seed_experiment, train_checkpoint
from tests.service.test_e2e_jobs import LiveService, make_settings
from trainer.evaluation import evaluate
from trainer.video import probe

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train_checkpoint(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def service(
    ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveService]:
    live = LiveService(make_settings(tmp_path_factory.mktemp("e2e-eval"), ray_head.address))
    live.start()
    try:
        yield live
    finally:
        live.stop()


def follow_evaluation(
    live: LiveService, exp_id: int, body: dict[str, Any], timeout_s: float
) -> tuple[int, list[dict]]:
    """POST the evaluation, then its `evaluation` messages until it ends."""
    ws_url = live.url.replace("http", "ws") + f"/api/v1/experiments/{exp_id}/stream"
    messages: list[dict] = []
    deadline = time.monotonic() + timeout_s
    with connect(ws_url, open_timeout=10) as ws:
        while json.loads(ws.recv(timeout=10))["type"] != "status":  # the backlog's end
            pass
        response = live.http.post(f"/experiments/{exp_id}/evaluations", json=body)
        assert response.status_code == 201, response.text
        eid = response.json()["id"]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"evaluation {eid} did not end: {messages[-3:]}")
            try:
                message = json.loads(ws.recv(timeout=remaining))
            except TimeoutError:
                continue
            if message["type"] != "evaluation" or message["evaluation_id"] != eid:
                continue
            messages.append(message["evaluation"])
            if message["evaluation"]["status"] in ("succeeded", "failed"):
                return eid, messages


def test_an_evaluation_runs_as_a_ray_job_and_records_a_playable_video(
    service: LiveService, archive: Path, tmp_path: Path
) -> None:
    exp_id, checkpoint_id = seed_experiment(service.settings, archive)
    body = {"checkpoint": "best", "episodes": 6, "seed": 21, "record_video": True}
    eid, messages = follow_evaluation(service, exp_id, body, timeout_s=120)
    got = service.http.get(f"/evaluations/{eid}").json()
    assert got["status"] == "succeeded", (got["error"], got["log_tail"])
    statuses = [m["status"] for m in messages]
    assert statuses[0] == "pending" and statuses[-1] == "succeeded"
    assert statuses.index("queued") < statuses.index("running")
    assert any(m["episodes_done"] > 0 and m["status"] == "running" for m in messages)
    assert got["checkpoint_id"] == checkpoint_id
    assert got["ray_job_id"].startswith(f"rollout-eval{eid}-") and got["job_started_at"]

    local = evaluate(archive, 6, seed=21)  # the same episodes as `rollout evaluate`
    assert got["returns"] == local.returns and got["lengths"] == local.lengths
    video = got["video"]
    assert video["frames"] == local.lengths[0] + 1 and video["size_bytes"] < 2_000_000
    response = service.http.get(f"/evaluations/{eid}/video")
    assert response.status_code == 200 and response.headers["content-type"] == "video/webm"
    file = tmp_path / "episode.webm"
    file.write_bytes(response.content)
    decoded = probe(file)
    assert decoded["frames"] == video["frames"] and (decoded["width"], decoded["height"]) == (
        600,
        400,
    )
    # The job cleaned up after itself.
    job_dir = service.settings.data_dir / "jobs" / "evaluations" / str(eid)
    assert not job_dir.exists() or not any(job_dir.iterdir())
