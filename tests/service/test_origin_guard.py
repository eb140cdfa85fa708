"""Cross-origin protection: a page on another origin can neither change state nor open a
stream, with or without the API token; clients without an Origin (CLI, httpx, jobs) can."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from starlette.testclient import WebSocketDenialResponse

from app.main import create_app
from tests.service.conftest import SMALL_CONFIG

OWN = "http://testserver"  # TestClient's Host is testserver
FOREIGN = ["http://evil.test", "https://testserver", "http://testserver:8080", "null", "junk"]
TOKEN = "s3cret-token"


def assert_cross_origin(response: Any) -> None:
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "cross_origin"


def statuses(client: TestClient, headers: dict[str, str] | None = None) -> list[tuple[int, str]]:
    items = client.get("/api/v1/experiments", headers=headers).json()["items"]
    return sorted((e["id"], e["status"]) for e in items)


@pytest.mark.parametrize("origin", FOREIGN)
def test_foreign_pages_cannot_submit_stop_resume_fork_or_delete(client, create_experiment, origin):
    exp = create_experiment()
    before = statuses(client)
    evil = {"origin": origin}
    base = f"/api/v1/experiments/{exp['id']}"
    body = {"name": "x", "config": {**SMALL_CONFIG, "env_id": "evilmodule:Env"}}
    assert_cross_origin(client.post("/api/v1/experiments", json=body, headers=evil))
    assert_cross_origin(client.post(f"{base}/stop", headers=evil))  # no body at all
    assert_cross_origin(client.post(f"{base}/resume", json={}, headers=evil))
    assert_cross_origin(client.post(f"{base}/fork", json={}, headers=evil))
    assert_cross_origin(client.delete(base, headers=evil))
    assert_cross_origin(client.post(f"/api/v1/jobs/experiments/{exp['id']}/logs", headers=evil))
    assert statuses(client) == before


def test_the_dashboard_own_origin_and_originless_clients_may_write(client, create_experiment):
    for headers in ({"origin": OWN}, {"origin": "HTTP://TestServer:80"}, {}):
        exp = create_experiment()
        stopped = client.post(f"/api/v1/experiments/{exp['id']}/stop", headers=headers)
        assert stopped.status_code == 200, stopped.text
        assert client.delete(f"/api/v1/experiments/{exp['id']}", headers=headers).status_code in (
            200,
            204,
        )


def test_the_token_does_not_open_the_door_to_foreign_pages(make_settings, create_experiment):
    auth = {"authorization": f"Bearer {TOKEN}"}
    with TestClient(create_app(make_settings(api_token=TOKEN))) as client:
        exp = client.post(
            "/api/v1/experiments", json={"name": "e", "config": SMALL_CONFIG}, headers=auth
        ).json()
        stop = f"/api/v1/experiments/{exp['id']}/stop"
        assert_cross_origin(client.post(stop, headers={**auth, "origin": "http://evil.test"}))
        assert_cross_origin(client.post(stop, headers={"origin": "http://evil.test"}))
        assert statuses(client, auth) == [(exp["id"], "pending")]
        assert client.post(stop, headers={**auth, "origin": OWN}).status_code == 200


def test_configured_origins_may_write(make_settings):
    settings = make_settings(allowed_origins="http://localhost:5173, https://ops.example.com")
    with TestClient(create_app(settings)) as client:
        body = {"name": "e", "config": SMALL_CONFIG}
        for origin in ("http://localhost:5173", "https://ops.example.com:443"):
            response = client.post("/api/v1/experiments", json=body, headers={"origin": origin})
            assert response.status_code == 201, response.text
        assert_cross_origin(
            client.post("/api/v1/experiments", json=body, headers={"origin": "http://localhost"})
        )


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x"]
)
def test_form_able_posts_are_refused_even_without_an_origin(
    client, create_experiment, content_type
):
    """A page can send these cross-origin without a CORS preflight: no route accepts them."""
    exp = create_experiment()
    body = '{"name": "x", "config": {}}'
    for path in ("/api/v1/experiments", f"/api/v1/experiments/{exp['id']}/stop"):
        response = client.post(path, content=body, headers={"content-type": content_type})
        assert response.status_code == 415, response.text
        assert response.json()["error"]["code"] == "unsupported_media_type"
    assert statuses(client) == [(exp["id"], "pending")]


def test_no_cors_headers_are_granted(client, create_experiment):
    exp = create_experiment()
    evil = {"origin": "http://evil.test"}
    read = client.get(f"/api/v1/experiments/{exp['id']}", headers=evil)
    assert read.status_code == 200
    preflight = client.options(
        f"/api/v1/experiments/{exp['id']}/stop",
        headers={**evil, "access-control-request-method": "POST"},
    )
    for response in (read, preflight):
        assert not any(h.lower().startswith("access-control-") for h in response.headers)


@pytest.mark.parametrize("path", ["/api/v1/stream", "/api/v1/experiments/{id}/stream"])
def test_foreign_pages_cannot_open_streams(client, create_experiment, path):
    exp = create_experiment()
    url = path.format(id=exp["id"])
    for origin in ("http://evil.test", "null"):
        with (
            pytest.raises(WebSocketDenialResponse) as denied,
            client.websocket_connect(url, headers={"origin": origin}),
        ):
            pass
        assert_cross_origin(denied.value)
    for headers in ({"origin": OWN}, {}):
        with client.websocket_connect(url, headers=headers) as ws:
            if "{id}" in path:
                assert ws.receive_json()["type"] == "status"


def test_foreign_pages_cannot_open_streams_with_a_token(make_settings):
    with TestClient(create_app(make_settings(api_token=TOKEN))) as client:

        def auth(origin: str) -> dict[str, str]:
            return {"origin": origin, "authorization": f"Bearer {TOKEN}"}

        with (
            pytest.raises(WebSocketDenialResponse) as denied,
            client.websocket_connect("/api/v1/stream", headers=auth("http://evil.test")),
        ):
            pass
        assert_cross_origin(denied.value)
        with client.websocket_connect("/api/v1/stream", headers=auth(OWN)):
            pass
