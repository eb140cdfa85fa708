"""End to end on the real local Ray cluster: a study of tiny CartPole trials goes through the
service's queue (suggested by the reconciler, run as Ray jobs, followed through the metrics
they report), one trial is pruned by the median rule and stopped with a final checkpoint, the
study ends `succeeded`, and its best trial forks into a normal run (its parent the trial's)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from app.jobs.ray_head import LocalRayHead
from tests.service.test_e2e_jobs import LiveService, serving, wait_for

pytestmark = pytest.mark.ray

BUDGET = 49_152  # env steps a trial may run
TINY = {
    "env_id": "CartPole-v1",
    "num_envs_per_env_runner": 4,
    "train_batch_size_per_learner": 512,
    "minibatch_size": 128,
    "num_epochs": 2,
    # Long enough that the reconciler's ticks (every second) see each trial run past its first
    # intervals: a trial that ends between two ticks is never pruned. 16,384 env steps (a few
    # seconds) once ended the pruned trial first on a loaded machine.
    "stop": {"env_steps": BUDGET},
    "checkpoint_every": 0,
}
ENDED = {"succeeded", "failed", "stopped"}


@pytest.fixture(scope="module")
def service(ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with serving(tmp_path_factory.mktemp("e2e-studies"), ray_head.address) as live:
        yield live


def test_a_study_suggests_prunes_finishes_and_its_best_trial_forks(service: LiveService) -> None:
    # The random sampler seeded 5 suggests lr 3e-3, then 1e-7 (tests pin the suggestions'
    # determinism elsewhere). Minimising the policy's entropy: a trial that can
    # hardly move its weights (1e-7) keeps the initial entropy, above trial 0's at every
    # interval, so the median rule prunes it as soon as it reports.
    response = service.http.post(
        "/studies",
        json={
            "name": "e2e study",
            "config": TINY,
            "space": {"lr": {"type": "categorical", "choices": [3e-3, 1e-7]}},
            "n_trials": 2,
            "max_parallel": 1,
            "seed": 5,
            "objective": {"metric": "entropy", "direction": "minimize", "k": 2},
            "sampler": {"kind": "random"},
            "pruner": {
                "kind": "median",
                "interval_env_steps": 1024,
                "n_startup_trials": 1,
                "n_warmup_intervals": 0,
            },
        },
    )
    assert response.status_code == 201, response.text
    study_id = response.json()["id"]
    state: dict[str, Any] = {}

    def ended() -> bool:
        state.update(service.http.get(f"/studies/{study_id}").json())
        return state["status"] == "succeeded"

    wait_for(ended, 300, "the study to finish", lambda: state.get("trials"))
    trials = state["trials"]
    assert [t["params"]["lr"] for t in trials] == [3e-3, 1e-7]
    first, pruned = trials
    assert first["state"] == "complete" and first["experiment_status"] == "succeeded"
    assert first["value"] is not None and first["value"] < 0.69
    assert set(first["intermediate"]) == {str(1024 * i) for i in range(1, BUDGET // 1024 + 1)}
    assert pruned["state"] == "pruned" and pruned["experiment_status"] == "stopped"
    assert pruned["note"].startswith("median pruner: entropy")
    assert pruned["env_steps"] < BUDGET  # stopped before its budget
    events = service.http.get(f"/experiments/{pruned['experiment_id']}/events").json()
    assert any(e["reason"].startswith(f"pruned by study {study_id}") for e in events)
    checkpoints = service.http.get(f"/experiments/{pruned['experiment_id']}/checkpoints").json()
    assert checkpoints, "a pruned trial keeps a final checkpoint"
    assert state["counts"] == {"complete": 1, "pruned": 1} and state["best_trial"] == 0

    best = service.http.get(f"/studies/{study_id}/best").json()
    assert best["trial"]["number"] == state["best_trial"]
    fork = service.http.post(
        "/experiments",
        json={
            "name": "best of e2e study",
            "config": best["config"],
            "parent_id": best["trial"]["experiment_id"],
        },
    )
    assert fork.status_code == 201, fork.text
    forked = fork.json()
    assert forked["config"]["lr"] == 3e-3 and forked["config"]["seed"] == TINY.get("seed", 0)
    assert forked["parent_id"] == best["trial"]["experiment_id"]
    assert service.http.post(f"/experiments/{forked['id']}/stop").status_code == 200
    assert service.wait_status(forked["id"], ENDED, 60)["status"] == "stopped"
