"""The compare page groups runs that differ only in their seed: one mean line and min-max
band per group, labelled by the fields that differ, toggled in the URL. Simulated jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import chart_points, dashboard_settings, new_page, wait_until
from tests.browser.server import live_server
from tests.browser.simulate import SimulatedJob
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser
TITLE = "Episode return (mean)"


def test_group_by_config_except_seed(browser: Any, frontend_dist: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        ids = []
        for lr in (1e-3, 3e-4):
            for seed in (0, 1):
                config = {"env_id": "Acrobot-v1", "lr": lr, "seed": seed}
                body = {"name": f"lr {lr} seed {seed}", "config": config}
                exp_id = httpx.post(f"{server.url}{API_PREFIX}/experiments", json=body).json()["id"]
                job = SimulatedJob(server, exp_id, seed=seed)
                job.status("running", "started")
                job.iterations(10)
                ids.append(exp_id)
        try:
            page.goto(f"{server.url}/#/compare?ids={','.join(map(str, ids))}")
            chart = page.locator(f'[data-chart="{TITLE}"]')
            wait_until(lambda: chart_points(page, TITLE) == 10, 15, "one line per run")
            assert chart.get_attribute("data-groups") == "0"
            others = chart.locator(".u-legend .u-series").count() - 4  # x, reference curves
            page.check('[name="group-seeds"]')
            page.wait_for_url(f"**/#/compare?ids={','.join(map(str, ids))}&group=seeds")
            chart = page.locator(f'[data-chart="{TITLE}"]')
            expect(chart).to_have_attribute("data-groups", "2")
            wait_until(lambda: chart_points(page, TITLE) == 10, 15, "the groups' points")
            legend = chart.locator(".u-legend").inner_text()
            assert "lr=0.001 (2) mean" in legend and "lr=0.0003 (2) mean" in legend
            assert chart.locator(".u-legend .u-series").count() == others + 3 * 2
            expect(page.locator('[name="group-seeds"]')).to_be_checked()
        finally:
            context.close()
    assert not errors, errors
