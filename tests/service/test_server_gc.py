"""A server process tunes the garbage collector once its app has started (full collections
paused it for 100-250 ms under load); apps built by tests leave the collector alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.main import GC_THRESHOLDS

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import gc, json, sys
from pathlib import Path
from fastapi.testclient import TestClient
from app.core.config import Settings
from app.main import create_app

data = Path(sys.argv[1])
settings = Settings(data_dir=data, jobs_enabled=False, frontend_dir=data / "none")
before = gc.get_threshold()
app = create_app(settings, server_gc=sys.argv[2] == "1")
with TestClient(app, base_url="http://127.0.0.1") as client:
    assert client.get("/health").status_code == 200
    print(json.dumps([gc.get_freeze_count(), gc.get_threshold(), before]))
"""


def _probe(tmp_path: Path, server_gc: bool) -> tuple[int, list[int], list[int]]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), "1" if server_gc else "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=50,
        check=True,
    )
    frozen, threshold, before = json.loads(out.stdout.strip().splitlines()[-1])
    return frozen, threshold, before


def test_a_server_app_freezes_what_startup_left_and_collects_young_objects_less_often(
    tmp_path: Path,
) -> None:
    frozen, threshold, before = _probe(tmp_path / "a", server_gc=True)
    assert frozen > 50_000  # FastAPI, SQLAlchemy, pydantic, the schemas, Alembic
    assert tuple(threshold) == GC_THRESHOLDS
    frozen, threshold, before = _probe(tmp_path / "b", server_gc=False)
    assert frozen == 0 and threshold == before


def test_rollout_serve_builds_a_server_app(monkeypatch, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}

    def fake_create_app(settings: Any, **kwargs: Any) -> str:
        seen.update(kwargs)
        return "app"

    monkeypatch.setattr("app.main.create_app", fake_create_app)
    monkeypatch.setattr("uvicorn.run", lambda app, **kwargs: seen.setdefault("ran", app))
    monkeypatch.setenv("ROLLOUT_JOBS_ENABLED", "false")
    assert main(["serve", "--data-dir", str(tmp_path), "--port", "0"]) == 0
    assert seen == {"server_gc": True, "ran": "app"}
