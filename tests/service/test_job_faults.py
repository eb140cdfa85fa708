"""Faults while real jobs train, with exact accounting: after each, every point the job produced
(its local JSONL copy) is stored exactly once, and the experiment shows what happened.

- the job driver is SIGKILLed (as by the OOM killer) while the database holds back its last
  reports: the experiment fails saying why; the points it wrote but never sent are recovered
  from its JSONL copy; its checkpoints are kept, nothing half-written is left;
- an EnvRunner actor is killed: the trainer restarts it and the experiment succeeds;
- the database is unavailable for 10 s while a job reports (SQLite: its write lock held;
  PostgreSQL: the server stopped and started again): the job buffers and retries, then
  everything lands once and the experiment succeeds.

The real service (uvicorn) runs on the session's shared Ray cluster.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.checkpoints.storage import is_temp
from app.core.layout import experiment_job_dir
from app.jobs.ray_head import LocalRayHead, descendants, free_ports
from tests.service.faults import assert_stored_exactly, jsonl_rows
from tests.service.postgres import ThrowawayServer, _database_on
from tests.service.test_e2e_jobs import QUICK, LiveService, driver_pid, make_settings, wait_for

pytestmark = pytest.mark.ray

FINISHED = {"succeeded", "failed", "stopped"}
BATCH = QUICK["train_batch_size_per_learner"]
# Ends by itself after 12 iterations (a few seconds each on a busy machine).
TWELVE = {**QUICK, "stop": {"env_steps": 12 * BATCH}, "checkpoint_every": 4}
# Ends by itself after 25 s of training, however fast the machine: still reporting through a
# 10 s outage that starts once its second iteration is stored (twelve iterations can all be
# done by then on an idle machine).
TWENTY_FIVE_SECONDS = {
    **QUICK,
    "stop": {"wall_seconds": 25, "env_steps": 50_000_000},
    "checkpoint_every": 10,
}
ENDLESS = {**QUICK, "stop": {"env_steps": 50_000_000}, "checkpoint_every": 1}


@pytest.fixture(scope="module")
def service(ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    live = LiveService(make_settings(tmp_path_factory.mktemp("faults"), ray_head.address))
    live.start()
    try:
        yield live
    finally:
        live.stop()


def _jsonl(live: LiveService, exp_id: int) -> Path:
    return experiment_job_dir(live.settings.data_dir, exp_id) / "metrics.jsonl"


def _produced(live: LiveService, exp_id: int) -> int:
    path = _jsonl(live, exp_id)
    return len(path.read_text().splitlines()) if path.exists() else 0


def _stored(live: LiveService, exp_id: int) -> int:
    return len(live.metric_steps(exp_id, "time_s"))


def _job_processes(ray_head: LocalRayHead, exp_id: int, api_url: str) -> dict[int, int]:
    """pid -> start time of every process of this experiment's job (driver and actors): Ray
    gives the job's runtime_env variables to all of them."""
    assert ray_head.pid is not None
    wanted = {f"ROLLOUT_EXPERIMENT_ID={exp_id}".encode(), f"ROLLOUT_API_URL={api_url}".encode()}
    found = {}
    for pid, started in descendants(ray_head.pid).items():
        with contextlib.suppress(OSError):
            if wanted <= set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")):
                found[pid] = started
    return found


def _env_runner_pid(ray_head: LocalRayHead, exp_id: int, api_url: str) -> int | None:
    for pid in _job_processes(ray_head, exp_id, api_url):
        with contextlib.suppress(OSError):
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::EnvRunner"):
                return pid
    return None


