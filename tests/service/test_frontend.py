"""The built dashboard is served at / with index.html for client-side routes."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.main import create_app


def test_dashboard_files_and_client_routes(make_settings, tmp_path):
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<html>rollout</html>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    (dist / "favicon.svg").write_text("<svg/>")
    with TestClient(create_app(make_settings(frontend_dir=dist))) as client:
        assert client.get("/").text == "<html>rollout</html>"
        assert client.get("/experiments/12").text == "<html>rollout</html>"
        assert client.get("/assets/app.js").text == "console.log(1)"
        assert client.get("/favicon.svg").text == "<svg/>"
        assert client.get("/../secret").text == "<html>rollout</html>"
        missing = client.get("/api/v1/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
        assert client.get("/api/v1/experiments").status_code == 200
        assert client.get("/docs").status_code == 200


def test_no_dashboard_no_catch_all(client):
    assert client.get("/").status_code == 404
