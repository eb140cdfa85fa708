"""A pasted config with keys PPOConfig does not have: the form lists them where the user sees
them, suggests the field meant, and lets the user fix or drop them, so the form can be
submitted without a reload. Needs no Ray (jobs disabled)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server

pytestmark = pytest.mark.browser

PASTE = '{"env_id": "CartPole-v1", "learning_rate": 0.001, "wandb_project": "x", "gamma": 0.98}'


def test_unknown_keys_are_shown_with_a_suggestion_and_can_be_fixed(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        try:
            page.goto(f"{server.url}/#/new")
            page.click(".file-load > summary")
            page.fill('[name="paste"]', PASTE)
            page.click('[data-action="apply-paste"]')
            box = page.locator('[data-role="unknown-keys"]')
            expect(box).to_be_visible()
            lr_key = box.locator('[data-unknown-key="learning_rate"]')
            expect(lr_key).to_contain_text("did you mean lr?")
            expect(box.locator('[data-unknown-key="wandb_project"]')).to_contain_text(
                "no field of that name"
            )
            expect(page.locator('[name="config.gamma"]')).to_have_value("0.98")

            lr_key.locator('[data-action="use-suggestion"]').click()
            expect(page.locator('[name="config.lr"]')).to_have_value("0.001")
            box.locator('[data-unknown-key="wandb_project"] [data-action="remove-key"]').click()
            expect(box).to_be_hidden()

            page.fill('[name="name"]', "pasted")
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"#/experiments/\d+$"), timeout=15_000)
            exp_id = int(page.url.rsplit("/", 1)[1])
            config = httpx.get(f"{server.url}/api/v1/experiments/{exp_id}").json()["config"]
            assert config["lr"] == 0.001
            assert config["gamma"] == 0.98
        finally:
            context.close()
    assert not errors, errors
