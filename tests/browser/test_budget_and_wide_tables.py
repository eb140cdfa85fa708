"""Two things a new user could not see: where a budget that is not a whole number of
iterations really ends (the form says so under `stop.env_steps`), and that the experiments
table holds more columns to the right (the hidden side is shaded, the sideways scrollbar
stays in the window). Needs no Ray (jobs disabled)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser


def test_the_form_says_where_a_budget_ends_in_whole_iterations(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1200, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        try:
            page.goto(f"{server.url}/#/new")
            note = page.locator('[data-role="budget-note"]')
            page.fill('[name="config.env_id"]', "LunarLander-v3")
            batch = page.locator('[name="config.train_batch_size_per_learner"]')
            expect(batch).to_have_value("16384", timeout=10_000)  # the box2d preset's batch
            page.fill('[name="config.stop.env_steps"]', "20000")
            expect(note).to_be_visible()
            expect(note).to_contain_text("whole iterations of 16,384 env steps")
            expect(note).to_contain_text("ends at 32,768 steps")
            page.fill('[name="config.num_learners"]', "2")
            expect(note).to_contain_text("ends at 32,768 steps")  # 2 x 16,384 per iteration
            page.fill('[name="config.stop.env_steps"]', "65536")
            expect(note).to_be_hidden()  # a whole number of iterations: nothing to say
        finally:
            context.close()
    assert errors == [], errors


def test_the_experiments_table_shows_that_columns_are_hidden_to_the_right(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        api = f"{server.url}{API_PREFIX}"
        try:
            for i in range(40):  # a table longer than the window
                body = {"name": f"run-{i}", "config": {"env_id": "CartPole-v1"}}
                assert httpx.post(f"{api}/experiments", json=body).status_code == 201
            cols = "lr,gamma,lambda_,clip_param,num_epochs,minibatch_size,entropy_coeff"
            page.goto(f"{server.url}/#/?cols={cols},vf_loss_coeff,grad_clip,seed")
            wrap = page.locator(".list-wrap")
            expect(page.locator("thead th")).to_have_count(21)
            expect(wrap).to_have_attribute("data-more-right", "")
            box = wrap.bounding_box()
            assert box is not None and box["y"] + box["height"] <= 900  # its scrollbar in view
            wrap.evaluate("w => { w.scrollLeft = w.scrollWidth; }")
            expect(wrap).to_have_attribute("data-more-left", "")
            expect(wrap).not_to_have_attribute("data-more-right", "")
            for _ in range(8):  # remove the added columns until everything fits
                page.locator("button.remove-col").last.click()
            expect(page.locator("thead th")).to_have_count(13)
            expect(wrap).not_to_have_attribute("data-more-left", "")
            expect(wrap).not_to_have_attribute("data-more-right", "")
        finally:
            context.close()
    assert errors == [], errors
