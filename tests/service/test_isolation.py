"""Job code cannot reach the service's secrets: the environment a local Ray head passes on is an
allowlist (a credential the service holds for something else never reaches a job), and `rollout
serve` is non-dumpable, so a job's code cannot read its /proc/<pid>/environ (the API token)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.jobs.ray_head import _DROP_PTRACE, LocalRayHead, cluster_environ
from tests.serve_process import rollout_serve
from tests.service import proc_spy

API_TOKEN = "isolation-api-token-0123456789"
AWS_SECRET = "aws-secret-never-in-jobs"
VICTIM = (
    "import sys; from trainer.process_guard import make_undumpable; {call}; "
    "print('ready', flush=True); sys.stdin.read()"
)


def test_the_cluster_environment_is_an_allowlist() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LC_ALL": "C.UTF-8",
        "RAY_AUTH_MODE": "disabled",
        "CUDA_VISIBLE_DEVICES": "0",
        "OMP_NUM_THREADS": "1",
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "GITHUB_TOKEN": "ghp_x",
        "ROLLOUT_API_TOKEN": "x",
        "ROLLOUT_DATABASE_URL": "postgresql://u:p@h/d",
        "PGPASSWORD": "p",
    }
    assert cluster_environ(environ) == {
        key: environ[key]
        for key in (
            "PATH",
            "HOME",
            "LC_ALL",
            "RAY_AUTH_MODE",
            "CUDA_VISIBLE_DEVICES",
            "OMP_NUM_THREADS",
        )
    }


def _as_a_job(argv: list[str]) -> list[str]:
    """As root, a local head's processes lack the capabilities that read any process."""
    return [sys.executable, "-c", _DROP_PTRACE, *argv] if os.geteuid() == 0 else argv


def _read_environ_of(undumpable: bool) -> str:
    """Start a process holding a secret, then read its /proc/<pid>/environ from another one of
    the same OS user and capabilities, the way a job of a local head would."""
    call = "make_undumpable()" if undumpable else "None"
    victim = subprocess.Popen(
        _as_a_job([sys.executable, "-c", VICTIM.format(call=call)]),
        env={**os.environ, "ROLLOUT_API_TOKEN": API_TOKEN},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert victim.stdout is not None and victim.stdout.readline() == b"ready\n"
        reader = [sys.executable, "-c", f"print(open('/proc/{victim.pid}/environ').read())"]
        done = subprocess.run(_as_a_job(reader), capture_output=True, text=True, timeout=30)
        return done.stdout + done.stderr
    finally:
        victim.kill()
        victim.wait(10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_a_non_dumpable_process_hides_its_environment_from_its_own_user() -> None:
    assert API_TOKEN in _read_environ_of(undumpable=False)
    seen = _read_environ_of(undumpable=True)
    assert API_TOKEN not in seen and "PermissionError" in seen


@pytest.mark.ray
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_a_job_cannot_read_the_api_token_nor_other_credentials(
    ray_head: LocalRayHead, tmp_path: Path
) -> None:
    dump_dir, data_dir = tmp_path / "spy", tmp_path / "data"
    dump_dir.mkdir()
    data_dir.mkdir()
    env = {
        "ROLLOUT_API_TOKEN": API_TOKEN,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "ROLLOUT_RAY_ADDRESS": ray_head.dashboard_url,
        "ROLLOUT_RAY_WARMUP": "false",
    }
    headers = {"Authorization": f"Bearer {API_TOKEN}"}
    with rollout_serve(data_dir, env=env, stop_timeout_s=20) as server:
        config = {
            "env_id": f"tests.service.proc_spy:{proc_spy.ENV_ID}",
            "env_config": {"dump_dir": str(dump_dir), "api_pid": server.proc.pid},
            "num_env_runners": 0,
            "train_batch_size_per_learner": 64,
            "minibatch_size": 64,
            "num_epochs": 1,
            "stop": {"env_steps": 64},
            "checkpoint_every": 0,
        }
        api = httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=30)
        created = api.post("/experiments", json={"name": "spy", "config": config})
        assert created.status_code == 201, created.text
        exp_id = created.json()["id"]
        deadline = time.monotonic() + 120
        while not list(dump_dir.glob("spy-*.json")) and time.monotonic() < deadline:
            status = api.get(f"/experiments/{exp_id}").json()
            assert status["status"] != "failed", status
            time.sleep(0.5)
        api.post(f"/experiments/{exp_id}/stop")
        api.close()
    records = [json.loads(p.read_text()) for p in dump_dir.glob("spy-*.json")]
    assert records, "the job built its env"
    for record in records:
        assert "error" in record["api_environ"], "the job read the API's environment"
        assert "PermissionError" in record["api_environ"]["error"]
        assert "AWS_SECRET_ACCESS_KEY" not in record["environ"]
        for value in record["environ"].values():
            assert API_TOKEN not in value and AWS_SECRET not in value
