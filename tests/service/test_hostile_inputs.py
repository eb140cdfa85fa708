"""Hand-written hostile inputs: whatever a client sends, the answer is a 4xx with the error
envelope, never a 5xx (on SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient

HUGE = 99999999999999999999  # beyond int64
INT64_MAX = 2**63 - 1
ID_MAX = 2**31 - 1  # ids are INTEGER columns (32-bit on PostgreSQL)


def assert_error(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    """The status, and the one error envelope (naming `field` when given)."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str)
    if field is not None:
        names = [f["field"] for f in error.get("fields", [])]
        assert any(name == field or name.endswith("." + field) for name in names), error
    return error


# --- tags ----------------------------------------------------------------------------------


@pytest.mark.parametrize("tags", [[""], ["   "], ["x" * 65], ["t"] * 33])
def test_fork_validates_tags_like_create(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]], tags: list[str]
) -> None:
    exp = create_experiment()
    response = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"tags": tags})
    assert_error(response, 422, "tags")
    create = client.post("/api/v1/experiments", json={"name": "x", "tags": tags})
    assert_error(create, 422, "tags")


def test_fork_cleans_tags_like_create(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment(tags=["a"])
    response = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"tags": [" b ", "b"]})
    assert response.status_code == 201, response.text
    assert response.json()["tags"] == ["b"]


# --- ids and steps beyond int64 ------------------------------------------------------------

EXPERIMENT_GETS = [
    "/api/v1/experiments/{id}",
    "/api/v1/experiments/{id}/events",
    "/api/v1/experiments/{id}/logs",
    "/api/v1/experiments/{id}/metrics",
    "/api/v1/experiments/{id}/metrics/names",
    "/api/v1/experiments/{id}/checkpoints",
    "/api/v1/experiments/{id}/checkpoints/latest/download",
    "/api/v1/experiments/{id}/evaluations",
    "/api/v1/evaluations/{id}",
    "/api/v1/evaluations/{id}/video",
]
EXPERIMENT_WRITES = [
    ("POST", "/api/v1/experiments/{id}/stop", None),
    ("POST", "/api/v1/experiments/{id}/resume", None),
    ("POST", "/api/v1/experiments/{id}/fork", {}),
    ("POST", "/api/v1/experiments/{id}/evaluations", {}),
    ("DELETE", "/api/v1/experiments/{id}", None),
    ("DELETE", "/api/v1/evaluations/{id}", None),
]
JOB_ROUTES = [
    ("GET", "/api/v1/jobs/experiments/{id}", None),
    ("POST", "/api/v1/jobs/experiments/{id}/status", {"status": "running"}),
    ("POST", "/api/v1/jobs/experiments/{id}/logs", {"lines": ["x"]}),
    ("POST", "/api/v1/jobs/experiments/{id}/metrics", {"rows": []}),
    ("GET", "/api/v1/jobs/experiments/{id}/resume_checkpoint", None),
    ("PUT", "/api/v1/jobs/experiments/{id}/checkpoints?iteration=1&env_steps=1", None),
    ("GET", "/api/v1/jobs/evaluations/{id}", None),
    ("GET", "/api/v1/jobs/evaluations/{id}/checkpoint", None),
    ("POST", "/api/v1/jobs/evaluations/{id}/status", {"status": "running"}),
    ("POST", "/api/v1/jobs/evaluations/{id}/episodes", {"episodes": []}),
]


@pytest.mark.parametrize("path", EXPERIMENT_GETS)
@pytest.mark.parametrize("value", [HUGE, INT64_MAX + 1, ID_MAX + 1, -HUGE, 0])
def test_ids_beyond_int64_are_a_422(client: TestClient, path: str, value: int) -> None:
    assert_error(client.get(path.format(id=value)), 422)


@pytest.mark.parametrize("path", EXPERIMENT_GETS)
def test_largest_id_is_a_404(client: TestClient, path: str) -> None:
    assert_error(client.get(path.format(id=ID_MAX)), 404)


