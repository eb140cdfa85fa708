"""A full disk is survivable: new runs are refused with 507 and a clear message, /health says
so, DELETE still frees space, and a job keeps only the latest checkpoint the API refused.

The disk is made "full" by the free-space floor (ROLLOUT_MIN_FREE_BYTES above what is free);
the DELETE test fills a real 24 MB tmpfs (as root; skipped where mounting is not allowed).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import transaction
from app.experiments import service as experiments
from app.main import create_app
from tests.service.conftest import SMALL_CONFIG
from tests.tmpfs import tmpfs
from trainer.reporter import Backoff, Reporter
from trainer.wire import CheckpointMeta

API = "/api/v1"


def test_below_the_floor_new_runs_get_507_health_says_so_and_delete_works(
    app: FastAPI,
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    transition: Callable[..., None],
) -> None:
    exp_id = create_experiment(name="before")["id"]
    transition(exp_id, "stopped")
    assert client.get("/health").json()["disk"]["ok"] is True
    settings = app.state.settings
    app.state.settings = settings.model_copy(update={"min_free_bytes": 2**62})

    health = client.get("/health")
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "degraded" and body["disk"]["ok"] is False
    assert body["disk"]["floor_bytes"] == 2**62 and body["disk"]["free_bytes"] > 0
    for path, payload in (
        ("/experiments", {"name": "refused", "config": SMALL_CONFIG}),
        (f"/experiments/{exp_id}/fork", {"overrides": {}}),
        (f"/experiments/{exp_id}/resume", None),
    ):
        response = client.post(API + path, json=payload)
        assert response.status_code == 507, (path, response.text)
        error = response.json()["error"]
        assert error["code"] == "insufficient_storage"
        assert (
            "disk is nearly full" in error["message"]
            and "ROLLOUT_MIN_FREE_BYTES" in error["message"]
        )
    assert [e["id"] for e in client.get(f"{API}/experiments").json()["items"]] == [exp_id]
    assert client.delete(f"{API}/experiments/{exp_id}").status_code == 204


def test_the_floor_is_never_zero(make_settings: Callable[..., Settings]) -> None:
    """ROLLOUT_MIN_FREE_BYTES=0 still keeps a little room: a disk with nothing free is full."""
    from app.core.system import MIN_HEADROOM_BYTES, DiskState

    assert DiskState.of(make_settings(min_free_bytes=0)).floor_bytes == MIN_HEADROOM_BYTES
    assert not DiskState(free_bytes=0, floor_bytes=MIN_HEADROOM_BYTES).ok


def test_a_job_keeps_only_the_latest_refused_checkpoint(tmp_path: Path) -> None:
    """Every upload refused with 507: one archive stays in the job dir, not one per checkpoint."""
    refused: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/checkpoints"):
            refused.append(int(request.url.params["iteration"]))
            body = {"error": {"code": "insufficient_storage", "message": "storage is full"}}
            return httpx.Response(507, json=body)
        return httpx.Response(200, json={})

    job = tmp_path / "job"
    reporter = Reporter(
        "http://api",
        "t",
        "1",
        job,
        backoff=Backoff(0.001, 0.002),
        transport=httpx.MockTransport(handle),
    )
    archives = job / "checkpoints"
    archives.mkdir(parents=True)
    for iteration in (1, 2, 3, 4):
        archive = archives / f"iter_{iteration:06d}.tar.gz"
        archive.write_bytes(b"x" * 1000)
        reporter.add_checkpoint(archive, CheckpointMeta(iteration=iteration, env_steps=iteration))
    assert reporter.close(timeout_s=10)  # nothing left to send: refused is not undelivered
    reporter.shutdown()
    assert refused == [1, 2, 3, 4]
    assert [p.name for p in archives.iterdir()] == ["iter_000004.tar.gz"]
    assert len(reporter.stats.permanent_errors) == 4
    assert "storage is full" in reporter.stats.permanent_errors[0]


def _fill(directory: Path) -> Path:
    """Write a file until the filesystem has no byte left."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1024**2, 65_536, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    with pytest.raises(OSError) as info:
        (directory / "probe").write_bytes(b"\0" * 4096)
    assert info.value.errno == errno.ENOSPC
    return filler


