"""/docs loads Swagger UI from the service (dist/swagger-ui/, copied there by the frontend
build), not from a CDN: the page works without internet."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.main import create_app


def test_docs_page_loads_its_script_and_styles_from_the_service(make_settings, tmp_path):
    dist = tmp_path / "dist"
    (dist / "swagger-ui").mkdir(parents=True)
    (dist / "index.html").write_text("<html>rollout</html>")
    for name, text in (
        ("swagger-ui-bundle.js", "window.SwaggerUIBundle = 1"),
        ("swagger-ui.css", ".swagger-ui{}"),
    ):
        (dist / "swagger-ui" / name).write_text(text)
    (dist / "swagger-ui" / "favicon-32x32.png").write_bytes(b"png")
    with TestClient(create_app(make_settings(frontend_dir=dist))) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and "SwaggerUIBundle" in page.text
        urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert len(urls) == 3, urls  # the script, the styles, the icon
        for url in urls:
            assert url.startswith("/swagger-ui/"), url
            assert client.get(url).status_code == 200, url
        assert "url: '/openapi.json'" in page.text
        assert client.get("/openapi.json").status_code == 200
