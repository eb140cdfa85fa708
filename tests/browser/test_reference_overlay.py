"""The shipped CartPole-v1 reference (SB3 PPO, rl-zoo) overlays the episode return chart of the
experiment page and the compare page: a toggle labelled with its source and settings adds a
legend-labelled mean line and min/max band, which change what the canvas draws and stretch the
x axis to the reference's env steps; toggling off removes them again. An env without a
reference gets no toggle."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.references.service import list_references
from tests.browser.helpers import chart_points, dashboard_settings, new_page, wait_until
from tests.browser.server import live_server
from tests.browser.simulate import SimulatedJob

pytestmark = pytest.mark.browser

ITERATIONS = 40  # x 512 env steps: the experiment reaches 20,480 steps
NO_REF_ENV = "MountainCar-v0"


def _canvas_digest(page: Any, chart: str) -> str:
    data = page.evaluate(
        '(t) => document.querySelector(`[data-chart="${t}"] canvas`).toDataURL()', chart
    )
    return hashlib.sha256(data.encode()).hexdigest()


def _legend_row(page: Any, chart: str, label: str) -> Any:
    return page.locator(f'[data-chart="{chart}"] .u-legend .u-series', has_text=label)


def _x_max(page: Any, chart: str) -> float:
    return float(page.locator(f'[data-chart="{chart}"]').get_attribute("data-x-max") or 0)


def _check_overlay(page: Any, chart: str, label: str, reference_end: float, shot: Path) -> None:
    """Toggle the reference on and off on `chart` and check what is drawn each time."""
    from playwright.sync_api import expect

    toggle = page.locator('.ref-toggle[data-env="CartPole-v1"]')
    expect(toggle).to_be_visible(timeout=15_000)
    text = toggle.inner_text()
    assert "SB3 PPO (rl-zoo)" in text and "3 seeds" in text
    assert "rl-baselines3-zoo" in text and "stable-baselines3" in text
    assert "n_steps 32" in text and "gae_lambda 0.8" in text  # the settings
    mean_row = _legend_row(page, chart, f"{label} mean")
    expect(mean_row).to_have_count(1)
    expect(mean_row).to_have_class("u-series u-off")  # present but hidden
    wait_until(lambda: 0 < _x_max(page, chart) <= ITERATIONS * 512, 15, "own x range")
    before = _canvas_digest(page, chart)

    toggle.locator("input").check()
    for edge in ("mean", "max", "min"):
        expect(_legend_row(page, chart, f"{label} {edge}")).to_have_class("u-series")
    wait_until(lambda: _x_max(page, chart) >= reference_end, 15, "x axis out to the reference")
    assert _canvas_digest(page, chart) != before  # the band and mean line are painted
    page.locator(f'[data-chart="{chart}"]').screenshot(path=str(shot))

    toggle.locator("input").uncheck()
    expect(mean_row).to_have_class("u-series u-off")
    wait_until(lambda: _x_max(page, chart) <= ITERATIONS * 512, 15, "own x range again")

    # A click on a reference's legend entry toggles the whole reference, toggle included.
    _legend_row(page, chart, f"{label} max").locator(".u-label").click()
    expect(toggle.locator("input")).to_be_checked()
    expect(mean_row).to_have_class("u-series")
    wait_until(lambda: _x_max(page, chart) >= reference_end, 15, "x axis out again")
    toggle.locator("input").uncheck()
    expect(_legend_row(page, chart, f"{label} max")).to_have_class("u-series u-off")


def test_reference_overlay_on_experiment_and_compare_pages(
    browser: Any, frontend_dist: Path, tmp_path: Path, artifacts: Path
) -> None:
    (reference,) = list_references("CartPole-v1")
    assert list_references(NO_REF_ENV) == []
    reference_end = reference.env_steps.x[-1]
    assert reference_end > 2 * ITERATIONS * 512  # it visibly stretches the axis
    settings = dashboard_settings(tmp_path, frontend_dist)
    errors: list[str] = []
    with live_server(settings) as server:
        context, page = new_page(browser, errors, viewport={"width": 1300, "height": 1000})
        try:
            ids = []
            # Two CartPole experiments, and one on an env without a reference.
            for name, env_id in (("a", "CartPole-v1"), ("b", "CartPole-v1"), ("c", NO_REF_ENV)):
                body = {"name": name, "config": {"env_id": env_id}}
                response = httpx.post(f"{server.url}/api/v1/experiments", json=body)
                assert response.status_code == 201, response.text
                ids.append(response.json()["id"])
            for i, exp_id in enumerate(ids[:2]):
                job = SimulatedJob(server, exp_id, seed=i)
                job.status("running", "simulated job started")
                job.iterations(ITERATIONS)
                job.close()

            page.goto(f"{server.url}/#/experiments/{ids[0]}")
            wait_until(lambda: chart_points(page, "Episode return") >= ITERATIONS, 30, "history")
            shot = artifacts / "reference_overlay_detail.png"
            _check_overlay(page, "Episode return", reference.label, reference_end, shot)

            page.goto(f"{server.url}/#/compare?ids={ids[0]},{ids[1]}")
            chart = "Episode return (mean)"
            wait_until(lambda: chart_points(page, chart) >= ITERATIONS, 30, "compare history")
            shot = artifacts / "reference_overlay_compare.png"
            _check_overlay(page, chart, reference.label, reference_end, shot)

            page.goto(f"{server.url}/#/experiments/{ids[2]}")
            wait_until(lambda: page.locator(".chart").count() > 0, 30, "charts")
            page.wait_for_load_state("networkidle")
            assert page.locator(".ref-toggle").count() == 0
            assert page.locator(".ref-overlay").first.is_hidden()
        finally:
            context.close()
    assert not errors, errors
