"""Fault: the data dir fills up (a storage quota) while a real job uploads its checkpoints.

The real service (uvicorn, SQLite) runs a real trainer job on the shared Ray cluster with
room for about two of its checkpoints. Afterwards: the experiment succeeded and its log says
which checkpoints were not stored; the stored ones are complete and within the quota; the job
kept only the latest refused archive in its job dir (they must not pile up on a full disk);
nothing is orphaned under the checkpoints dir; and
every metric point the job produced is stored exactly once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.checkpoints.storage import is_temp
from app.core.layout import experiment_job_dir
from app.jobs.ray_head import LocalRayHead
from tests.service.faults import jsonl_points
from tests.service.test_e2e_jobs import QUICK, LiveService, make_settings

pytestmark = pytest.mark.ray

ITERATIONS = 6
QUOTA = 250_000  # a trained CartPole checkpoint of this config is ~116 kB: two fit
CONFIG = {
    **QUICK,
    "stop": {"env_steps": ITERATIONS * QUICK["train_batch_size_per_learner"]},
    "checkpoint_every": 1,
    "keep_checkpoints": 10,
}


@pytest.fixture
def tight_service(ray_head: LocalRayHead, tmp_path: Path) -> Iterator[LiveService]:
    settings = make_settings(tmp_path / "data", ray_head.address).model_copy(
        update={"max_storage_bytes": QUOTA, "min_free_bytes": 0}
    )
    live = LiveService(settings).start()
    try:
        yield live
    finally:
        live.stop()


def test_a_full_data_dir_during_checkpoint_uploads(tight_service: LiveService) -> None:
    live = tight_service
    exp_id = live.submit(CONFIG, name="tight storage")
    exp = live.wait_status(exp_id, {"succeeded", "failed", "stopped"}, 150)
    assert exp["status"] == "succeeded", (exp["error"], exp["log_tail"])

    # What the experiment shows: the stored checkpoints, and a log line per refused one.
    stored = live.http.get(f"/experiments/{exp_id}/checkpoints").json()
    stored_iterations = [c["iteration"] for c in stored]
    lines = live.http.get(f"/experiments/{exp_id}/logs", params={"tail": 2000}).json()["lines"]
    refused = sorted(
        int(m.group(1))
        for line in lines
        if (m := re.search(r"checkpoint of iteration (\d+) not stored: checkpoint storage", line))
    )
    assert stored_iterations and refused, (stored, lines)  # the quota was hit midway
    assert sorted(stored_iterations + refused) == list(range(1, ITERATIONS + 1))
    assert sum(c["size_bytes"] for c in stored) <= QUOTA

    # What was kept: exactly the stored archives on the service; the refused ones with the job.
    root = live.settings.checkpoints_dir
    on_disk = sorted(p for p in root.rglob("*") if p.is_file())
    assert not [p for p in on_disk if is_temp(p)]
    assert sum(p.stat().st_size for p in on_disk) == sum(c["size_bytes"] for c in stored)
    for checkpoint in stored:
        download = live.http.get(f"/experiments/{exp_id}/checkpoints/{checkpoint['id']}/download")
        assert download.status_code == 200 and len(download.content) == checkpoint["size_bytes"]
    local = experiment_job_dir(live.settings.data_dir, exp_id)
    kept = sorted(p.name for p in (local / "checkpoints").glob("*.tar.gz"))
    assert kept == [f"iter_{max(refused):06d}.tar.gz"]

    # Metrics: every point the job wrote to its JSONL copy is stored, once, with its value.
    produced = jsonl_points(local / "metrics.jsonl")
    response = live.http.get(f"/experiments/{exp_id}/metrics").json()
    assert set(response["series"]) == set(produced)
    for name, points in produced.items():
        series = response["series"][name]
        assert series["step"] == sorted(points), name
        assert series["value"] == [points[s] for s in sorted(points)], name
    assert len(produced["time_s"]) == ITERATIONS