@contextlib.contextmanager
def sqlite_write_lock(database: Path) -> Iterator[None]:
    """Hold the database's write lock, as a long writer would (readers go on under WAL)."""
    conn = sqlite3.connect(database, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def _iterations(live: LiveService, exp_id: int) -> int:
    """How many iterations the job ran (its last row's iteration counter)."""
    return int(jsonl_rows(_jsonl(live, exp_id))[-1]["values"]["iteration"])


def _wait_finished(live: LiveService, exp_id: int, timeout_s: float = 120) -> dict[str, Any]:
    return live.wait_status(exp_id, FINISHED, timeout_s)


def _assert_nothing_half_written(live: LiveService, exp_id: int) -> list[dict[str, Any]]:
    """The stored checkpoints are exactly the archives on disk; no upload temp file is left."""
    stored = live.http.get(f"/experiments/{exp_id}/checkpoints").json()
    root = live.settings.checkpoints_dir / str(exp_id)
    on_disk = sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []
    assert not [p for p in on_disk if is_temp(p)]
    assert sorted(p.stat().st_size for p in on_disk) == sorted(c["size_bytes"] for c in stored)
    return stored


def test_a_killed_driver_fails_its_experiment_and_keeps_every_point(
    service: LiveService, ray_head: LocalRayHead
) -> None:
    exp_id = service.submit(ENDLESS, name="driver killed")
    wait_for(lambda: _stored(service, exp_id) >= 2, 90, "two iterations stored")
    wait_for(
        lambda: service.http.get(f"/experiments/{exp_id}/checkpoints").json(), 60, "a checkpoint"
    )
    pid = driver_pid(ray_head, service, exp_id)
    assert pid is not None
    # Hold back the job's reports, so that it dies with rows written but never sent.
    with sqlite_write_lock(service.settings.data_dir / "rollout.db"):
        held = _stored(service, exp_id)
        wait_for(lambda: _produced(service, exp_id) >= held + 2, 60, "rows the API never got")
        os.kill(pid, signal.SIGKILL)  # as the kernel's OOM killer would
    exp = _wait_finished(service, exp_id, 60)

    assert exp["status"] == "failed", (exp["events"][-1], exp["error"])
    reason = exp["events"][-1]["reason"]
    assert reason.startswith(f"Ray job {exp['ray_job_id']} failed; recovered from the job dir: ")
    assert "metric rows" in reason and "missing" not in reason
    assert "exit code" in exp["error"]  # Ray's message: the driver was killed
    produced = assert_stored_exactly(service.http, exp_id, _jsonl(service, exp_id))
    assert produced >= held + 2
    logs = service.http.get(f"/experiments/{exp_id}/logs").json()["lines"]
    assert any("metric rows the job wrote but never sent" in line for line in logs)
    assert exp["env_steps"] == jsonl_rows(_jsonl(service, exp_id))[-1]["step"]
    stored = _assert_nothing_half_written(service, exp_id)
    assert stored  # the periodic checkpoints are kept (a resume can continue from them)
    wait_for(lambda: not _job_processes(ray_head, exp_id, service.url), 30, "no job process")


def test_a_killed_env_runner_is_restarted_and_the_experiment_succeeds(
    service: LiveService, ray_head: LocalRayHead
) -> None:
    config = {**TWELVE, "num_env_runners": 1}
    exp_id = service.submit(config, name="env runner killed")
    wait_for(lambda: _stored(service, exp_id) >= 2, 90, "two iterations stored")
    pid = _env_runner_pid(ray_head, exp_id, service.url)
    assert pid is not None, "no EnvRunner actor process found"
    os.kill(pid, signal.SIGKILL)
    exp = _wait_finished(service, exp_id)

    assert exp["status"] == "succeeded", (exp["error"], exp["log_tail"])
    assert [e["to_status"] for e in exp["events"]] == ["pending", "queued", "running", "succeeded"]
    # The lost runner's steps were sampled again, so the last iteration may run over a bit.
    assert exp["env_steps"] >= 12 * BATCH
    assert assert_stored_exactly(service.http, exp_id, _jsonl(service, exp_id)) == _iterations(
        service, exp_id
    )
    restarts = service.http.get(
        f"/experiments/{exp_id}/metrics", params={"names": "env_runner_restarts"}
    ).json()["series"]["env_runner_restarts"]["value"]
    assert restarts[0] == 0 and restarts[-1] >= 1
    _assert_nothing_half_written(service, exp_id)
    wait_for(lambda: not _job_processes(ray_head, exp_id, service.url), 30, "no job process")


def test_the_database_locked_for_10s_while_a_job_reports(service: LiveService) -> None:
    exp_id = service.submit(TWENTY_FIVE_SECONDS, name="database locked")
    wait_for(lambda: _stored(service, exp_id) >= 2, 90, "two iterations stored")
    with sqlite_write_lock(service.settings.data_dir / "rollout.db"):
        held, written = _stored(service, exp_id), _produced(service, exp_id)
        time.sleep(10)
        # Nothing could be written, yet reads and the job went on.
        assert _stored(service, exp_id) == held
        assert _produced(service, exp_id) > written
        assert httpx.get(f"{service.url}/health", timeout=10).status_code == 200
    exp = _wait_finished(service, exp_id)

    assert exp["status"] == "succeeded", (exp["error"], exp["log_tail"])
    assert [e["to_status"] for e in exp["events"]] == ["pending", "queued", "running", "succeeded"]
    assert assert_stored_exactly(service.http, exp_id, _jsonl(service, exp_id)) > held
    _assert_nothing_half_written(service, exp_id)


@pytest.mark.postgres
def test_the_postgres_server_down_for_10s_while_a_job_reports(
    ray_head: LocalRayHead, tmp_path: Path
) -> None:
    try:
        server = ThrowawayServer()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    try:
        server.start()
        with _database_on(server.dsn) as url:
            settings = make_settings(tmp_path / "data", ray_head.address, free_ports(1)[0])
            live = LiveService(settings.model_copy(update={"database_url": url})).start()
            try:
                _run_through_a_postgres_outage(live, server)
            finally:
                with contextlib.suppress(Exception):
                    server.start()  # whatever happened, the service must be able to stop
                live.stop()
    finally:
        server.remove()


def _run_through_a_postgres_outage(live: LiveService, server: ThrowawayServer) -> None:
    exp_id = live.submit(TWENTY_FIVE_SECONDS, name="database down")
    wait_for(lambda: _stored(live, exp_id) >= 2, 90, "two iterations stored")
    server.stop()
    try:
        written = _produced(live, exp_id)
        response = live.http.get(f"/experiments/{exp_id}")
        assert response.status_code == 503, response.text  # retry later, not a crash
        assert response.json()["error"]["code"] == "unavailable"
        assert response.headers["retry-after"]
        health = live.http.get("/health")
        assert health.status_code == 503 and health.json()["database"] is False
        time.sleep(10)
        assert _produced(live, exp_id) > written  # the job trained on, buffering
    finally:
        server.start()
    wait_for(lambda: live.http.get("/health").status_code == 200, 30, "the database answers")
    exp = _wait_finished(live, exp_id)

    assert exp["status"] == "succeeded", (exp["error"], exp["log_tail"])
    assert [e["to_status"] for e in exp["events"]] == ["pending", "queued", "running", "succeeded"]
    assert assert_stored_exactly(live.http, exp_id, _jsonl(live, exp_id)) > written
    _assert_nothing_half_written(live, exp_id)
