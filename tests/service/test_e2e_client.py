"""The docs/api.md client example end to end on the real local Ray cluster: submit a training
run, wait for it, download its best checkpoint, evaluate it as a Ray job and wait for that,
fetch the video; all through `RolloutClient` against the real service (uvicorn, SQLite)."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.client import RolloutClient
from app.jobs.ray_head import LocalRayHead
from tests.service.test_e2e_jobs import QUICK, LiveService, make_settings

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def service(
    ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveService]:
    live = LiveService(make_settings(tmp_path_factory.mktemp("e2e-client"), ray_head.address))
    live.start()
    try:
        yield live
    finally:
        live.stop()


def test_submit_wait_download_evaluate(service: LiveService, tmp_path: Path) -> None:
    with RolloutClient(service.url, timeout=30) as rollout:
        exp = rollout.submit(QUICK, name="client-e2e", tags=["client"])
        done = rollout.wait(exp.id, timeout=240, poll_s=0.5)
        assert done.status.value == "succeeded", (done.error, done.log_tail)
        assert done.best_return is not None and done.env_steps

        best = rollout.download_checkpoint(exp.id, "best", tmp_path)
        (listed,) = [c for c in rollout.checkpoints(exp.id) if c.is_best]
        assert best.name == f"experiment-{exp.id}-iteration-{listed.iteration}.tar.gz"
        assert best.stat().st_size == listed.size_bytes and tarfile.is_tarfile(best)

        evaluation = rollout.evaluate(exp.id, "best", episodes=3, seed=5, record_video=True)
        finished = rollout.wait_evaluation(evaluation.id, timeout=120)
        assert finished.status.value == "succeeded", (finished.error, finished.log_tail)
        assert len(finished.returns) == 3 and finished.checkpoint_id == listed.id
        assert finished.return_mean == pytest.approx(sum(finished.returns) / 3)
        assert finished.video is not None
        video = rollout.download_video(finished.id, tmp_path / "episode.webm")
        assert video.stat().st_size == finished.video.size_bytes
