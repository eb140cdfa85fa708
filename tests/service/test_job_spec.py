"""The job's spec (GET /jobs/experiments/{id}) is the typed contract trainer/wire.py defines: the
config the service validated when it stored it, read back as a PPOConfig on both sides (a stored
config that no longer validates: tests/service/test_stored_config.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient

from trainer.config import PPOConfig
from trainer.wire import ExperimentSpec

JOBS = "/api/v1/jobs/experiments"


def test_the_spec_is_the_stored_config_typed(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
    transition: Callable[..., None],
) -> None:
    created = create_experiment(config={"env_id": "CartPole-v1", "lr": 1e-3})
    transition(created["id"], "queued", "running")
    token = job_token(created["id"])
    response = client.get(f"{JOBS}/{created['id']}", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200, response.text
    spec = ExperimentSpec.model_validate(response.json())
    assert spec.experiment_id == created["id"] and spec.resume_from_checkpoint_id is None
    assert isinstance(spec.config, PPOConfig)
    assert spec.config == PPOConfig.model_validate(created["config"])
    assert spec.config.lr == 1e-3 and spec.config.preset == "classic_control"
