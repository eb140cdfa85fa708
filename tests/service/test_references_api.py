"""Reference curves: every shipped file is valid and small, and GET /references serves them by
env id (an empty list for an env without one; a bad filter is a 422). No SQL is involved."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.main import create_app
from app.references import service
from app.references.schemas import Band, ReferenceCurves

API = "/api/v1/references"
FILES = sorted(service.DATA_DIR.glob("*.json"))


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = Settings(
        data_dir=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'rollout.db'}",
        jobs_enabled=False,
        frontend_dir=tmp_path / "no-frontend",
    )
    with TestClient(create_app(settings)) as test_client:
        yield test_client


def test_cartpole_reference_is_shipped():
    assert "CartPole-v1" in {
        ReferenceCurves.model_validate_json(f.read_text()).env_id for f in FILES
    }


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_shipped_file_is_a_valid_compact_reference(path: Path):
    ref = ReferenceCurves.model_validate_json(path.read_text())
    assert path.name == ref.env_id.replace("/", "__") + ".json"
    assert path.stat().st_size < 40_000
    assert len(ref.seeds) >= 3 and [r.seed for r in ref.runs] == ref.seeds
    assert "rl-baselines3-zoo" in ref.source and "stable-baselines3" in ref.source
    assert ref.command == "make -C benchmarks references" and ref.settings["n_envs"] >= 1
    for band in (ref.env_steps, ref.wall_time_s):
        assert 50 <= len(band.x) <= 250
        assert all(
            lo <= mean <= hi for lo, mean, hi in zip(band.min, band.mean, band.max, strict=True)
        )
    # The steps grid spans the runs: up to the last episode of the longest one.
    assert ref.env_steps.x[-1] == max(r.env_steps for r in ref.runs)
    assert ref.env_steps.x[-1] <= ref.budget_env_steps
    # The band's end is every run's final window mean.
    finals = [r.final_return for r in ref.runs]
    assert ref.env_steps.min[-1] == pytest.approx(min(finals), abs=1e-3)
    assert ref.env_steps.max[-1] == pytest.approx(max(finals), abs=1e-3)


def test_list_and_filter_by_env_id(client: TestClient):
    everything = client.get(API)
    assert everything.status_code == 200
    env_ids = [r["env_id"] for r in everything.json()["items"]]
    assert len(env_ids) == len(FILES) and "CartPole-v1" in env_ids

    one = client.get(API, params={"env_id": "CartPole-v1"})
    assert one.status_code == 200
    (ref,) = one.json()["items"]
    assert ref["env_id"] == "CartPole-v1" and ref["label"] == "SB3 PPO (rl-zoo)"
    on_disk = json.loads((service.DATA_DIR / "CartPole-v1.json").read_text())
    assert ref["env_steps"]["mean"] == on_disk["env_steps"]["mean"]
    assert set(ref["wall_time_s"]) == {"x", "mean", "min", "max"}

    none = client.get(API, params={"env_id": "MountainCar-v0x"})
    assert none.status_code == 200 and none.json() == {"items": []}


def test_bad_filter_is_a_422_naming_it(client: TestClient):
    response = client.get(API, params={"env_id": "x" * 201})
    assert response.status_code == 422
    assert [f["field"] for f in response.json()["error"]["fields"]] == ["query.env_id"]


def test_a_malformed_band_is_rejected():
    with pytest.raises(ValueError, match="same length"):
        Band(x=[1, 2], mean=[1], min=[1], max=[1])
    with pytest.raises(ValueError, match="increase"):
        Band(x=[2, 1], mean=[1, 1], min=[1, 1], max=[1, 1])
