"""A sweep created from the dashboard: the sweeps page's form (base config, grid rows, seeds)
sends what `rollout sweep submit` sends, shows the API's field errors, and opens with an
experiment's config from its page's "Sweep…" link. Needs no Ray (jobs disabled)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser


def test_create_a_sweep_from_the_sweeps_page_and_from_an_experiment(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        api = f"{server.url}{API_PREFIX}"
        try:
            page.goto(f"{server.url}/#/sweeps")
            page.click(".new-sweep > summary")
            form = page.locator("[data-role=sweep-form]")
            form.locator('[name="sweep.name"]').fill("ui lr sweep")
            form.locator('[name="grid.key"]').fill("learning_rate")
            form.locator("[data-action=create-sweep]").click()
            expect(form.locator('[data-error-for="grid.learning_rate"]')).to_contain_text(
                "did you mean lr"
            )
            form.locator('[name="grid.key"]').fill("lr")
            form.locator('[name="grid.values"]').fill("3e-4, 3e-3")
            form.locator("[data-action=add-grid-row]").click()
            form.locator('[name="grid.key"]').nth(1).fill("model.hidden_sizes")
            form.locator('[name="grid.values"]').nth(1).fill("[[32], [64, 64]]")
            form.locator('[name="sweep.seeds"]').fill("0-1")
            form.locator("[data-action=create-sweep]").click()
            page.wait_for_url(re.compile(r"#/sweeps/\d+$"))
            sweep = httpx.get(f"{api}/sweeps/{page.url.rsplit('/', 1)[1]}").json()
            assert sweep["name"] == "ui lr sweep" and sweep["size"] == 8
            assert sweep["grid"] == {"lr": [3e-4, 3e-3], "model.hidden_sizes": [[32], [64, 64]]}
            assert sweep["seeds"] == [0, 1] and sweep["config"]["env_id"] == "CartPole-v1"

            config = {
                "env_id": "Acrobot-v1",
                "gamma": 0.97,
                "seed": 5,
                "stop": {"env_steps": 3000},
            }
            exp = httpx.post(f"{api}/experiments", json={"name": "acro", "config": config})
            page.goto(f"{server.url}/#/experiments/{exp.json()['id']}")
            page.click("[data-action=sweep-from]")
            page.wait_for_url(re.compile(r"#/sweeps\?from=\d+$"))
            base = page.locator('[name="sweep.config"]')
            expect(base).to_be_visible()
            shown = json.loads(base.input_value())
            assert shown["gamma"] == 0.97 and "seed" not in shown
            expect(page.locator('[name="sweep.name"]')).to_have_value("acro sweep")
            expect(page.locator('[name="sweep.seeds"]')).to_have_value("5, 6, 7")
            # Untouched, the form creates the sweep: the experiment's seed starts the seeds.
            page.locator("[data-action=create-sweep]").click()
            page.wait_for_url(re.compile(r"#/sweeps/\d+$"))
            sweep = httpx.get(f"{api}/sweeps/{page.url.rsplit('/', 1)[1]}").json()
            assert sweep["name"] == "acro sweep" and sweep["seeds"] == [5, 6, 7]
            assert sweep["config"]["gamma"] == 0.97 and "seed" not in sweep["config"]
        finally:
            context.close()
    assert [e for e in errors if "422" not in e] == [], errors
