"""The new-experiment form shows the preset an env id gets and marks the fields it set; typed
values win, and the experiment stores the resolved config. Needs no Ray (jobs disabled)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server

pytestmark = pytest.mark.browser


def test_form_shows_the_preset_marks_its_fields_and_user_values_win(
    browser: Any, frontend_dist: Path, tmp_path: Path, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    settings = dashboard_settings(tmp_path, frontend_dist)
    errors: list[str] = []
    with live_server(settings) as server:
        context, page = new_page(browser, errors, viewport={"width": 1200, "height": 900})
        try:
            page.goto(f"{server.url}/#/new")
            note = page.locator(".preset-note")
            # CartPole: its preset keeps PPOConfig's defaults, so nothing is marked.
            expect(note).to_have_attribute("data-preset", "classic_control")
            expect(page.locator("[data-from-preset]")).to_have_count(0)

            page.fill('[name="config.env_id"]', "ALE/Pong-v5")
            expect(note).to_have_attribute("data-preset", "atari", timeout=10_000)
            expect(note).to_contain_text("CleanRL")
            envs = page.locator('[name="config.num_envs_per_env_runner"]')
            expect(envs).to_have_value("64")
            expect(page.locator('[name="config.clip_rewards"]')).to_have_value("1")
            expect(page.locator('[name="config.model.vf_share_layers"]')).to_be_checked()
            for path in ("num_envs_per_env_runner", "clip_rewards", "lr", "env_config"):
                expect(page.locator(f'[data-field="{path}"]')).to_have_attribute(
                    "data-from-preset", ""
                )
            expect(page.locator('[data-field="seed"]')).not_to_have_attribute(
                "data-from-preset", re.compile(".*")
            )
            page.screenshot(path=str(artifacts / "new-experiment-preset.png"), full_page=True)

            page.fill('[name="config.num_envs_per_env_runner"]', "8")  # the user's value wins
            expect(page.locator('[data-field="num_envs_per_env_runner"]')).not_to_have_attribute(
                "data-from-preset", re.compile(".*")
            )
            expect(page.locator('[name="name"]')).to_have_value(re.compile(r"^ale-pong-v5-"))
            page.fill('[name="name"]', "pong-from-form")
            page.click("button[type=submit]")
            page.wait_for_url(re.compile(r"#/experiments/\d+$"))
            exp_id = int(page.url.rsplit("/", 1)[1])
            config = httpx.get(f"{server.url}/api/v1/experiments/{exp_id}").json()["config"]
            assert config["preset"] == "atari" and config["num_envs_per_env_runner"] == 8
            assert config["clip_rewards"] == 1.0 and config["lr"] == 7e-4
            assert config["env_config"] == {
                "repeat_action_probability": 0.0,
                "img_height": 64,
                "img_width": 64,
            }

            # Another env re-resolves the untouched fields; a named preset is honoured.
            page.goto(f"{server.url}/#/new")
            expect(note).to_have_attribute("data-preset", "classic_control")
            page.fill('[name="config.env_id"]', "Pendulum-v1")
            expect(note).to_have_attribute(
                "data-preset", "classic_control_continuous", timeout=10_000
            )
            expect(note).to_contain_text("Pendulum settings")
            expect(page.locator('[name="config.gamma"]')).to_have_value("0.95")
            page.select_option('[name="config.preset"]', "none")
            expect(note).to_have_attribute("data-preset", "none", timeout=10_000)
            expect(page.locator('[name="config.gamma"]')).to_have_value("0.98")
            expect(page.locator("[data-from-preset]")).to_have_count(0)
        finally:
            context.close()
    assert errors == []
