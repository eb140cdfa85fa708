"""Studies API on SQLite and PostgreSQL: create (every bad range, choice, field, objective or
count a 422 naming it, nothing stored), the study's loop driven tick by tick the way the
reconciler drives it (suggest, follow runs through their reported metrics, prune, settle,
finish), stop, delete, best, and a restart or a second process in the middle of a study."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.db import transaction
from app.studies import service
from tests.service.conftest import SMALL_CONFIG

API = "/api/v1"
BASE = {**SMALL_CONFIG, "stop": {"env_steps": 10_000}}
SPACE = {
    "lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
    "num_epochs": {"type": "int", "low": 1, "high": 8},
    "model.hidden_sizes": {"type": "categorical", "choices": [[32], [64, 64]]},
}


def _study(client: TestClient, **body: Any) -> Any:
    payload: dict[str, Any] = {"name": "tune", "config": BASE, "space": SPACE, "n_trials": 4}
    payload.update(body)
    return client.post(f"{API}/studies", json=payload)


def _created(client: TestClient, **body: Any) -> dict[str, Any]:
    response = _study(client, **body)
    assert response.status_code == 201, response.text
    return response.json()


def _fields(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {f["field"]: f["message"] for f in response.json()["error"]["fields"]}


def _advance(app: FastAPI, study_id: int) -> service.Advance:
    with transaction(app.state.sessionmaker) as session:
        return service.advance(session, study_id)


def _detail(client: TestClient, study_id: int) -> dict[str, Any]:
    response = client.get(f"{API}/studies/{study_id}")
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def run_trial(
    client: TestClient, job_token: Callable[[int], str], transition: Callable[..., None]
) -> Callable[..., None]:
    """Play a trial's run as its job would: start it, report `values` at `steps`, end it."""

    def play(
        experiment_id: int, values: list[float], steps: list[int], end: str | None = None
    ) -> None:
        status = client.get(f"{API}/experiments/{experiment_id}").json()["status"]
        if status in ("pending", "queued"):
            transition(experiment_id, "running")
        rows = [
            {"step": s, "time_s": float(i), "values": {"episode_return_mean": v}}
            for i, (s, v) in enumerate(zip(steps, values, strict=True))
        ]
        response = client.post(
            f"{API}/jobs/experiments/{experiment_id}/metrics",
            json={"rows": rows},
            headers={"Authorization": f"Bearer {job_token(experiment_id)}"},
        )
        assert response.status_code == 200, response.text
        if end is not None:
            transition(experiment_id, end)

    return play


# --- create ---------------------------------------------------------------------------------------


def test_a_study_is_stored_and_its_first_trials_are_suggested_by_the_loop(
    client: TestClient, app: FastAPI
) -> None:
    study = _created(client, max_parallel=2)
    assert study["status"] == "running" and study["trials"] == []
    assert study["interval_env_steps"] == 1_000  # a tenth of the 10,000-step budget
    assert study["objective"] == {
        "metric": "episode_return_mean", "direction": "maximize", "reduce": "last_k", "k": 5
    }  # fmt: skip
    assert _advance(app, study["id"]).created == 2
    assert _advance(app, study["id"]).created == 0  # max_parallel trials are active
    trials = _detail(client, study["id"])["trials"]
    assert [t["number"] for t in trials] == [0, 1]
    for trial in trials:
        run = client.get(f"{API}/experiments/{trial['experiment_id']}").json()
        assert run["status"] == "pending" and run["name"] == f"tune #{trial['number']}"
        params = trial["params"]
        assert 1e-4 <= params["lr"] <= 1e-2 and 1 <= params["num_epochs"] <= 8
        assert params["model.hidden_sizes"] in ([32], [64, 64])
        assert run["config"]["lr"] == params["lr"]
        assert run["config"]["num_epochs"] == params["num_epochs"]
        assert run["config"]["model"]["hidden_sizes"] == params["model.hidden_sizes"]
        assert run["config"]["train_batch_size_per_learner"] == 256  # the base config holds
    events = client.get(f"{API}/experiments/{trials[0]['experiment_id']}/events").json()
    assert events[0]["reason"] == f"trial 0 of study {study['id']}"
    # A trial's experiment page finds its study; any other experiment finds none.
    trial_of = client.get(f"{API}/experiments/{trials[1]['experiment_id']}/trial").json()
    assert trial_of == {
        "study_id": study["id"], "study_name": "tune", "number": 1, "state": "running",
        "note": None,
    }  # fmt: skip


