"""Fork from the dashboard keeps the parent: the form opened from an experiment's "Fork" link
creates an experiment whose parent is that one, shown as a "from #N" link on its page, as the
CLI's and the client's fork do; the parent's page links it back ("forked as #M"; a resumed run
reads "resumed as #M"). Needs no Ray (jobs disabled)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import live_server
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser


def test_a_fork_made_in_the_form_keeps_its_parent(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        api = f"{server.url}{API_PREFIX}"
        try:
            config = {"env_id": "CartPole-v1", "lr": 0.002, "stop": {"env_steps": 4096}}
            parent = httpx.post(f"{api}/experiments", json={"name": "base", "config": config})
            parent_id = parent.json()["id"]
            page.goto(f"{server.url}/#/experiments/{parent_id}")
            page.click("a:has-text('Fork')")
            page.wait_for_url(re.compile(rf"#/new\?from={parent_id}$"))
            expect(page.locator('[name="name"]')).to_have_value("base-fork")
            page.locator('[name="config.lr"]').fill("0.003")
            page.click("button:has-text('Create and start')")
            page.wait_for_url(re.compile(rf"#/experiments/(?!{parent_id}$)\d+$"))
            child = httpx.get(f"{api}/experiments/{page.url.rsplit('/', 1)[1]}").json()
            assert child["parent_id"] == parent_id and child["config"]["lr"] == 0.003
            expect(page.locator(".meta")).to_contain_text(f"from #{parent_id}")
            reason = child["events"][0]["reason"]
            assert reason == f"forked from experiment {parent_id}", child["events"]
            # Both ways: the parent's page links the fork, the fork's page links the parent.
            page.click(f".meta a.parent-link:has-text('#{parent_id}')")
            page.wait_for_url(re.compile(rf"#/experiments/{parent_id}$"))
            fork_link = page.locator(".meta a.child-link")
            expect(fork_link).to_have_text(f"#{child['id']}")
            expect(page.locator(".meta")).to_contain_text(f"forked as #{child['id']}")
            fork_link.click()
            page.wait_for_url(re.compile(rf"#/experiments/{child['id']}$"))
        finally:
            context.close()
    assert errors == [], errors
