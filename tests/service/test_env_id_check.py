"""A misspelled env id is refused at submit (422 on config.env_id with close matches) by every
route that takes a config, instead of failing seconds later inside the job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient


def _env_id_error(response: Any) -> str:
    assert response.status_code == 422, response.text
    fields = response.json()["error"]["fields"]
    assert [f["field"] for f in fields] == ["config.env_id"], fields
    return fields[0]["message"]


def test_a_misspelled_env_id_is_a_422_everywhere_and_nothing_is_stored(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    bad = {"env_id": "CartPol-v1"}
    message = _env_id_error(client.post("/api/v1/experiments", json={"name": "n", "config": bad}))
    assert "did you mean CartPole-v1" in message
    _env_id_error(client.post("/api/v1/sweeps", json={"name": "s", "config": bad}))
    _env_id_error(client.post("/api/v1/presets/resolve", json={"config": bad}))
    fork = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"overrides": bad})
    _env_id_error(fork)
    assert [e["id"] for e in client.get("/api/v1/experiments").json()["items"]] == [exp["id"]]
    assert client.get("/api/v1/sweeps").json()["items"] == []


def test_registered_and_own_env_ids_are_accepted(client: TestClient) -> None:
    for env_id in ("Acrobot-v1", "ALE/Breakout-v5", "my_envs:Custom-v0"):
        body = {"name": env_id, "config": {"env_id": env_id}}
        response = client.post("/api/v1/experiments", json=body)
        assert response.status_code == 201, response.text


def test_an_unknown_key_gets_one_message_with_its_suggestion_on_every_route(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    said = "unknown field 'stop.steps'; did you mean stop.env_steps?"
    bad = {"stop": {"steps": 100}}
    for url, body, field in (
        ("/api/v1/experiments", {"name": "n", "config": bad}, "config.stop.steps"),
        ("/api/v1/presets/resolve", {"config": bad}, "config.stop.steps"),
        (f"/api/v1/experiments/{exp['id']}/fork", {"overrides": bad}, "config.stop.steps"),
        ("/api/v1/sweeps", {"name": "s", "config": bad}, "config.stop.steps"),
        ("/api/v1/sweeps", {"name": "s", "grid": {"stop.steps": [100]}}, "grid.stop.steps"),
    ):
        response = client.post(url, json=body)
        assert response.status_code == 422, response.text
        fields = response.json()["error"]["fields"]
        assert {"field": field, "message": said} in fields, (url, fields)
