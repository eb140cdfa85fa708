"""The experiment page at 1400x900 with simulated jobs (no Ray): it opens at its top after a
submit, its checkpoints table shows Evaluate without scrolling, a missing id is one message
(no status badge, no charts), a run that failed before its first metric shows no empty charts,
and Resume takes new stop criteria."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page
from tests.browser.server import LiveServer, live_server
from tests.browser.simulate import SimulatedJob
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser
VIEWPORT = {"width": 1400, "height": 900}
CONFIG = {"env_id": "CartPole-v1", "stop": {"env_steps": 2048}}


@pytest.fixture
def served(browser: Any, frontend_dist: Path, tmp_path: Path) -> Any:
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport=VIEWPORT)
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        try:
            yield server, page, errors
        finally:
            context.close()


def _experiment(server: LiveServer, name: str) -> int:
    body = {"name": name, "config": CONFIG}
    created = httpx.post(f"{server.url}{API_PREFIX}/experiments", json=body)
    assert created.status_code == 201, created.text
    return int(created.json()["id"])


def test_a_finished_run_resumes_under_new_stop_criteria(served: Any) -> None:
    from playwright.sync_api import expect

    server, page, errors = served
    exp_id = _experiment(server, "budget met")
    job = SimulatedJob(server, exp_id)
    job.status("running", "started")
    job.iterations(4)
    job.client.put(
        "/checkpoints", params={"iteration": 4, "env_steps": 2048}, content=b"archive"
    ).raise_for_status()
    job.status("succeeded", "stop criterion met: env_steps")

    page.goto(f"{server.url}/#/experiments/{exp_id}")
    # Evaluate is inside its panel at 1400 px: no part of the table is scrolled out of view.
    evaluate = page.locator("tr[data-checkpoint] [data-action=evaluate]").first
    expect(evaluate).to_be_visible()
    wrap = page.locator(".checkpoints").locator("xpath=..")
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth"), "checkpoints table overflows"
    panel = wrap.locator("xpath=..").bounding_box()
    button = evaluate.bounding_box()
    assert panel and button and button["x"] + button["width"] <= panel["x"] + panel["width"]

    page.click("[data-action=resume]")
    form = page.locator("[data-role=resume-form]")
    expect(form.locator('[name="stop.env_steps"]')).to_have_value("2048")
    form.locator('[name="stop.env_steps"]').fill("0")
    page.click("[data-action=resume-submit]")
    expect(page.locator(".error-box")).to_contain_text("config.stop.env_steps")
    form.locator('[name="stop.env_steps"]').fill("8192")
    form.locator('[name="stop.wall_seconds"]').fill("600")
    page.click("[data-action=resume-submit]")
    page.wait_for_url(re.compile(rf"#/experiments/(?!{exp_id}$)\d+$"))
    new_id = int(page.url.rsplit("/", 1)[1])
    stop = httpx.get(f"{server.url}{API_PREFIX}/experiments/{new_id}").json()["config"]["stop"]
    assert stop["env_steps"] == 8192 and stop["wall_seconds"] == 600
    expect(page.locator(".meta")).to_contain_text(f"from #{exp_id}")
    errors[:] = [e for e in errors if "422" not in e]  # the refused first try
    assert not errors, errors


def test_after_submit_the_page_opens_at_its_top(served: Any) -> None:
    from playwright.sync_api import expect

    server, page, errors = served
    page.goto(f"{server.url}/#/new")
    page.fill('[name="name"]', "scrolled")
    page.locator("button[type=submit]").scroll_into_view_if_needed()
    assert page.evaluate("window.scrollY") > 0
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/experiments/\d+$"))
    expect(page.locator(".title-line h1")).to_have_text("scrolled")
    assert page.evaluate("window.scrollY") == 0
    expect(page.locator("[data-action=stop]")).to_be_in_viewport()
    assert not errors, errors


def test_a_missing_id_and_a_run_that_failed_at_start_up(served: Any) -> None:
    from playwright.sync_api import expect

    server, page, errors = served
    page.goto(f"{server.url}/#/experiments/999")
    missing = page.locator("[data-role=missing]")
    expect(missing).to_contain_text("experiment 999 does not exist")
    expect(page.locator(".badge")).to_have_count(0)
    expect(page.locator("[data-chart]")).to_have_count(0)

    exp_id = _experiment(server, "broken")
    job = SimulatedJob(server, exp_id)
    job.status("running", "started")
    job.status("failed", "job failed", error="gymnasium.error.NameNotFound: NoSuchEnv")
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    expect(page.locator(".failure")).to_contain_text("NameNotFound")
    expect(page.locator("[data-role=no-metrics]")).to_contain_text("No metrics were recorded")
    expect(page.locator("[data-chart]").first).to_be_hidden()
    errors[:] = [e for e in errors if "404" not in e]  # the missing experiment's GET
    assert not errors, errors


def test_metrics_export_downloads_every_point(served: Any, tmp_path: Path) -> None:
    server, page, errors = served
    exp_id = _experiment(server, "exported")
    job = SimulatedJob(server, exp_id)
    job.status("running", "started")
    job.iterations(30)
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    page.locator('[data-chart="Episode return"]').wait_for()
    with page.expect_download() as download:
        page.click("[data-action=export-csv]")
    assert download.value.suggested_filename == f"experiment-{exp_id}-metrics.csv"
    path = tmp_path / "m.csv"
    download.value.save_as(path)
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    assert header[0] == "step" and "episode_return_mean" in header and "kl" in header
    assert [int(line.split(",")[0]) for line in lines[1:]] == [512 * i for i in range(1, 31)]
    with page.expect_download() as download:
        page.click("[data-action=export-json]")
    download.value.save_as(tmp_path / "m.json")
    body = json.loads((tmp_path / "m.json").read_text())
    assert body["experiment_id"] == exp_id
    assert len(body["series"]["episode_return_mean"]["step"]) == 30
    assert not errors, errors


def test_choose_charts_any_logged_metric_and_hide_defaults(served: Any) -> None:
    from playwright.sync_api import expect

    server, page, errors = served
    exp_id = _experiment(server, "charted")
    job = SimulatedJob(server, exp_id)
    job.status("running", "started")
    job.iterations(12)  # logs grad_norm and lr, which no default chart plots
    page.goto(f"{server.url}/#/experiments/{exp_id}")
    page.locator('[data-chart="Episode return"][data-points="12"]').wait_for()
    page.click("[data-role=chart-picker] > summary")
    picker = page.locator("[data-role=chart-picker]")
    picker.locator('[data-metric="grad_norm"]').check()
    picker.locator('[data-metric="chart:Policy loss"]').uncheck()
    expect(page.locator('[data-chart="grad_norm"]')).to_have_attribute("data-points", "12")
    expect(page.locator('[data-chart="Policy loss"]')).to_be_hidden()
    job.iterations(3)  # live points reach the added chart too
    expect(page.locator('[data-chart="grad_norm"]')).to_have_attribute("data-points", "15")
    page.reload()  # the choice is kept in this browser
    expect(page.locator('[data-chart="grad_norm"]')).to_have_attribute("data-points", "15")
    expect(page.locator('[data-chart="Policy loss"]')).to_be_hidden()
    assert not errors, errors


def test_rename_retag_and_notes_shown_on_the_page_the_list_and_compare(served: Any) -> None:
    from playwright.sync_api import expect

    server, page, errors = served
    first, second = _experiment(server, "first name"), _experiment(server, "other")
    page.goto(f"{server.url}/#/experiments/{first}")
    page.click("[data-action=edit]")
    form = page.locator("[data-role=edit-form]")
    expect(form.locator('[name="edit.name"]')).to_have_value("first name")
    form.locator('[name="edit.name"]').fill("lr probe")
    form.locator('[name="edit.tags"]').fill("probe, lr")
    notes = "## Why\n\nlr **3e-3** diverged, see [SB3](https://example.org/sb3)\n\n- try 3e-4\n"
    notes += "<img src=x onerror=alert(1)>"
    form.locator('[name="edit.notes"]').fill(notes)
    page.click("[data-action=save-edit]")
    expect(page.locator(".title-line h1")).to_have_text("lr probe")
    shown = page.locator("[data-role=notes]")
    expect(shown.locator("h4")).to_have_text("Why")
    expect(shown.locator("strong")).to_have_text("3e-3")
    expect(shown.locator("a")).to_have_attribute("href", "https://example.org/sb3")
    expect(shown.locator("li")).to_have_text("try 3e-4")
    expect(shown.locator("img")).to_have_count(0)  # markup in a note is text, never HTML
    expect(shown).to_contain_text("<img src=x")
    saved = httpx.get(f"{server.url}{API_PREFIX}/experiments/{first}").json()
    assert saved["tags"] == ["lr", "probe"] and saved["notes"] == notes.strip()

    page.goto(f"{server.url}/#/")
    row = page.locator(f'tr[data-id="{first}"]')
    expect(row.locator(".row-notes")).to_have_text("Why")
    expect(row.locator("td.tags")).to_have_text("lr, probe")
    page.goto(f"{server.url}/#/compare?ids={first},{second}")
    expect(page.locator(f'.legend li[data-id="{first}"] [data-role=notes]')).to_have_text("Why")
    expect(page.locator(f'.legend li[data-id="{second}"] [data-role=notes]')).to_have_count(0)
    assert not errors, errors
