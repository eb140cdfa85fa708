"""Small hardening: a NUL in env_id and a tiny EnvRunner CPU share are 422s, `rollout serve`
refuses a blank or short API token off loopback, and the data dir is private (0700, SQLite 0600:
Ray's session and log dirs inside are made 0777 by Ray itself)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from tests.service.conftest import SMALL_CONFIG

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("env_id", "CartPole-v1\x00", "NUL"),
        ("num_cpus_per_env_runner", 0.01, "greater than or equal to 0.1"),
    ],
)
def test_refused_config_values(client: TestClient, field: str, value: Any, says: str) -> None:
    config = {**SMALL_CONFIG, field: value, "num_env_runners": 1}
    response = client.post("/api/v1/experiments", json={"name": "x", "config": config})
    assert response.status_code == 422, response.text
    assert field in response.text and says in response.text


def test_the_smallest_env_runner_share_is_accepted(client: TestClient) -> None:
    config = {**SMALL_CONFIG, "num_cpus_per_env_runner": 0.1, "num_env_runners": 1}
    response = client.post("/api/v1/experiments", json={"name": "x", "config": config})
    assert response.status_code == 201, response.text


def _serve(tmp_path: Path, token: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROLLOUT_API_TOKEN": token, "ROLLOUT_JOBS_ENABLED": "false"}
    argv = [sys.executable, "-m", "app.cli", "serve", "--host", "0.0.0.0", "--port", "0"]
    argv += ["--data-dir", str(tmp_path / "data")]
    # A token the check lets through would start the server: the timeout fails the test then.
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize(("token", "says"), [("   ", "blank"), ("short-token", "at least 16")])
def test_serve_refuses_a_weak_api_token_off_loopback(tmp_path: Path, token: str, says: str) -> None:
    done = _serve(tmp_path, token)
    assert done.returncode == 2, done.stderr[-2000:]
    assert says in done.stderr and "Traceback" not in done.stderr


def test_the_data_dir_is_private(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", jobs_enabled=False, frontend_dir=tmp_path)
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").status_code == 200
    assert settings.data_dir.stat().st_mode & 0o777 == 0o700
    assert (settings.data_dir / "rollout.db").stat().st_mode & 0o777 == 0o600
