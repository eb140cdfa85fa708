"""Fault: the API process is SIGKILLed mid-run and `rollout serve` starts again on its data dir.

Real processes throughout: `rollout serve` (SQLite, its own local Ray head) runs a real
CartPole job; the API is killed by its pid while the job trains; the second `rollout serve`
adopts the head the first one left running, so the experiment stays `running` and ends
`succeeded` with every point the job produced stored exactly once. Afterwards no Ray or job
process is left (checked by pid) and nothing of the head is left in the data dir.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.layout import experiment_job_dir
from app.jobs import head_state
from app.jobs.ray_head import alive, free_ports
from tests.serve_process import rollout_serve
from tests.service.faults import ProcessReaper, assert_stored_exactly
from tests.service.test_e2e_jobs import QUICK, wait_for

pytestmark = pytest.mark.ray

# About 20 s of training, whatever the machine's load: the stop is wall time.
CONFIG = {**QUICK, "stop": {"wall_seconds": 20}, "checkpoint_every": 4}
FINISHED = {"succeeded", "failed", "stopped"}


def _env(tmp_path: Path) -> dict[str, str | None]:
    """`rollout serve` as a user starts it: no Ray address, so it runs its own local head."""
    return {
        "RAY_ADDRESS": None,
        "ROLLOUT_RAY_ADDRESS": None,
        "ROLLOUT_DATABASE_URL": None,
        "ROLLOUT_FRONTEND_DIR": str(tmp_path / "no-frontend"),
    }


def _experiment(api: httpx.Client, exp_id: int) -> dict[str, Any]:
    response = api.get(f"/experiments/{exp_id}")
    response.raise_for_status()
    return response.json()


def _steps(api: httpx.Client, exp_id: int) -> list[int]:
    response = api.get(f"/experiments/{exp_id}/metrics", params={"names": "env_steps"})
    response.raise_for_status()
    series = response.json()["series"].get("env_steps")
    return series["step"] if series else []


def test_a_killed_api_is_restarted_and_adopts_its_running_job(
    tmp_path: Path, reaper: ProcessReaper
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    port = free_ports(1)[0]
    env = _env(tmp_path)
    reaper.track_heads_of(data_dir)

    # Generous limits: a Ray head starts in 5 s on an idle machine, in 40 s on a busy one.
    with rollout_serve(data_dir, port=port, env=env, start_timeout_s=180) as first:
        api = httpx.Client(base_url=f"{first.url}/api/v1", timeout=30)
        response = api.post("/experiments", json={"name": "outlives its API", "config": CONFIG})
        assert response.status_code == 201, response.text
        exp_id = response.json()["id"]
        assert api.get("/cluster").json()["warmup"] is not None  # a fresh head is warmed up
        wait_for(lambda: len(_steps(api, exp_id)) >= 2, 180, "two iterations")
        record = head_state.load(data_dir)
        assert record is not None and record.owner_pid == first.proc.pid
        tree = reaper.track_tree(first.proc.pid)  # the head, its daemons, the job driver
        assert record.pid in tree
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)
    assert alive({record.pid: record.started}), "the head should outlive the killed API"
    steps_at_kill = len(_steps_from_jsonl(data_dir, exp_id))

    with rollout_serve(data_dir, port=port, env=env, start_timeout_s=180) as second:
        try:
            api = httpx.Client(base_url=f"{second.url}/api/v1", timeout=30)
            assert _experiment(api, exp_id)["status"] == "running"
            found: dict[str, Any] = {}
            deadline = time.monotonic() + 180
            while found.get("status") not in FINISHED:
                assert time.monotonic() < deadline, found
                found = _experiment(api, exp_id)
                time.sleep(0.5)
            assert found["status"] == "succeeded", (found["error"], found["log_tail"])
            events = [e["to_status"] for e in found["events"]]
            assert events == ["pending", "queued", "running", "succeeded"]
            assert "wall_seconds" in found["events"][-1]["reason"]
            # It ran on the first service's head, which the second one adopted.
            adopted = head_state.load(data_dir)
            assert adopted is not None
            assert (adopted.pid, adopted.owner_pid) == (record.pid, second.proc.pid)
            cluster = api.get("/cluster").json()
            assert cluster["address"] == record.address
            assert cluster["warmup"] is None  # an adopted head needs none

            jsonl = experiment_job_dir(data_dir, exp_id) / "metrics.jsonl"
            produced = assert_stored_exactly(api, exp_id, jsonl)
            assert produced > steps_at_kill  # it trained on while the API was down and after
        finally:
            reaper.track_tree(second.proc.pid)

    # Ctrl-C of the second service stopped the adopted head with it: nothing is left.
    assert reaper.survivors() == []
    assert not head_state.path_for(data_dir).exists()
    assert not Path(record.temp_dir).exists()


def _steps_from_jsonl(data_dir: Path, exp_id: int) -> list[str]:
    path = experiment_job_dir(data_dir, exp_id) / "metrics.jsonl"
    return path.read_text().splitlines()


def _driver(processes: dict[int, int]) -> tuple[int, int] | None:
    """(pid, start time) of the job driver (`python -m trainer.job`) among `processes`."""
    for pid, started in processes.items():
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"trainer.job" in argv:
            return pid, started
    return None


def test_a_killed_api_and_head_stop_the_driver_before_the_run_is_failed(
    tmp_path: Path, reaper: ProcessReaper
) -> None:
    """SIGKILL of the API and of its Ray head, restarted at once: the head cannot be adopted,
    so the run is failed, but only after its driver (which outlives its head, in a session of
    its own) is stopped; every point the job wrote is stored, and nothing writes afterwards."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    port = free_ports(1)[0]
    env = _env(tmp_path)
    reaper.track_heads_of(data_dir)
    config = {**QUICK, "stop": {"wall_seconds": 300}, "checkpoint_every": 4}

    with rollout_serve(data_dir, port=port, env=env, start_timeout_s=180) as first:
        api = httpx.Client(base_url=f"{first.url}/api/v1", timeout=30)
        response = api.post("/experiments", json={"name": "loses its head", "config": config})
        assert response.status_code == 201, response.text
        exp_id = response.json()["id"]
        wait_for(lambda: len(_steps(api, exp_id)) >= 2, 180, "two iterations")
        record = head_state.load(data_dir)
        assert record is not None
        driver = _driver(reaper.track_tree(first.proc.pid))  # below the head, below the API
        assert driver is not None
        os.kill(first.proc.pid, signal.SIGKILL)
        os.kill(record.pid, signal.SIGKILL)
        first.proc.wait(timeout=10)

    with rollout_serve(data_dir, port=port, env=env, start_timeout_s=180) as second:
        try:
            api = httpx.Client(base_url=f"{second.url}/api/v1", timeout=30)
            # The lost head's runs are ended before the service answers.
            found = _experiment(api, exp_id)
            assert found["status"] == "failed", found
            assert "Ray head" in found["error"]
            # Its driver was stopped before that: nothing writes behind `failed`.
            assert not alive({driver[0]: driver[1]}), f"driver {driver[0]} still runs"
            jsonl = experiment_job_dir(data_dir, exp_id) / "metrics.jsonl"
            size = jsonl.stat().st_size
            produced = assert_stored_exactly(api, exp_id, jsonl)
            assert produced >= 2
            time.sleep(3)
            assert jsonl.stat().st_size == size
            assert assert_stored_exactly(api, exp_id, jsonl) == produced
        finally:
            reaper.track_tree(second.proc.pid)
    assert reaper.survivors() == []