def test_an_experiment_that_is_no_trial_has_no_study_and_a_missing_one_is_a_404(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    plain = create_experiment("plain")
    response = client.get(f"{API}/experiments/{plain['id']}/trial")
    assert response.status_code == 200 and response.json() is None
    assert client.get(f"{API}/experiments/999999/trial").status_code == 404


def test_the_same_seed_and_history_give_the_same_suggestions(
    client: TestClient, app: FastAPI
) -> None:
    first = _created(client, max_parallel=3, seed=7)
    second = _created(client, max_parallel=3, seed=7)
    other = _created(client, max_parallel=3, seed=8)
    for study in (first, second, other):
        _advance(app, study["id"])

    def params(study: dict[str, Any]) -> list[dict[str, Any]]:
        return [t["params"] for t in _detail(client, study["id"])["trials"]]

    assert params(first) == params(second)
    assert params(first) != params(other)
    assert len({t["lr"] for t in params(first)}) == 3  # parallel trials do not repeat a point


BAD_STUDIES: list[tuple[dict[str, Any], str, str]] = [
    (
        {"space": {"lr": {"type": "float", "low": 0.01, "high": 0.001}}},
        "space.lr.low",
        "> high",
    ),
    (
        {"space": {"lr": {"type": "float", "low": 0, "high": 0.001, "log": True}}},
        "space.lr.low",
        "log scale needs low > 0",
    ),
    (
        {"space": {"lrr": {"type": "float", "low": 0, "high": 1}}},
        "space.lrr",
        "did you mean lr",
    ),
    (
        {"space": {"env_id": {"type": "float", "low": 0, "high": 1}}},
        "space.env_id.type",
        "not a number",
    ),
    (
        {"space": {"num_epochs": {"type": "float", "low": 1, "high": 4}}},
        "space.num_epochs.type",
        "use an int range",
    ),
    (
        {"space": {"lr": {"type": "float", "low": 1e-4, "high": 5.0}}},
        "space.lr.high",
        "less than or equal to 1",
    ),
    (
        {"space": {"model.hidden_sizes": {"type": "categorical", "choices": []}}},
        "space.model.hidden_sizes.categorical.choices",
        "at least 1",
    ),
    (
        {"space": {"model.activation": {"type": "categorical", "choices": ["tanh", "gelu"]}}},
        "space.model.activation.choices.1",
        "",
    ),
    ({"space": {"seed": {"type": "int", "low": 0, "high": 9}}}, "space.seed", "seeds"),
    ({"space": {}}, "space", "at least 1"),
    ({"objective": {"metric": "episode_retrun_mean"}}, "objective.metric", "not a metric"),
    ({"n_trials": 0}, "n_trials", "greater than or equal to 1"),
    ({"n_trials": 501}, "n_trials", "less than or equal to 500"),
    (
        {"config": {**SMALL_CONFIG, "stop": {"env_steps": None, "wall_seconds": 60}}},
        "config.stop.env_steps",
        "budget",
    ),
    ({"config": {**BASE, "env_id": "CartPol-v1"}}, "config.env_id", "CartPole-v1"),
    ({"pruner": {"interval_env_steps": 1}}, "pruner.interval_env_steps", "at most"),
]


def test_bad_studies_are_refused_naming_the_field_and_nothing_is_stored(
    client: TestClient,
) -> None:
    for change, field, words in BAD_STUDIES:  # one app for all: each case stores nothing
        fields = _fields(_study(client, **change))
        assert field in fields, (change, fields)
        assert words in fields[field], (change, fields[field])
        assert client.get(f"{API}/studies").json()["items"] == []
        assert client.get(f"{API}/experiments").json()["items"] == []


# --- the loop ------------------------------------------------------------------------------------


def test_trials_are_followed_pruned_settled_and_the_study_finishes(
    client: TestClient,
    app: FastAPI,
    run_trial: Callable[..., None],
    transition: Callable[..., None],
) -> None:
    pruner = {"kind": "median", "n_startup_trials": 1, "n_warmup_intervals": 1}
    study = _created(client, n_trials=3, max_parallel=2, pruner=pruner, sampler={"kind": "random"})
    sid = study["id"]
    _advance(app, sid)
    first, second = (t["experiment_id"] for t in _detail(client, sid)["trials"])
    steps = [1_024 * i for i in range(1, 11)]  # the interval is 1,000 env steps
    # Trial 0 learns and meets its budget; its value is the mean of the last 5 reports.
    run_trial(first, [10.0 * i for i in range(1, 11)], steps, end="succeeded")
    _advance(app, sid)
    trials = _detail(client, sid)["trials"]
    assert trials[0]["state"] == "complete"
    assert trials[0]["value"] == pytest.approx((60 + 70 + 80 + 90 + 100) / 5)
    assert trials[0]["intermediate"]["2000"] == pytest.approx(10.0)  # only the 1,024 point
    assert trials[0]["intermediate"]["10000"] == pytest.approx((50 + 60 + 70 + 80 + 90) / 5)
    assert len(trials) == 3 and trials[2]["state"] == "running"  # trial 0's place refilled
    # Trial 1 lags trial 0 at the same steps: past the warm-up interval it is pruned.
    run_trial(second, [1.0], steps[:1])
    _advance(app, sid)
    assert _detail(client, sid)["trials"][1]["state"] == "running"  # within its warm-up
    run_trial(second, [2.0], steps[1:2])
    done = _advance(app, sid)
    trial = _detail(client, sid)["trials"][1]
    assert trial["state"] == "pruning" and done.stopping == [second]
    # At 2,000 env steps each trial's objective covers its points up to there (step 1,024).
    assert trial["note"] == (
        "median pruner: episode_return_mean 1 (best so far) is below the median 10 "
        "of 1 finished trials at 2,000 env steps"
    )
    run = client.get(f"{API}/experiments/{second}").json()
    assert run["status"] == "stopping"
    events = client.get(f"{API}/experiments/{second}/events").json()
    assert events[-1]["reason"].startswith(f"pruned by study {sid}: median pruner")
    transition(second, "stopped")
    _advance(app, sid)
    trials = _detail(client, sid)["trials"]
    assert trials[1]["state"] == "pruned" and trials[1]["note"] == trial["note"]
    assert len(trials) == 3  # n_trials reached: nothing more is suggested
    # The last trial fails: the study has ended, its best is trial 0.
    run_trial(trials[2]["experiment_id"], [5.0], steps[:1], end="failed")
    _advance(app, sid)
    detail = _detail(client, sid)
    assert detail["status"] == "succeeded"
    assert detail["counts"] == {"complete": 1, "pruned": 1, "failed": 1}
    assert detail["best_trial"] == 0 and detail["best_value"] == pytest.approx(80.0)
    best = client.get(f"{API}/studies/{sid}/best").json()
    assert best["trial"]["number"] == 0
    assert best["config"]["lr"] == trials[0]["params"]["lr"]
    assert _advance(app, sid) == service.Advance()  # an ended study is left alone
    with transaction(app.state.sessionmaker) as session:
        assert sid not in service.unfinished_ids(session)


def test_the_percentile_pruner_stops_only_the_worst_share(
    client: TestClient, app: FastAPI, run_trial: Callable[..., None]
) -> None:
    """Keeping the top 75 %: of four finished trials at 10, 20, 30 and 40, the edge is 17.5;
    a trial at 15 is stopped, one at 20 (below the median, 25) goes on."""
    pruner = {"kind": "percentile", "percentile": 75, "n_startup_trials": 4,
              "n_warmup_intervals": 1}  # fmt: skip
    study = _created(client, n_trials=6, max_parallel=4, pruner=pruner, sampler={"kind": "random"})
    sid = study["id"]
    _advance(app, sid)
    steps = [1_024 * i for i in range(1, 11)]
    for trial, value in zip(_detail(client, sid)["trials"], (10.0, 20.0, 30.0, 40.0), strict=True):
        run_trial(trial["experiment_id"], [value] * 10, steps, end="succeeded")
    _advance(app, sid)
    trials = _detail(client, sid)["trials"]
    assert [t["state"] for t in trials] == ["complete"] * 4 + ["running"] * 2
    low, fair = trials[4]["experiment_id"], trials[5]["experiment_id"]
    run_trial(low, [15.0, 15.0], steps[:2])
    run_trial(fair, [20.0, 20.0], steps[:2])
    done = _advance(app, sid)
    trials = _detail(client, sid)["trials"]
    assert [t["state"] for t in trials[4:]] == ["pruning", "running"] and done.stopping == [low]
    assert trials[4]["note"] == (
        "percentile pruner: episode_return_mean 15 (best so far) is below the top 75 % edge 17.5 "
        "of 4 finished trials at 2,000 env steps"
    )


def test_asha_prunes_a_trial_outside_the_top_of_its_rung(
    client: TestClient, app: FastAPI, run_trial: Callable[..., None]
) -> None:
    pruner = {"kind": "asha", "min_intervals": 1, "reduction_factor": 2}
    study = _created(client, n_trials=3, max_parallel=3, pruner=pruner, sampler={"kind": "random"})
    sid = study["id"]
    _advance(app, sid)
    runs = [t["experiment_id"] for t in _detail(client, sid)["trials"]]
    run_trial(runs[0], [50.0], [1_000])  # the first rung: one interval (1,000 env steps)
    _advance(app, sid)
    run_trial(runs[1], [40.0], [1_000])
    run_trial(runs[2], [60.0], [1_000])
    _advance(app, sid)
    trials = _detail(client, sid)["trials"]
    # Trial 1 is below the top half of {50, 40}; trial 2 leads the rung and goes on.
    assert [t["state"] for t in trials] == ["running", "pruning", "running"]
    assert trials[1]["note"] == (
        "asha pruner: episode_return_mean 40 at 1,000 env steps (completed_rung_0) is not in "
        "the top 1/2 of the trials that reached that rung"
    )


def test_a_trial_whose_run_logged_no_objective_fails_with_the_reason(
    client: TestClient, app: FastAPI, transition: Callable[..., None]
) -> None:
    study = _created(client, n_trials=1, max_parallel=1)
    _advance(app, study["id"])
    run_id = _detail(client, study["id"])["trials"][0]["experiment_id"]
    transition(run_id, "running", "succeeded")
    _advance(app, study["id"])
    trial = _detail(client, study["id"])["trials"][0]
    assert trial["state"] == "failed"
    assert trial["note"] == "its run logged no finite episode_return_mean"
    assert client.get(f"{API}/studies/{study['id']}/best").status_code == 404


def test_params_that_make_no_valid_config_fail_their_trial_and_the_study_goes_on(
    client: TestClient, app: FastAPI
) -> None:
    # Both ends of the range are valid; 0 between them is not (sde_sample_freq is -1 or >= 1).
    space = {"sde_sample_freq": {"type": "int", "low": -1, "high": 1}}
    study = _created(client, space=space, n_trials=3, max_parallel=2, sampler={"kind": "random"})
    assert _advance(app, study["id"]).created == 1  # trial 0 (0) failed, trial 1 (1) runs
    trials = _detail(client, study["id"])["trials"]
    assert [t["params"]["sde_sample_freq"] for t in trials] == [0, 1, 0]
    assert [t["state"] for t in trials] == ["failed", "running", "failed"]
    assert trials[0]["experiment_id"] is None and trials[0]["experiment_status"] is None
    assert trials[0]["note"] == (
        "its params make no valid config (sde_sample_freq: "
        "sde_sample_freq must be -1 (once per rollout) or at least 1)"
    )
    assert len(client.get(f"{API}/experiments").json()["items"]) == 1


# --- stop, delete ------------------------------------------------------------------------------


def test_stop_ends_waiting_trials_stops_running_ones_and_suggests_nothing_more(
    client: TestClient, app: FastAPI, transition: Callable[..., None]
) -> None:
    study = _created(client, n_trials=6, max_parallel=2)
    sid = study["id"]
    _advance(app, sid)
    running, waiting = (t["experiment_id"] for t in _detail(client, sid)["trials"])
    transition(running, "running")
    stopped = client.post(f"{API}/studies/{sid}/stop")
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopping"
    assert client.get(f"{API}/experiments/{running}").json()["status"] == "stopping"
    assert client.get(f"{API}/experiments/{waiting}").json()["status"] == "stopped"
    assert client.delete(f"{API}/studies/{sid}").status_code == 409
    _advance(app, sid)
    assert len(_detail(client, sid)["trials"]) == 2
    transition(running, "stopped")
    _advance(app, sid)
    detail = _detail(client, sid)
    assert detail["status"] == "stopped"
    assert [t["state"] for t in detail["trials"]] == ["stopped", "stopped"]
    assert detail["trials"][0]["note"] == f"stopped with study {sid}"


def test_delete_removes_the_study_its_trials_and_their_runs_only(
    client: TestClient, app: FastAPI, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    bystander = create_experiment("not in the study")
    keep = _created(client, n_trials=1, max_parallel=1, name="kept")
    study = _created(client, n_trials=2, max_parallel=2)
    _advance(app, keep["id"])
    _advance(app, study["id"])
    client.post(f"{API}/studies/{study['id']}/stop")
    _advance(app, study["id"])
    runs = [t["experiment_id"] for t in _detail(client, study["id"])["trials"]]
    assert client.delete(f"{API}/studies/{study['id']}").status_code == 204
    assert client.get(f"{API}/studies/{study['id']}").status_code == 404
    for run_id in runs:
        assert client.get(f"{API}/experiments/{run_id}").status_code == 404
    assert client.get(f"{API}/experiments/{bystander['id']}").status_code == 200
    assert len(_detail(client, keep["id"])["trials"]) == 1
    assert [s["name"] for s in client.get(f"{API}/studies").json()["items"]] == ["kept"]


def test_deleting_a_trials_run_alone_keeps_the_trial(
    client: TestClient, app: FastAPI, run_trial: Callable[..., None]
) -> None:
    study = _created(client, n_trials=2, max_parallel=1)
    _advance(app, study["id"])
    run_id = _detail(client, study["id"])["trials"][0]["experiment_id"]
    run_trial(run_id, [3.0], [1_024], end="succeeded")
    _advance(app, study["id"])
    assert client.delete(f"{API}/experiments/{run_id}").status_code == 204
    trial = _detail(client, study["id"])["trials"][0]
    assert trial["experiment_id"] is None and trial["state"] == "complete"
    assert trial["value"] == 3.0


# --- restarts and several processes ------------------------------------------------------------


def test_a_study_goes_on_after_a_restart_without_losing_or_repeating_a_trial(
    make_settings: Callable[..., Any],
    run_trial: Callable[..., None],
    client: TestClient,
    app: FastAPI,
) -> None:
    from app.main import create_app

    study = _created(client, n_trials=3, max_parallel=1)
    _advance(app, study["id"])
    first = _detail(client, study["id"])["trials"][0]
    run_trial(first["experiment_id"], [7.0], [1_024], end="succeeded")
    # A second app on the same database (the API restarted) carries the study on.
    again = create_app(make_settings())
    with TestClient(again) as other:
        _advance(again, study["id"])
        trials = other.get(f"{API}/studies/{study['id']}").json()["trials"]
    assert [t["number"] for t in trials] == [0, 1]
    assert trials[0]["state"] == "complete" and trials[0]["value"] == 7.0
    assert trials[0]["params"] == first["params"]


def test_two_processes_advancing_at_once_add_each_trial_once(
    client: TestClient, app: FastAPI
) -> None:
    study = _created(client, n_trials=8, max_parallel=3)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def advance() -> None:
        barrier.wait(timeout=10)
        try:
            _advance(app, study["id"])
        except Exception as exc:  # the loser of a race on SQLite: its insert fails, rolled back
            errors.append(exc)

    threads = [threading.Thread(target=advance) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    trials = _detail(client, study["id"])["trials"]
    assert [t["number"] for t in trials] == [0, 1, 2]
    runs = client.get(f"{API}/experiments").json()["items"]
    assert sorted(r["id"] for r in runs) == sorted(t["experiment_id"] for t in trials)
    assert all(type(e).__name__ in ("IntegrityError", "OperationalError") for e in errors)


def test_list_shows_counts_and_the_best_value(
    client: TestClient, app: FastAPI, run_trial: Callable[..., None]
) -> None:
    study = _created(client, n_trials=2, max_parallel=2)
    _advance(app, study["id"])
    runs = [t["experiment_id"] for t in _detail(client, study["id"])["trials"]]
    run_trial(runs[0], [4.0, 6.0], [1_024, 2_048], end="succeeded")
    run_trial(runs[1], [9.0], [1_024])
    _advance(app, study["id"])
    (listed,) = client.get(f"{API}/studies").json()["items"]
    assert listed["counts"] == {"complete": 1, "running": 1}
    assert listed["best_value"] == 5.0 and listed["best_trial"] == 0
    assert listed["status"] == "running"
