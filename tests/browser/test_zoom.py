"""Zooming a chart fetches the zoomed range at full resolution from the server.

A long simulated history (more points than the first, downsampled load asks for) is posted
through the real job-side API; dragging across a chart must request `step_min`/`step_max` and
end up drawing more points than the downsampled view had.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import (
    chart_drawn,
    chart_points,
    dashboard_settings,
    new_page,
    wait_until,
)
from tests.browser.server import live_server
from tests.browser.simulate import SimulatedJob

pytestmark = pytest.mark.browser

CHART = "Episode length"


def test_drag_zoom_fetches_full_resolution(
    browser: Any, frontend_dist: Path, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    settings = dashboard_settings(tmp_path, frontend_dist)
    errors: list[str] = []
    with live_server(settings) as server:
        context, page = new_page(browser, errors, viewport={"width": 1200, "height": 900})
        try:
            created = httpx.post(
                f"{server.url}/api/v1/experiments", json={"name": "long", "config": {}}
            )
            exp_id = created.json()["id"]
            job = SimulatedJob(server, exp_id)
            job.status("running", "simulated job started")
            job.iterations(6000)
            job.close()

            page.goto(f"{server.url}/#/experiments/{exp_id}")
            before = wait_until(lambda: chart_points(page, CHART), 30, "history")
            assert before <= 2000  # the server downsampled the 6000-point history

            over = page.locator(f'[data-chart="{CHART}"] .u-over')
            box = over.bounding_box()
            assert box is not None
            y = box["y"] + box["height"] / 2
            zoom = re.compile(r"/metrics\?.*step_min=\d+.*step_max=\d+")
            with page.expect_request(lambda r: bool(zoom.search(r.url))) as request:
                page.mouse.move(box["x"] + box["width"] * 0.40, y)
                page.mouse.down()
                page.mouse.move(box["x"] + box["width"] * 0.50, y, steps=5)
                page.mouse.up()
            # The charts zoom together, so one request fetches every series of the range.
            assert "episode_len_mean" in request.value.url
            assert "policy_loss" in request.value.url
            # ~600 raw points in the zoomed 10 % replace ~200 downsampled ones.
            wait_until(lambda: chart_points(page, CHART) > before + 200, 15, "full resolution")
            wait_until(lambda: chart_points(page, "Policy loss") > before + 200, 15, "synced")
            # ... and they are drawn: the zoomed 10 % of 6000 iterations, ~600 points, on screen.
            wait_until(lambda: chart_drawn(page, CHART) > 450, 15, "full resolution on screen")
            wait_until(lambda: chart_drawn(page, "Policy loss") > 450, 15, "synced on screen")
            page.screenshot(path=str(artifacts / "zoomed.png"))
            # Double-click resets the zoom; the extra resolution stays merged in.
            over.dblclick()
            zoomed = chart_points(page, CHART)
            assert zoomed > before + 200

            # Wall time on x, smoothing and log scale redraw the same points.
            page.select_option('[name="xmode"]', "time")
            expect(page.locator(f'[data-chart="{CHART}"] .u-legend')).to_contain_text("wall time")
            wait_until(lambda: chart_points(page, CHART) > 0, 10, "time axis")
            page.locator('[name="smoothing"]').fill("0.9")
            page.check('[name="log"]')
            wait_until(lambda: chart_points(page, CHART) > 0, 10, "log scale")
            page.screenshot(path=str(artifacts / "time-axis-smoothed-log.png"))
        finally:
            context.close()
    assert not errors, errors
