"""The dashboard survives the service going away: it shows "offline", reconnects by itself and
resumes its stream from the last step it holds, with no point lost or duplicated.

Needs no Ray: a simulated job reports through the real job-side API of a real service, which is
stopped and started again on the same port and database while the page stays open.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import chart_points, dashboard_settings, new_page, wait_until
from tests.browser.server import free_port, live_server
from tests.browser.simulate import SimulatedJob

pytestmark = pytest.mark.browser


def test_page_goes_offline_reconnects_and_resumes_without_duplicates(
    browser: Any, frontend_dist: Path, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    settings = dashboard_settings(tmp_path, frontend_dist)
    port = free_port()
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1100, "height": 800})
    try:
        with live_server(settings, port=port) as server:
            created = httpx.post(
                f"{server.url}/api/v1/experiments",
                json={"name": "reconnect", "config": {"stop": {"env_steps": 40_000}}},
            )
            exp_id = created.json()["id"]
            job = SimulatedJob(server, exp_id)
            job.status("running", "simulated job started")
            job.iterations(20)
            page.goto(f"{server.url}/#/experiments/{exp_id}")
            wait_until(lambda: chart_points(page, "Episode return") == 20, 30, "history")
            expect(page.locator("#conn")).to_have_attribute("data-state", "online")
            job.iterations(5)  # live
            wait_until(lambda: chart_points(page, "Episode return") == 25, 30, "live points")
        # The service is gone: the page says so.
        expect(page.locator("#conn")).to_have_attribute("data-state", "offline", timeout=15_000)
        expect(page.locator("#conn")).to_have_text(re.compile("offline"))
        page.screenshot(path=str(artifacts / "offline.png"))

        with live_server(settings, port=port) as server:
            expect(page.locator("#conn")).to_have_attribute("data-state", "online", timeout=30_000)
            job.iterations(10)
            wait_until(lambda: chart_points(page, "Episode return") == 35, 30, "resumed points")
            job.status("succeeded", "stop criterion met")
            badge = page.locator(".title-line .badge")
            expect(badge).to_have_attribute("data-status", "succeeded", timeout=15_000)
            job.close()
    finally:
        context.close()
    # Only the failures of the outage itself may be logged: refused while the service is down,
    # reset when it went away with a request (a poll, a websocket handshake) in flight.
    outage = re.compile(
        r"WebSocket connection to .* failed|ERR_CONNECTION_REFUSED|ERR_CONNECTION_RESET"
        r"|Failed to fetch"
    )
    unexpected = [e for e in errors if not outage.search(e)]
    assert not unexpected, unexpected
