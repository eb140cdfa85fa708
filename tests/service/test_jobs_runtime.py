"""The service's own Ray head: started when no cluster is configured, gone after Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.core import layout
from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker, migrate, transaction
from app.experiments import service
from app.jobs.ray_head import alive, apply_ray_env, descendants, free_ports
from app.jobs.runtime import MAX_RAY_TEMP_DIR_LEN, JobsRuntime, prune_sessions, ray_temp_dir
from app.jobs.salvage import undelivered_rows
from app.metrics.models import MetricPoint
from tests.service.faults import ProcessReaper


def test_ray_temp_dir_stays_short_enough_for_unix_sockets(tmp_path: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    try:
        assert ray_temp_dir(root) == root / "ray" and (root / "ray").is_dir()
    finally:
        shutil.rmtree(root)
    deep = tmp_path / ("x" * 80)
    temp = ray_temp_dir(deep)
    assert len(str(temp)) <= MAX_RAY_TEMP_DIR_LEN + 20 and temp.is_dir()
    assert not temp.is_relative_to(deep)
    temp.rmdir()


def test_old_ray_sessions_are_pruned(tmp_path: Path) -> None:
    names = [f"session_2026-11-{day:02d}_10-00-00_000000_1" for day in range(1, 6)]
    for name in names:
        (tmp_path / name / "logs").mkdir(parents=True)
    (tmp_path / "session_latest").symlink_to(tmp_path / names[-1])
    prune_sessions(tmp_path, keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [*names[-2:], "session_latest"]


def test_an_unreachable_cluster_does_not_stop_the_service_from_starting(tmp_path: Path) -> None:
    apply_ray_env()  # Ray reads its environment once, at import: set it as every Ray test does
    dead = f"http://127.0.0.1:{free_ports(1)[0]}"
    settings = Settings(data_dir=tmp_path, ray_address=dead)
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    migrate(engine)

    async def scenario() -> tuple[bool, dict]:
        runtime = JobsRuntime(settings, make_sessionmaker(engine), None, interval_s=0.05)
        await runtime.start()
        try:
            await asyncio.sleep(0.2)  # the reconciler ticks (and fails to connect) meanwhile
            return await runtime.healthy(), await runtime.cluster_info()
        finally:
            await runtime.stop()

    healthy, info = asyncio.run(scenario())
    engine.dispose()
    assert healthy is False
    assert info["reachable"] is False and info["resources"] is None
    assert dead in info["error"]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _serve(tmp_path: Path, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "ROLLOUT_RAY_ADDRESS")}
    env |= {"ROLLOUT_DATABASE_URL": f"sqlite:///{tmp_path / 'r.db'}", "ROLLOUT_FRONTEND_DIR": "-"}
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "app.cli", "serve", "--port", str(port)]
    serve = subprocess.Popen(
        [*command, "--data-dir", str(tmp_path)],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return serve, log


@pytest.mark.ray
def test_ctrl_c_of_rollout_serve_leaves_no_ray_process(
    tmp_path: Path, reaper: ProcessReaper
) -> None:
    port = free_ports(1)[0]
    # Should the test fail before Ctrl-C, the head (in a session of its own) is stopped anyway.
    reaper.track_heads_of(tmp_path)
    serve, log = _serve(tmp_path, port)
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=10)
    try:
        # Generous waits: on a loaded 2-core machine a fresh Ray head, the job driver and its
        # first iteration take far longer than the ~15 s they take on an idle one.
        deadline = time.monotonic() + 120
        exp_id = None
        while exp_id is None:
            assert serve.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "rollout serve did not come up"
            try:
                config = {"env_id": "CartPole-v1", "stop": {"env_steps": 10_000_000}}
                response = api.post("/experiments", json={"name": "x", "config": config})
                exp_id = response.json()["id"]
            except httpx.TransportError:
                time.sleep(0.5)
        deadline = time.monotonic() + 240
        while not (experiment := api.get(f"/experiments/{exp_id}").json())["env_steps"]:
            assert serve.poll() is None, log.read_text()[-3000:]
            if time.monotonic() > deadline:
                events = api.get(f"/experiments/{exp_id}/events").json()
                pytest.fail(
                    f"no metric in 240 s: {experiment['status']}, events {events}\n"
                    f"{log.read_text()[-3000:]}"
                )
            time.sleep(0.5)
        assert api.get("/health").json()["ray"] is True
        cluster = api.get("/cluster").json()
        assert cluster["local_head"] and not cluster["address"].endswith(":6379")
        assert cluster["resources"]["CPU"]["total"] >= 1
        assert [r["experiment_id"] for r in cluster["running"]] == [exp_id]
        ray_processes = descendants(serve.pid)
        assert any("raylet" in _cmdline(pid) for pid in ray_processes)
        assert any("trainer.job" in _cmdline(pid) for pid in ray_processes)

        serve.send_signal(signal.SIGINT)  # Ctrl-C
        assert serve.wait(timeout=120) == 0
        # Ray tore its head down on SIGTERM, not after a wait ended in SIGKILL.
        assert "did not exit" not in log.read_text()
    finally:
        api.close()
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait(10)
    # Job drivers run in sessions of their own: they must be gone too.
    assert [_cmdline(pid) for pid in alive(ray_processes)] == []

    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    with transaction(make_sessionmaker(engine)) as session:
        exp = service.get(session, exp_id)
        assert exp.status.value == "stopped"
        assert "shut down" in service.events(session, exp_id)[-1].reason
        # Every row the driver wrote down, its last ones after Ctrl-C included, is stored.
        jsonl = layout.experiment_job_dir(tmp_path, exp_id) / "metrics.jsonl"
        written = [row.step for row in undelivered_rows(jsonl, None)]
        stored = session.scalars(
            select(MetricPoint.step)
            .where(MetricPoint.experiment_id == exp_id)
            .distinct()
            .order_by(MetricPoint.step)
        ).all()
        assert written and list(stored) == written and exp.env_steps == written[-1]
    engine.dispose()


def test_a_run_ended_with_its_cluster_keeps_its_own_status_behind_the_cause(
    settings: Settings, sessionmaker: Any, create_experiment: Any, transition: Any
) -> None:
    """When the service shuts down (or loses its head), a job that left its own final status
    in its job dir keeps that status, and the reason leads with the cause the job could not
    see: a driver stopped by the shutdown may only have seen its supervisor go away."""
    from app.experiments.lifecycle import ExperimentStatus as S
    from app.jobs.runtime import _end_active
    from app.jobs.salvage import Settlement
    from trainer.wire import FINAL_STATUS_FILE, FinalStatusRecord, StatusReport

    shut_down = Settlement(S.stopped, "the service shut down and its local Ray cluster with it")
    reported, silent = create_experiment(name="reported")["id"], create_experiment()["id"]
    transition(reported, "running")
    transition(silent, "running")
    job_dir = layout.experiment_job_dir(settings.data_dir, reported)
    job_dir.mkdir(parents=True, exist_ok=True)
    report = StatusReport(status="stopped", reason="stopped: the Ray job supervisor went away")
    (job_dir / FINAL_STATUS_FILE).write_text(FinalStatusRecord(report=report).model_dump_json())

    with transaction(sessionmaker) as session:
        assert sorted(_end_active(session, settings, lambda _: shut_down)) == [reported, silent]
    with transaction(sessionmaker) as session:
        reasons = {i: service.events(session, i)[-1].reason for i in (reported, silent)}
        assert {service.get(session, i).status for i in (reported, silent)} == {S.stopped}
    assert reasons[reported].startswith(
        "the service shut down and its local Ray cluster with it: stopped: the Ray job "
        "supervisor went away"
    )
    assert reasons[silent].startswith("the service shut down and its local Ray cluster with it")
    assert "supervisor" not in reasons[silent]
