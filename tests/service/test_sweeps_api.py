"""Sweeps API on SQLite and PostgreSQL: create (members resolved like single experiments;
every bad key, value or seed a 422 naming it, with nothing stored), list, get, stop, delete,
and the per-group metrics checked against a plain-loop reference."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.sweeps import aggregate
from tests.service.conftest import SMALL_CONFIG

API = "/api/v1"
BASE = {**SMALL_CONFIG, "stop": {"env_steps": 4096}}


def _sweep(client: TestClient, **body: Any) -> Any:
    payload = {"name": "lr sweep", "config": BASE, "grid": {"lr": [1e-3, 3e-4]}}
    payload.update(body)
    return client.post(f"{API}/sweeps", json=payload)


def _created(client: TestClient, **body: Any) -> dict[str, Any]:
    response = _sweep(client, **body)
    assert response.status_code == 201, response.text
    return response.json()


def _fields(response: Any) -> dict[str, str]:
    assert response.status_code == 422, response.text
    return {f["field"]: f["message"] for f in response.json()["error"]["fields"]}


def _nothing_stored(client: TestClient) -> None:
    assert client.get(f"{API}/sweeps").json()["items"] == []
    assert client.get(f"{API}/experiments").json()["items"] == []


def test_create_makes_one_member_per_grid_point_and_seed(client: TestClient) -> None:
    sweep = _created(client, seeds=[0, 1], max_parallel=2)
    assert sweep["size"] == 4 and sweep["status"] == "queued"
    assert sweep["counts"] == {"pending": 4}
    assert sweep["grid"] == {"lr": [1e-3, 3e-4]} and sweep["seeds"] == [0, 1]
    assert [g["point"] for g in sweep["groups"]] == [{"lr": 1e-3}, {"lr": 3e-4}]
    assert [g["label"] for g in sweep["groups"]] == ["lr=0.001", "lr=0.0003"]
    members = sweep["members"]
    assert [(m["config"]["lr"], m["config"]["seed"]) for m in members] == [
        (1e-3, 0), (1e-3, 1), (3e-4, 0), (3e-4, 1)
    ]  # fmt: skip
    assert all(m["sweep_id"] == sweep["id"] for m in members)
    assert [m["sweep_group"] for m in members] == [0, 0, 1, 1]
    assert members[1]["name"] == "lr sweep [lr=0.001, seed=1]"
    for group in sweep["groups"]:
        assert group["member_ids"] == [
            m["id"] for m in members if m["sweep_group"] == group["index"]
        ]
    # Each member's config is resolved exactly as a single experiment's would be.
    single = client.post(
        f"{API}/experiments", json={"name": "one", "config": {**BASE, "lr": 3e-4, "seed": 1}}
    ).json()
    assert members[3]["config"] == single["config"]
    assert single["config"]["preset"] != "auto"
    # Members are experiments: they show their sweep.
    listed = client.get(f"{API}/experiments", params={"limit": 10}).json()["items"]
    assert {e["sweep_id"] for e in listed} == {sweep["id"], None}


def test_nested_keys_and_seed_only_sweeps(client: TestClient) -> None:
    nested = _created(client, grid={"stop.env_steps": [2048, 8192], "model.hidden_sizes": [[32]]})
    configs = [m["config"] for m in nested["members"]]
    assert [c["stop"]["env_steps"] for c in configs] == [2048, 8192]
    assert all(c["model"]["hidden_sizes"] == [32] for c in configs)
    assert all(c["minibatch_size"] == BASE["minibatch_size"] for c in configs)
    assert nested["groups"][1]["label"] == "stop.env_steps=8192, model.hidden_sizes=[32]"
    seeds_only = _created(client, grid={}, seeds=[3, 4, 5])
    assert len(seeds_only["groups"]) == 1 and seeds_only["groups"][0]["label"] == ""
    assert [m["config"]["seed"] for m in seeds_only["members"]] == [3, 4, 5]


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"grid": {"learning_rate": [1e-3]}}, "grid.learning_rate", "did you mean lr?"),
        ({"grid": {"stop.steps": [10]}}, "grid.stop.steps", "did you mean stop.env_steps?"),
        ({"grid": {"lr.value": [1]}}, "grid.lr.value", "no fields below"),
        ({"grid": {"seed": [0, 1]}}, "grid.seed", "seeds"),
        ({"grid": {"lr": []}}, "grid.lr", "at least one value"),
        ({"grid": {"lr": [1e-3, 1e-3]}}, "grid.lr", "distinct"),
        ({"grid": {"lr": [1e-3, -1.0]}}, "grid.lr.1", "greater than 0"),
        ({"grid": {"stop.env_steps": [100, "many"]}}, "grid.stop.env_steps.1", "integer"),
        ({"grid": {"stop": [{}], "stop.env_steps": [5]}}, "grid.stop.env_steps", "overlaps"),
        ({"grid": {"lr": [0.1, 0.2, 0.3]}, "seeds": list(range(100))}, "grid", "at most 256"),
        ({"grid": {"lr": 0.1}}, "grid.lr", "list"),
        ({"seeds": [0, 0]}, "seeds", "distinct"),
        ({"seeds": [0, -1]}, "seeds.1", ">= 0"),
        ({"seeds": []}, "seeds", "at least 1"),
        ({"max_parallel": 0}, "max_parallel", "greater than or equal to 1"),
        ({"config": {**BASE, "seed": 3}}, "config.seed", "seeds"),
        ({"config": {**BASE, "gamma": 2.0}}, "config.gamma", "less than or equal to 1"),
        ({"name": ""}, "name", "at least 1"),
        ({"name": "a\x00b"}, "name", "NUL"),
        ({"grid": {"env_config.mode": ["a\x00b"]}}, "config.env_config", "NUL"),
        ({"seeds": [2**31]}, "seeds.0", "<= 2147483647"),
    ],
)  # fmt: skip
def test_bad_sweeps_are_422_naming_the_field_and_store_nothing(
    client: TestClient, body: dict[str, Any], field: str, says: str
) -> None:
    fields = _fields(_sweep(client, **body))
    assert field in fields, fields
    assert says.lower() in fields[field].lower(), fields
    _nothing_stored(client)


def test_a_bad_combination_is_named_and_nothing_is_stored(client: TestClient) -> None:
    """Each value alone is fine; one combination fails a cross-field check."""
    response = _sweep(
        client,
        grid={"train_batch_size_per_learner": [256, 64], "minibatch_size": [64, 128]},
    )
    fields = _fields(response)
    assert any(f.startswith("grid") for f in fields), fields
    _nothing_stored(client)


def test_list_get_and_404(client: TestClient) -> None:
    first = _created(client, name="first")
    second = _created(client, name="second", seeds=[0, 1, 2])
    listed = client.get(f"{API}/sweeps").json()["items"]
    assert [s["id"] for s in listed] == [second["id"], first["id"]]
    assert listed[0]["size"] == 6 and "members" not in listed[0]
    got = client.get(f"{API}/sweeps/{first['id']}").json()
    assert [m["id"] for m in got["members"]] == [m["id"] for m in first["members"]]
    for path in ("", "/metrics"):
        missing = client.get(f"{API}/sweeps/999{path}")
        assert missing.status_code == 404 and "sweep 999" in missing.json()["error"]["message"]
    assert client.post(f"{API}/sweeps/999/stop").status_code == 404
    assert client.delete(f"{API}/sweeps/999").status_code == 404


def test_stop_ends_waiting_members_and_stops_running_ones(
    client: TestClient, transition: Callable[..., None]
) -> None:
    sweep = _created(client, seeds=[0, 1])
    a, b, c, d = (m["id"] for m in sweep["members"])
    transition(a, "queued", "running", "succeeded")
    transition(b, "queued", "running")
    transition(c, "queued")
    stopped = client.post(f"{API}/sweeps/{sweep['id']}/stop")
    assert stopped.status_code == 200, stopped.text
    statuses = {m["id"]: m["status"] for m in stopped.json()["members"]}
    assert statuses == {a: "succeeded", b: "stopping", c: "stopped", d: "stopped"}
    assert stopped.json()["status"] == "stopping"
    events = client.get(f"{API}/experiments/{d}/events").json()
    assert events[-1]["reason"] == "stopped by user before start"
    # Stopping again changes nothing and is not an error.
    again = client.post(f"{API}/sweeps/{sweep['id']}/stop").json()
    assert {m["id"]: m["status"] for m in again["members"]} == statuses


def test_delete_needs_every_member_ended_then_removes_them(
    client: TestClient, transition: Callable[..., None]
) -> None:
    sweep = _created(client)
    a, b = (m["id"] for m in sweep["members"])
    transition(a, "queued", "running")
    refused = client.delete(f"{API}/sweeps/{sweep['id']}")
    assert refused.status_code == 409 and "unfinished" in refused.json()["error"]["message"]
    client.post(f"{API}/sweeps/{sweep['id']}/stop")
    transition(a, "stopped")
    assert client.delete(f"{API}/sweeps/{sweep['id']}").status_code == 204
    assert client.get(f"{API}/sweeps/{sweep['id']}").status_code == 404
    for exp_id in (a, b):
        assert client.get(f"{API}/experiments/{exp_id}").status_code == 404
    other = _created(client, name="kept")
    assert client.get(f"{API}/sweeps").json()["items"][0]["id"] == other["id"]


# --- metrics ------------------------------------------------------------------------------------


def _ingest(client: TestClient, token: str, exp_id: int, steps: list[int], values: list[float]):
    rows = [
        {"step": s, "time_s": float(i), "values": {"episode_return_mean": v}}
        for i, (s, v) in enumerate(zip(steps, values, strict=True))
    ]
    response = client.post(
        f"{API}/jobs/experiments/{exp_id}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text


def _reference(series: list[tuple[list[int], list[float]]], grid: list[int]) -> dict[str, list]:
    """Plain loops: each member interpolated by hand, then n / mean / min / max per step."""
    out: dict[str, list] = {"n": [], "mean": [], "min": [], "max": []}
    for g in grid:
        here = []
        for steps, values in series:
            if not steps or g < steps[0] or g > steps[-1]:
                continue
            for k in range(len(steps)):
                if steps[k] == g:
                    here.append(values[k])
                    break
                if steps[k] < g < steps[k + 1]:
                    t = (g - steps[k]) / (steps[k + 1] - steps[k])
                    here.append(values[k] + t * (values[k + 1] - values[k]))
                    break
        out["n"].append(len(here))
        out["mean"].append(sum(here) / len(here) if here else None)
        out["min"].append(min(here) if here else None)
        out["max"].append(max(here) if here else None)
    return out


def _close(a: list, b: list) -> bool:
    return all(
        (x is None and y is None) or (x is not None and y is not None and math.isclose(x, y))
        for x, y in zip(a, b, strict=True)
    )


def test_group_metrics_match_a_plain_loop(
    client: TestClient, job_token: Callable[[int], str]
) -> None:
    sweep = _created(client, seeds=[0, 1, 2])
    rng = np.random.default_rng(7)
    series: dict[int, tuple[list[int], list[float]]] = {}
    for i, member in enumerate(sweep["members"]):
        length = [40, 25, 40, 10, 33, 0][i]  # members at different progress; one not started
        steps = sorted({int(s) for s in rng.integers(1, 400, size=length) * 250})
        values = [float(v) for v in rng.normal(100 + 20 * i, 15, size=len(steps))]
        series[member["id"]] = (steps, values)
        if steps:
            _ingest(client, job_token(member["id"]), member["id"], steps, values)
    response = client.get(f"{API}/sweeps/{sweep['id']}/metrics", params={"points": 50})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["grid_keys"] == ["lr"] and body["confidence"] == 0.95
    result = body["metrics"]["episode_return_mean"]
    grid = result["step"]
    firsts = [s[0][0] for s in series.values() if s[0]]
    lasts = [s[0][-1] for s in series.values() if s[0]]
    assert grid[0] == min(firsts) and grid[-1] == max(lasts) and len(grid) == 50
    for group in result["groups"]:
        members = [series[m] for m in group["member_ids"]]
        expected = _reference(members, grid)
        assert group["n"] == expected["n"]
        for key in ("mean", "min", "max"):
            assert _close(group[key], expected[key]), key
        for n, lo, mean, hi in zip(
            group["n"], group["ci_low"], group["mean"], group["ci_high"], strict=True
        ):
            if n == 0:
                assert lo is None and hi is None
            else:
                assert lo - 1e-9 <= mean <= hi + 1e-9
        finals = [s[1][-1] for s in members if s[0]]
        assert group["final"]["n"] == len(finals)
        assert math.isclose(group["final"]["mean"], sum(finals) / len(finals))
        assert group["final"]["min"] == min(finals) and group["final"]["max"] == max(finals)
        by_id = {f["experiment_id"]: f for f in group["final"]["members"]}
        for exp_id in group["member_ids"]:
            steps, values = series[exp_id]
            if steps:
                assert by_id[exp_id]["value"] == values[-1] and by_id[exp_id]["step"] == steps[-1]
            else:
                assert exp_id not in by_id
    # The same data gives the same interval (a fixed-seed bootstrap).
    again = client.get(f"{API}/sweeps/{sweep['id']}/metrics", params={"points": 50}).json()
    assert again == body


def test_long_series_come_from_the_rollups_close_to_the_raw_curve(
    client: TestClient, job_token: Callable[[int], str]
) -> None:
    """Members with many points are read from the rollups (min/max per bucket): the group mean
    stays within the local spread of the raw curves."""
    sweep = _created(client, grid={}, seeds=[0, 1])
    steps = list(range(1000, 3_000_001, 1000))  # 3000 points over 3M env steps
    curves = []
    for k, member in enumerate(sweep["members"]):
        values = [100.0 * s / 3e6 + (k * 10) + 2.0 * math.sin(s / 7e3) for s in steps]
        curves.append(values)
        _ingest(client, job_token(member["id"]), member["id"], steps, values)
    body = client.get(f"{API}/sweeps/{sweep['id']}/metrics", params={"points": 100}).json()
    result = body["metrics"]["episode_return_mean"]
    group = result["groups"][0]
    truth = np.mean([np.interp(result["step"], steps, c) for c in curves], axis=0)
    assert group["n"] == [2] * len(result["step"])
    assert np.max(np.abs(np.array(group["mean"]) - truth)) <= 4.0 + 1e-9  # sine amplitude 2
    assert group["final"]["mean"] == pytest.approx(np.mean([c[-1] for c in curves]))


def test_metrics_without_points_and_bad_names(client: TestClient) -> None:
    sweep = _created(client)
    body = client.get(f"{API}/sweeps/{sweep['id']}/metrics").json()
    result = body["metrics"]["episode_return_mean"]
    assert result["step"] == []
    assert [g["final"]["n"] for g in result["groups"]] == [0, 0]
    too_many = ",".join(f"m{i}" for i in range(9))
    bad = client.get(f"{API}/sweeps/{sweep['id']}/metrics", params={"names": too_many})
    assert "names" in _fields(bad)
    assert "query.points" in _fields(
        client.get(f"{API}/sweeps/{sweep['id']}/metrics", params={"points": 1})
    )


# --- the bootstrap itself -------------------------------------------------------------------------


def _loop_bootstrap(matrix: np.ndarray) -> tuple[list, list]:
    """The same resampling contract, one column at a time in plain Python."""
    columns = [[v for v in matrix[:, j] if not np.isnan(v)] for j in range(matrix.shape[1])]
    counts = [len(c) for c in columns]
    low: list = [None] * len(columns)
    high: list = [None] * len(columns)
    for count in sorted({c for c in counts if c > 0}):
        cols = [j for j, c in enumerate(counts) if c == count]
        if count == 1:
            for j in cols:
                low[j] = high[j] = columns[j][0]
            continue
        rng = np.random.default_rng([aggregate.BOOTSTRAP_SEED, count])
        weights = rng.multinomial(count, [1.0 / count] * count, size=aggregate.BOOTSTRAP_RESAMPLES)
        for j in cols:
            values = sorted(columns[j])
            means = [
                sum(w * v for w, v in zip(row, values, strict=True)) / count for row in weights
            ]
            low[j], high[j] = np.quantile(means, [0.025, 0.975])
    return low, high


def test_bootstrap_matches_the_loop_and_covers_the_normal_interval() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.normal(50, 10, size=(6, 30))
    matrix[4, 20:] = np.nan
    matrix[5, 10:] = np.nan
    matrix[:5, 28:] = np.nan  # one member left: its value is the interval
    matrix[:, 29] = np.nan  # nobody there
    other = rng.normal(0, 1, size=(6, 30))  # a second group, batched with the first
    stats = aggregate.group_stats(np.stack([other, matrix]))
    low, high = _loop_bootstrap(matrix)
    for j in range(30):
        if low[j] is None:
            assert np.isnan(stats.ci_low[1, j]) and np.isnan(stats.ci_high[1, j])
        else:
            assert stats.ci_low[1, j] == pytest.approx(low[j])
            assert stats.ci_high[1, j] == pytest.approx(high[j])
    assert list(stats.n[1]) == [int(c) for c in (~np.isnan(matrix)).sum(axis=0)]
    # Many members: the percentile interval is close to mean +- 1.96 sd / sqrt(n).
    wide = rng.normal(0, 1, size=(400, 1))
    big = aggregate.group_stats(wide[None])
    half = 1.96 * wide.std() / math.sqrt(400)
    assert (big.ci_high[0, 0] - big.ci_low[0, 0]) / 2 == pytest.approx(half, rel=0.15)
