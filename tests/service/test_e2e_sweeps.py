"""End to end on the real local Ray cluster: a sweep of 2 learning rates x 2 seeds of tiny
CartPole runs goes through the service's queue to completion with at most `max_parallel`
members running at once; stopping a sweep stops its running member and its queued one never
starts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from app.jobs.ray_head import LocalRayHead
from tests.service.test_e2e_jobs import LiveService, serving, wait_for

pytestmark = pytest.mark.ray

TINY = {
    "env_id": "CartPole-v1",
    "num_envs_per_env_runner": 4,
    "train_batch_size_per_learner": 512,
    "minibatch_size": 128,
    "num_epochs": 2,
    "stop": {"env_steps": 3072},
    "checkpoint_every": 0,
}
ENDLESS = {**TINY, "stop": {"env_steps": 50_000_000}}
ENDED = {"succeeded", "failed", "stopped"}


@pytest.fixture(scope="module")
def service(ray_head: LocalRayHead, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with serving(tmp_path_factory.mktemp("e2e-sweeps"), ray_head.address) as live:
        yield live


def _sweep(live: LiveService, **body: Any) -> dict[str, Any]:
    response = live.http.post("/sweeps", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def _sweep_state(live: LiveService, sweep_id: int) -> dict[str, Any]:
    response = live.http.get(f"/sweeps/{sweep_id}")
    response.raise_for_status()
    return response.json()


def _max_overlap(intervals: list[tuple[dt.datetime, dt.datetime]]) -> int:
    edges = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    running = peak = 0
    for _, delta in edges:  # an end sorts before a start at the same instant
        running += delta
        peak = max(peak, running)
    return peak


def test_a_sweep_runs_to_completion_with_max_parallel_respected(service: LiveService) -> None:
    sweep = _sweep(
        service,
        name="e2e lr sweep",
        config=TINY,
        grid={"lr": [1e-3, 3e-3]},
        seeds=[0, 1],
        max_parallel=2,
    )
    assert sweep["size"] == 4
    state: dict[str, Any] = {}

    def finished() -> bool:
        state.update(_sweep_state(service, sweep["id"]))
        return all(m["status"] in ENDED for m in state["members"])

    wait_for(finished, 300, "the sweep to finish", lambda: state.get("counts"))
    members = state["members"]
    assert state["status"] == "succeeded", [(m["status"], m["error"]) for m in members]
    intervals = [
        (dt.datetime.fromisoformat(m["started_at"]), dt.datetime.fromisoformat(m["finished_at"]))
        for m in members
    ]
    assert _max_overlap(intervals) <= 2
    for m in members:
        assert m["ray_job_id"].startswith(f"rollout-exp{m['id']}-")
        assert m["env_steps"] >= 3072
    response = service.http.get(f"/sweeps/{sweep['id']}/metrics", params={"points": 20})
    response.raise_for_status()
    result = response.json()["metrics"]["episode_return_mean"]
    assert [g["label"] for g in result["groups"]] == ["lr=0.001", "lr=0.003"]
    for group in result["groups"]:
        assert group["final"]["n"] == 2
        assert max(group["n"]) == 2
        reached = [i for i, n in enumerate(group["n"]) if n == 2]
        assert reached and all(group["mean"][i] is not None for i in reached)
        assert group["final"]["min"] <= group["final"]["mean"] <= group["final"]["max"]


def test_stopping_a_sweep_stops_its_running_member_and_its_queued_one_never_starts(
    service: LiveService,
) -> None:
    sweep = _sweep(service, name="e2e stop", config=ENDLESS, grid={}, seeds=[0, 1], max_parallel=1)
    first, second = (m["id"] for m in sweep["members"])
    service.wait_status(first, {"running"}, 60)
    wait_for(lambda: (service.experiment(first)["env_steps"] or 0) > 0, 90, "first metrics")
    assert service.experiment(second)["status"] == "queued"  # held by max_parallel = 1
    stopped = service.http.post(f"/sweeps/{sweep['id']}/stop")
    assert stopped.status_code == 200, stopped.text
    statuses = {m["id"]: m["status"] for m in stopped.json()["members"]}
    assert statuses == {first: "stopping", second: "stopped"}
    assert service.wait_status(first, ENDED, 90)["status"] == "stopped"
    later = service.experiment(second)
    assert later["status"] == "stopped" and later["ray_job_id"] is None
    assert later["started_at"] is None
