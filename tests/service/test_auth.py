"""Auth: the API token when configured; job tokens only on their own experiment's job routes."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from app.main import create_app

TOKEN = "s3cret-token"


@pytest.fixture
def secured(make_settings):
    app = create_app(make_settings(api_token=TOKEN))
    with TestClient(app) as client:
        yield app, client


def test_api_token_required_when_configured(secured):
    _, client = secured
    response = client.get("/api/v1/experiments")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    wrong = client.get("/api/v1/experiments", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    ok = client.get("/api/v1/experiments", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert client.get("/health").status_code == 200  # load balancers need no token


def test_websockets_need_the_token(secured):
    _, client = secured
    with (
        pytest.raises(WebSocketDisconnect) as refused,
        client.websocket_connect("/api/v1/stream") as ws,
    ):
        ws.receive_json()
    assert refused.value.code == 1008
    with client.websocket_connect(f"/api/v1/stream?token={TOKEN}"):
        pass
    with client.websocket_connect("/api/v1/stream", headers={"Authorization": f"Bearer {TOKEN}"}):
        pass


def test_job_token_is_scoped_to_its_experiment(client, create_experiment, job_token):
    a, b = create_experiment("a"), create_experiment("b")
    token_a = job_token(a["id"])
    job_token(b["id"])
    headers = {"Authorization": f"Bearer {token_a}"}
    rows = {"rows": [{"step": 1, "time_s": 0, "values": {"x": 1.0}}]}
    own = client.post(f"/api/v1/jobs/experiments/{a['id']}/metrics", json=rows, headers=headers)
    assert own.status_code == 200
    for method, path, kwargs in (
        ("POST", "metrics", {"json": rows}),
        ("POST", "status", {"json": {"status": "running"}}),
        ("POST", "logs", {"json": {"lines": ["x"]}}),
        ("PUT", "checkpoints?iteration=1&env_steps=1", {"content": b"x"}),
        ("GET", "", {}),
    ):
        url = f"/api/v1/jobs/experiments/{b['id']}" + (f"/{path}" if path else "")
        other = client.request(method, url, headers=headers, **kwargs)
        assert other.status_code == 403, (method, path)
        assert other.json()["error"]["code"] == "forbidden"
    assert client.get(f"/api/v1/experiments/{b['id']}/checkpoints").json() == []
    missing = client.post(f"/api/v1/jobs/experiments/{a['id']}/metrics", json=rows)
    assert missing.status_code == 401


def test_reissued_job_token_replaces_the_old_one(client, create_experiment, job_token):
    exp = create_experiment()
    old, new = job_token(exp["id"]), job_token(exp["id"])
    url = f"/api/v1/jobs/experiments/{exp['id']}/logs"
    body = {"lines": ["x"]}
    assert (
        client.post(url, json=body, headers={"Authorization": f"Bearer {old}"}).status_code == 403
    )
    assert (
        client.post(url, json=body, headers={"Authorization": f"Bearer {new}"}).status_code == 200
    )


def test_api_token_does_not_open_job_routes(secured):
    _, client = secured
    headers = {"Authorization": f"Bearer {TOKEN}"}
    exp = client.post("/api/v1/experiments", json={"name": "x", "config": {}}, headers=headers)
    response = client.post(
        f"/api/v1/jobs/experiments/{exp.json()['id']}/logs", json={"lines": []}, headers=headers
    )
    assert response.status_code == 403
