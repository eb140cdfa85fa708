"""Auth: the API token when configured; job tokens only on their own experiment's job routes."""

from __future__ import annotations

import threading
import time

import pytest
import uvicorn
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse
from websockets.sync.client import connect

from app.core.auth import token_protocol
from app.jobs.ray_head import free_ports
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
    for path in ("/api/v1/stream", "/api/v1/experiments/1/stream"):
        for subprotocols in ([], ["rollout"], ["rollout", token_protocol("nope")]):
            with (
                pytest.raises(WebSocketDenialResponse) as refused,
                client.websocket_connect(path, subprotocols=subprotocols),
            ):
                pass
            assert refused.value.status_code == 401
            assert refused.value.json()["error"]["code"] == "unauthorized"
    with client.websocket_connect("/api/v1/stream", headers={"Authorization": f"Bearer {TOKEN}"}):
        pass


@pytest.mark.parametrize("token", [TOKEN, "ünïcode/+= token"])
def test_browsers_pass_the_token_as_a_subprotocol_never_echoed(make_settings, token):
    with TestClient(create_app(make_settings(api_token=token))) as client:
        offered = ["rollout", token_protocol(token)]
        with client.websocket_connect("/api/v1/stream", subprotocols=offered) as ws:
            assert ws.accepted_subprotocol == "rollout"


def test_a_token_in_the_url_is_refused_even_when_right(secured):
    _, client = secured
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for url in (f"/api/v1/stream?token={TOKEN}", "/api/v1/experiments/1/stream?token=x"):
        with (
            pytest.raises(WebSocketDenialResponse) as refused,
            client.websocket_connect(url, headers=auth),
        ):
            pass
        assert refused.value.status_code == 422
        assert "never put the API token in the URL" in refused.value.json()["error"]["message"]


def test_the_token_never_reaches_the_server_log(make_settings, capfd):
    """Served by uvicorn as `rollout serve` does: its log names every websocket URL."""
    settings = make_settings(api_token=TOKEN, port=free_ports(1)[0])
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=settings.port, log_level="info"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        url = f"ws://127.0.0.1:{settings.port}/api/v1/stream"
        with connect(url, subprotocols=["rollout", token_protocol(TOKEN)], open_timeout=10) as ws:
            assert ws.subprotocol == "rollout"
    finally:
        server.should_exit = True
        thread.join(30)
    logged = "".join(capfd.readouterr())
    assert '"WebSocket /api/v1/stream" [accepted]' in logged
    assert TOKEN not in logged
    assert token_protocol(TOKEN) not in logged


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
