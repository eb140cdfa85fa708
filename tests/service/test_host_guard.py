"""The Host check: without configuration only loopback names, the bound address and the
public URL's host are answered (DNS-rebinding protection), over HTTP and websockets."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse

from app.core.config import Settings
from app.main import create_app

CONFIG = {"env_id": "CartPole-v1", "stop": {"env_steps": 1000}}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., TestClient]]:
    """A real app on SQLite with the given settings; its TestClient sends Host 127.0.0.1:8000."""
    clients: list[TestClient] = []

    def make(**overrides: Any) -> TestClient:
        values: dict[str, Any] = {
            "data_dir": tmp_path / "data",
            "jobs_enabled": False,
            "frontend_dir": tmp_path / "none",
            "allowed_hosts": [],
        }
        client = TestClient(create_app(Settings(**values | overrides)), "http://127.0.0.1:8000")
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def assert_refused(response: Any) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_host"
    assert error["message"]


@pytest.mark.parametrize(
    "host", ["127.0.0.1:8000", "127.0.0.1", "localhost:1234", "LocalHost", "[::1]:8000", "[::1]"]
)
def test_loopback_hosts_are_answered(serve, host):
    client = serve()
    assert client.get("/api/v1/experiments", headers={"host": host}).status_code == 200


@pytest.mark.parametrize(
    "host",
    ["evil.test", "evil.test:8000", "127.0.0.1.evil.test", "localhost.evil.test", "[::1", "a b"],
)
def test_foreign_hosts_are_refused_with_the_error_envelope(serve, host):
    client = serve()
    for path in ("/api/v1/experiments", "/api/v1/health", "/api/v1/no-such-route", "/"):
        assert_refused(client.get(path, headers={"host": host}))


def test_health_probes_may_use_any_host(serve):
    """Kubernetes probes send `Host: <pod IP>`; /health is open without a token anyway."""
    client = serve()
    assert client.get("/health", headers={"host": "10.244.0.17:8000"}).status_code == 200
    assert_refused(client.post("/health", headers={"host": "10.244.0.17:8000"}))


def test_a_dns_rebinding_page_cannot_stop_or_submit(serve):
    client = serve()
    exp = client.post("/api/v1/experiments", json={"name": "mine", "config": CONFIG}).json()
    evil = {"host": "evil.test"}
    assert_refused(client.post(f"/api/v1/experiments/{exp['id']}/stop", headers=evil))
    body = {"name": "x", "config": {**CONFIG, "env_id": "evilmodule:Env"}}
    assert_refused(client.post("/api/v1/experiments", json=body, headers=evil))
    assert_refused(client.delete(f"/api/v1/experiments/{exp['id']}", headers=evil))
    listed = client.get("/api/v1/experiments").json()["items"]
    assert [(e["id"], e["status"]) for e in listed] == [(exp["id"], exp["status"])]


def test_websockets_with_a_foreign_host_are_refused(serve):
    client = serve()
    evil = {"host": "evil.test"}
    with (
        pytest.raises(WebSocketDenialResponse) as denied,
        client.websocket_connect("/api/v1/stream", headers=evil),
    ):
        pass
    assert_refused(denied.value)
    with client.websocket_connect("/api/v1/stream", headers={"host": "localhost:8000"}):
        pass


def test_configured_hosts_and_domains_are_answered(serve):
    client = serve(allowed_hosts=["rollout.example.com", ".corp.test", "[fd00::1]", "b.test:81"])
    hosts = ("rollout.example.com", "Rollout.Example.Com:443", "corp.test", "a.b.corp.test")
    for host in (*hosts, "[fd00::1]:8000", "b.test"):
        assert client.get("/api/v1/health", headers={"host": host}).status_code == 200, host
    for host in ("example.com", "evilcorp.test", "rollout.example.com.evil.test"):
        assert_refused(client.get("/api/v1/health", headers={"host": host}))


def test_the_bound_address_and_the_public_url_host_are_answered(serve):
    client = serve(host="10.1.2.3", public_url="https://rollout.internal/")
    for host in ("10.1.2.3:8000", "rollout.internal", "127.0.0.1:8000"):
        assert client.get("/api/v1/health", headers={"host": host}).status_code == 200, host
    assert_refused(client.get("/api/v1/health", headers={"host": "10.1.2.4:8000"}))


def test_a_wildcard_bind_is_not_a_host_name(serve):
    client = serve(host="0.0.0.0")
    assert_refused(client.get("/api/v1/health", headers={"host": "0.0.0.0:8000"}))
    assert_refused(client.get("/api/v1/health", headers={"host": "myserver:8000"}))


def test_star_answers_every_host(serve):
    client = serve(allowed_hosts=["*"])
    assert client.get("/api/v1/health", headers={"host": "anything.test"}).status_code == 200


def test_allowed_hosts_is_a_comma_list_in_the_environment(monkeypatch):
    monkeypatch.setenv("ROLLOUT_ALLOWED_HOSTS", " a.test, .b.test ,,")
    assert Settings().allowed_hosts == ["a.test", ".b.test"]