def test_delete_frees_space_on_a_full_disk(tmp_path: Path) -> None:
    """The data dir and the SQLite file on a 24 MB tmpfs, filled to the last byte: DELETE of
    a finished experiment with 2 x 4 MB of checkpoints succeeds and frees them (it removed the
    rows first and committed before removing the files: the commit found no room)."""
    with tmpfs(tmp_path / "disk", "24m") as disk:
        settings = Settings(
            data_dir=disk / "data",
            database_url=f"sqlite:///{disk / 'rollout.db'}",
            jobs_enabled=False,
            frontend_dir=tmp_path / "no-frontend",
            min_free_bytes=0,
        )
        app = create_app(settings)
        with TestClient(app) as client:
            created = client.post(
                f"{API}/experiments", json={"name": "big", "config": SMALL_CONFIG}
            )
            exp_id = created.json()["id"]
            with transaction(app.state.sessionmaker) as session:
                token = experiments.issue_job_token(session, exp_id)
            for iteration in (1, 2):
                response = client.put(
                    f"{API}/jobs/experiments/{exp_id}/checkpoints",
                    params={"iteration": iteration, "env_steps": iteration * 100},
                    content=os.urandom(4 * 1024**2),
                    headers={"Authorization": f"Bearer {token}"},
                )
                assert response.status_code == 200, response.text
            with transaction(app.state.sessionmaker) as session:
                experiments.transition(session, exp_id, "stopped", "test: done")
            filler = _fill(disk)
            assert client.get("/health").json()["disk"]["ok"] is False
            refused = client.post(f"{API}/experiments", json={"name": "x", "config": SMALL_CONFIG})
            assert refused.status_code == 507

            response = client.delete(f"{API}/experiments/{exp_id}")
            assert response.status_code == 204, response.text
            assert client.get(f"{API}/experiments/{exp_id}").status_code == 404
            assert not (settings.checkpoints_dir / str(exp_id)).exists()
            filler.unlink()


def test_the_reporter_trains_on_while_its_jsonl_copy_cannot_grow(tmp_path: Path) -> None:
    """The job dir on a full 1 MB tmpfs: rows wait in memory (no exception for the training
    loop, no partial line in the file); once there is room they are written in order, and
    every one is delivered once."""
    delivered: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/metrics"):
            delivered.extend(row["step"] for row in json.loads(request.content)["rows"])
        return httpx.Response(200, json={})

    with tmpfs(tmp_path / "disk", "1m") as disk:
        reporter = Reporter(
            "http://api",
            "t",
            "1",
            disk / "job",
            backoff=Backoff(0.001, 0.002),
            transport=httpx.MockTransport(handle),
        )
        try:
            reporter.add_metrics(1, 0.0, {"a": 1.0})
            deadline = time.monotonic() + 10
            while delivered != [1]:
                assert time.monotonic() < deadline, delivered
                time.sleep(0.01)
            filler = _fill(disk)
            big = {f"value_{i}": i / 7 for i in range(400)}  # ~12 kB: more than a page
            for step in (2, 3, 4):  # the first is cut off mid-line by ENOSPC
                reporter.add_metrics(step, 0.0, big)
            lines = reporter.metrics_path.read_bytes().splitlines(keepends=True)
            assert [json.loads(line)["step"] for line in lines] == [1]
            assert reporter.undelivered().steps == (2, 3, 4)
            filler.unlink()
            reporter.add_metrics(5, 0.0, {"a": 5.0})
            assert reporter.close(timeout_s=10)
        finally:
            reporter.shutdown()
        rows = [json.loads(line)["step"] for line in reporter.metrics_path.read_text().splitlines()]
        assert rows == [1, 2, 3, 4, 5] and sorted(delivered) == [1, 2, 3, 4, 5]
