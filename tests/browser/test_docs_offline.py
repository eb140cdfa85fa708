"""/docs, the OpenAPI page the README points to, renders without internet: every request the
page makes goes to the service itself (a request anywhere else is aborted and recorded), and
Swagger UI draws the API's operations. Needs no Ray (jobs disabled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server

pytestmark = pytest.mark.browser


def test_docs_page_renders_from_the_service_alone(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    foreign: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        origin = urlsplit(server.url).netloc

        def offline(route: Any) -> None:
            if urlsplit(route.request.url).netloc == origin:
                route.continue_()
            else:
                foreign.append(route.request.url)
                route.abort()

        try:
            context.route("**/*", offline)
            page.goto(f"{server.url}/docs")
            expect(page.locator(".swagger-ui .info .title")).to_contain_text("Rollout")
            expect(
                page.locator(".opblock-summary-path", has_text="/api/v1/experiments").first
            ).to_be_visible()
        finally:
            context.close()
    assert foreign == [], foreign
    assert not errors, errors