@pytest.mark.parametrize(("method", "path", "body"), EXPERIMENT_WRITES + JOB_ROUTES)
def test_ids_beyond_int64_on_writes_and_job_routes(
    client: TestClient, method: str, path: str, body: Any
) -> None:
    headers = {"Authorization": "Bearer not-a-token"}
    response = client.request(method, path.format(id=HUGE), json=body, headers=headers)
    assert_error(response, 422)


@pytest.mark.parametrize(
    "cursor", [str(HUGE), str(ID_MAX + 1), str(-HUGE), "0", "1" * 5000, "12abc", "-"]
)
def test_list_cursor_out_of_range_is_a_422(client: TestClient, cursor: str) -> None:
    assert_error(client.get("/api/v1/experiments", params={"cursor": cursor}), 422, "cursor")


@pytest.mark.parametrize("param", ["step_min", "step_max"])
def test_metric_steps_beyond_int64_are_a_422(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]], param: str
) -> None:
    exp = create_experiment()
    url = f"/api/v1/experiments/{exp['id']}/metrics"
    assert_error(client.get(url, params={param: HUGE}), 422, param)
    assert_error(client.get(url, params={param: -HUGE}), 422, param)
    assert client.get(url, params={param: INT64_MAX}).status_code == 200


@pytest.mark.parametrize(
    ("param", "value"), [("iteration", 2**31), ("iteration", HUGE), ("env_steps", HUGE)]
)
def test_checkpoint_upload_numbers_beyond_columns_are_a_422(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
    param: str,
    value: int,
) -> None:
    exp = create_experiment()
    token = job_token(exp["id"])
    params = {"iteration": 1, "env_steps": 1, param: value}
    response = client.put(
        f"/api/v1/jobs/experiments/{exp['id']}/checkpoints",
        params=params,
        content=b"x",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert_error(response, 422, param)


# --- configs past their resource bounds, non-finite numbers ---------------------------------


def post_json(client: TestClient, url: str, text: str) -> Any:
    """Raw JSON text (NaN / Infinity literals as Python's json module reads them)."""
    return client.post(url, content=text, headers={"Content-Type": "application/json"})


def test_config_beyond_resource_bounds_is_a_422_naming_the_fields(client: TestClient) -> None:
    body = {
        "name": "huge",
        "config": {
            "train_batch_size_per_learner": 2_000_000_000,
            "model": {"hidden_sizes": [100_000, 100_000]},
        },
    }
    error = assert_error(client.post("/api/v1/experiments", json=body), 422)
    fields = {f["field"] for f in error["fields"]}
    assert {"config.train_batch_size_per_learner", "config.model.hidden_sizes"} <= fields
    assert client.get("/api/v1/experiments").json()["items"] == []  # nothing stored


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize(
    ("template", "field"),
    [
        ('{{"name": "n", "config": {{"lr": {v}}}}}', "config.lr"),
        ('{{"name": "n", "config": {{"stop": {{"episode_return_mean": {v}}}}}}}', None),
        ('{{"name": "n", "config": {{"env_config": {{"x": {v}}}}}}}', "config.env_config"),
    ],
)
def test_non_finite_numbers_in_a_config_are_a_422(
    client: TestClient, literal: str, template: str, field: str | None
) -> None:
    response = post_json(client, "/api/v1/experiments", template.format(v=literal))
    assert_error(response, 422, field)
    resolve = post_json(client, "/api/v1/presets/resolve", template.format(v=literal))
    assert resolve.status_code == 422, resolve.text


@pytest.mark.parametrize("literal", ["NaN", "1e999"])
def test_non_finite_numbers_in_fork_overrides_are_a_422(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]], literal: str
) -> None:
    exp = create_experiment()
    url = f"/api/v1/experiments/{exp['id']}/fork"
    assert_error(post_json(client, url, f'{{"overrides": {{"gamma": {literal}}}}}'), 422)
    body = f'{{"overrides": {{"env_config": {{"a": [{literal}]}}}}}}'
    assert_error(post_json(client, url, body), 422)
