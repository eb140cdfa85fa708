"""Every 4xx/5xx has the one error envelope: domain errors, validation errors and the
framework's own (unknown route, wrong method, body too large, unreadable body, a crash)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from app.core.errors import DATABASE_RETRY_AFTER_S
from app.main import create_app


def envelope(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code and isinstance(error["message"], str) and error["message"]
    assert set(error) <= {"code", "message", "fields"}
    return error


def test_framework_errors_have_the_envelope(client: TestClient) -> None:
    envelope(client.get("/api/v1/nope"), 404, "not_found")
    envelope(client.get("/nope"), 404, "not_found")
    envelope(client.get("/api/v1/experiments/1/stream"), 404, "not_found")  # a websocket route
    wrong_method = client.delete("/api/v1/experiments")
    envelope(wrong_method, 405, "method_not_allowed")
    assert wrong_method.headers["allow"]
    envelope(client.put("/api/v1/experiments/1"), 405, "method_not_allowed")
    envelope(client.put("/api/v1/presets"), 405, "method_not_allowed")


def test_validation_errors_have_the_envelope(client: TestClient) -> None:
    headers = {"Content-Type": "application/json"}
    bad_json = client.post("/api/v1/experiments", content=b"{", headers=headers)
    assert envelope(bad_json, 422, "invalid_input")["fields"]
    not_utf8 = client.post("/api/v1/experiments", content=b"\xff\xfe", headers=headers)
    envelope(not_utf8, 422, "invalid_input")
    as_text = client.post("/api/v1/experiments", content=b'{"name": "x"}')
    envelope(as_text, 422, "invalid_input")
    missing = envelope(client.post("/api/v1/experiments", json={}), 422, "invalid_input")
    assert missing["fields"] == [{"field": "name", "message": "Field required"}]
    query = envelope(client.get("/api/v1/experiments?limit=0"), 422, "invalid_input")
    assert query["fields"][0]["field"] == "query.limit"
    path = envelope(client.get("/api/v1/experiments/abc"), 422, "invalid_input")
    assert path["fields"][0]["field"] == "path.experiment_id"
    deep = client.post("/api/v1/experiments", content=b"[" * 100_000, headers=headers)
    envelope(deep, 400, "bad_request")  # the parser gives up before it sees the end
    deeper = client.post(
        "/api/v1/experiments", content=b"[" * 100_000 + b"]" * 100_000, headers=headers
    )
    envelope(deeper, 400, "bad_request")


def test_body_limit_and_auth_errors_have_the_envelope(
    make_settings: Callable[..., Any],
) -> None:
    settings = make_settings(max_request_body_bytes=1024, api_token="secret-token")
    with TestClient(create_app(settings)) as client:
        envelope(client.post("/api/v1/experiments", content=b"x" * 2048), 413, "payload_too_large")
        unauthorized = client.get("/api/v1/experiments")
        envelope(unauthorized, 401, "unauthorized")
        assert unauthorized.headers["www-authenticate"] == "Bearer"
        wrong = client.get("/api/v1/experiments", headers={"Authorization": "Bearer nope"})
        envelope(wrong, 401, "unauthorized")
        job = client.get("/api/v1/jobs/experiments/1", headers={"Authorization": "Bearer x"})
        envelope(job, 404, "not_found")


def test_unexpected_errors_are_a_500_envelope_without_details(
    make_settings: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(make_settings())

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret internals")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/api/v1/boom")
    error = envelope(response, 500, "internal_error")
    assert "secret" not in response.text
    assert error["message"] == "internal server error"
    assert "secret internals" in caplog.text


def test_an_unavailable_database_is_a_503_to_retry(make_settings: Callable[..., Any]) -> None:
    app = create_app(make_settings())

    @app.get("/api/v1/db-down")
    def db_down() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/api/v1/db-down")
    envelope(response, 503, "unavailable")
    assert response.headers["retry-after"] == str(DATABASE_RETRY_AFTER_S)
    assert "connection refused" not in response.text


def test_the_dashboard_routes_keep_the_envelope_for_api_paths(
    make_settings: Callable[..., Any], tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><title>Rollout</title>")
    with TestClient(create_app(make_settings(frontend_dir=dist))) as client:
        envelope(client.get("/api/v1/nope"), 404, "not_found")
        envelope(client.get("/api/v1"), 404, "not_found")
        envelope(client.get("/assets/missing.js"), 404, "not_found")
        assert client.get("/experiments/3").text.startswith("<!doctype html>")
