"""The dashboard in real Chromium against the real service running real Ray jobs.

One module-scoped service (uvicorn thread, SQLite temp file, the shared local Ray cluster). The
tests follow a user: create an experiment through the form (a bad value first: the API's 422
shows next to its field), watch it start and its return chart fill live, stop it, download a
checkpoint, see a failure explained, filter the list and compare two experiments. Every page is
screenshotted to test-artifacts/ and no page may log a console error.
"""

from __future__ import annotations

import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.jobs.ray_head import LocalRayHead
from tests.browser.helpers import chart_points, dashboard_settings, new_page, wait_until
from tests.browser.server import LiveServer, live_server
from trainer.config import PPOConfig

pytestmark = [pytest.mark.browser, pytest.mark.ray]

# Serial-mode CartPole that learns a little within seconds and ends by itself.
QUICK: dict[str, Any] = {
    "env_id": "CartPole-v1",
    "num_envs_per_env_runner": 8,
    "train_batch_size_per_learner": 1024,
    "minibatch_size": 256,
    "num_epochs": 4,
    "lr": 3e-4,
    "stop": {"env_steps": 30_000},
    "checkpoint_every": 5,
}
# What the form test types in: the same, but it runs until stopped.
FORM_VALUES = {
    "lr": "0.001",
    "num_envs_per_env_runner": "8",
    "train_batch_size_per_learner": "1024",
    "minibatch_size": "256",
    "num_epochs": "4",
    "stop.env_steps": "50000000",
    "checkpoint_every": "2",
}


class State:
    """What the tests of this module hand on to each other."""

    form_id: int | None = None
    quick_id: int | None = None


@pytest.fixture(scope="module")
def state() -> State:
    return State()


@pytest.fixture(scope="module")
def service(
    ray_head: LocalRayHead,
    frontend_dist: Path,
    tmp_path_factory: pytest.TempPathFactory,
    state: State,
) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("browser")
    settings = dashboard_settings(
        data_dir,
        frontend_dist,
        ray_address=ray_head.address,
        max_concurrent_experiments=4,
    )
    with live_server(settings) as server, httpx.Client(base_url=f"{server.url}/api/v1") as api:
        # Started first so it trains while the form is being filled in.
        created = api.post("/experiments", json={"name": "quick-baseline", "config": QUICK})
        assert created.status_code == 201, created.text
        state.quick_id = created.json()["id"]
        try:
            yield server
        finally:
            stop_all(api)


def stop_all(api: httpx.Client) -> None:
    """Leave no job running on the shared cluster."""
    items = api.get("/experiments", params={"limit": 200}).json()["items"]
    for exp in items:
        if exp["status"] in ("pending", "queued", "running"):
            api.post(f"/experiments/{exp['id']}/stop")
    for exp in items:
        wait_until(
            lambda i=exp["id"]: (
                api.get(f"/experiments/{i}").json()["status"] in ("succeeded", "failed", "stopped")
            ),
            90,
            f"experiment {exp['id']} to end",
        )


class Console:
    """Console errors of a page. A test may allow the ones it provokes on purpose."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.allowed: list[re.Pattern[str]] = []

    def allow(self, pattern: str) -> None:
        self.allowed.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.allowed)]


@pytest.fixture
def console() -> Console:
    return Console()


@pytest.fixture
def page(browser: Any, console: Console, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh page; fails the test if the page logged a console error it did not expect."""
    context, page = new_page(
        browser, console.errors, viewport={"width": 1280, "height": 900}, accept_downloads=True
    )
    page.set_default_timeout(30_000)
    yield page
    context.close()
    assert not console.unexpected(), f"console errors in {request.node.name}: {console.errors}"


def shot(page: Any, artifacts: Path, name: str) -> None:
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)


def test_form_shows_422_by_field_then_runs_stops_and_downloads(
    service: LiveServer,
    page: Any,
    console: Console,
    artifacts: Path,
    state: State,
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    # Chromium logs every 4xx response; this one is provoked on purpose (and is the only one).
    console.allow(r"status of 422 \(Unprocessable")
    page.goto(f"{service.url}/#/new")
    lr_input = page.locator('[name="config.lr"]')
    expect(lr_input).not_to_have_value("")
    assert float(lr_input.input_value()) == PPOConfig().lr  # defaults filled in
    expect(page.locator('[data-field="lr"] .help')).to_contain_text("learning rate")
    # A pasted YAML config fills the form (nested keys included).
    page.click("summary:has-text('Load a config file')")
    page.fill('[name="paste"]', "num_epochs: 3\nstop:\n  wall_seconds: 600\n")
    page.click("[data-action=apply-paste]")
    expect(page.locator('[name="config.num_epochs"]')).to_have_value("3")
    expect(page.locator('[name="config.stop.wall_seconds"]')).to_have_value("600")
    expect(page.locator('[name="config.stop.env_steps"]')).to_have_value("1000000")
    page.fill('[name="name"]', "browser-form")
    page.fill('[name="config.lr"]', "-1")
    page.click("button[type=submit]")
    error = page.locator('[data-error-for="config.lr"]')
    expect(error).to_contain_text("greater than 0")
    expect(page.locator('[data-field="lr"]')).to_have_class(re.compile("invalid"))
    assert page.url.endswith("#/new")
    shot(page, artifacts, "new-experiment-422")
    names = [e["name"] for e in httpx.get(f"{service.url}/api/v1/experiments").json()["items"]]
    assert "browser-form" not in names  # nothing stored for an invalid config

    for path, value in FORM_VALUES.items():
        page.fill(f'[name="config.{path}"]', value)
    expect(error).to_be_empty()  # editing clears the field's error
    page.fill('[name="tags"]', "browser, cartpole")
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/experiments/\d+$"))
    state.form_id = int(page.url.rsplit("/", 1)[1])

    badge = page.locator(".title-line .badge")
    expect(badge).to_have_attribute("data-status", "running", timeout=90_000)
    first = wait_until(lambda: chart_points(page, "Episode return"), 90, "return points")
    wait_until(lambda: chart_points(page, "Episode return") > first, 60, "live return points")
    expect(page.locator("#conn")).to_have_attribute("data-state", "online")
    expect(page.locator("tr[data-checkpoint]").first).to_be_visible(timeout=60_000)
    shot(page, artifacts, "experiment-running")

    page.click("[data-action=stop]")
    expect(badge).to_have_attribute("data-status", "stopped", timeout=90_000)
    expect(page.locator('.timeline li[data-to="stopped"]')).to_be_visible()
    expect(page.locator(".checkpoints .mark.best")).to_be_visible()
    with page.expect_download() as download:
        page.click("[data-download=best]")
    archive = tmp_path / "best.tar.gz"
    download.value.save_as(archive)
    assert tarfile.is_tarfile(archive)
    with tarfile.open(archive) as tar:
        assert tar.getnames()
    shot(page, artifacts, "experiment-stopped")

    # Fork: the form opens with this experiment's config.
    page.click("a:has-text('Fork')")
    page.wait_for_url(re.compile(r"#/new\?from=\d+$"))
    expect(page.locator('[name="name"]')).to_have_value("browser-form-fork")
    expect(page.locator('[name="config.lr"]')).to_have_value("0.001")
    expect(page.locator('[name="config.stop.env_steps"]')).to_have_value("50000000")
    page.go_back()

    # Resume: a new experiment continues from the latest checkpoint.
    page.click("[data-action=resume]")
    page.click("[data-action=resume-submit]")
    page.wait_for_url(re.compile(rf"#/experiments/(?!{state.form_id}$)\d+$"))
    expect(page.locator(".meta")).to_contain_text(f"from #{state.form_id}")
    expect(badge).to_have_attribute("data-status", "running", timeout=90_000)
    wait_until(lambda: chart_points(page, "Episode return"), 60, "resumed return points")
    steps = httpx.get(f"{service.url}/api/v1/experiments/{state.form_id}").json()["env_steps"]
    resumed = page.url.rsplit("/", 1)[1]
    first_step = httpx.get(
        f"{service.url}/api/v1/experiments/{resumed}/metrics",
        params={"names": "env_steps"},
    ).json()["series"]["env_steps"]["step"][0]
    assert first_step > steps - 5000  # it continued instead of starting from zero
    page.click("[data-action=stop]")
    expect(badge).to_have_attribute("data-status", "stopped", timeout=90_000)


def test_failure_is_explained_live_on_list_and_detail(
    service: LiveServer, page: Any, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(f"{service.url}/#/")
    expect(page.locator("#conn")).to_have_attribute("data-state", "online")
    broken = {**QUICK, "env_config": {"no_such_argument": 1}}  # the env itself raises
    created = httpx.post(
        f"{service.url}/api/v1/experiments", json={"name": "broken-env", "config": broken}
    )
    assert created.status_code == 201, created.text
    exp_id = created.json()["id"]
    # The row appears and turns failed through the websocket, without a reload.
    row_badge = page.locator(f'tr[data-id="{exp_id}"] .badge')
    expect(row_badge).to_have_attribute("data-status", "failed", timeout=90_000)
    page.click(f'tr[data-id="{exp_id}"] td.name a')
    page.wait_for_url(re.compile(rf"#/experiments/{exp_id}$"))
    failure = page.locator(".failure")
    expect(failure).to_be_visible()
    expect(failure).to_contain_text("no_such_argument")
    shot(page, artifacts, "experiment-failed")


def test_list_filters_and_compares_two_experiments(
    service: LiveServer, page: Any, artifacts: Path, state: State
) -> None:
    from playwright.sync_api import expect

    assert state.form_id is not None and state.quick_id is not None
    wait_until(
        lambda: (
            httpx.get(f"{service.url}/api/v1/experiments/{state.quick_id}").json()["status"]
            in ("succeeded", "failed", "stopped")
        ),
        120,
        "the quick experiment to end",
    )
    page.goto(f"{service.url}/#/")
    form_row = page.locator(f'tr[data-id="{state.form_id}"]')
    quick_row = page.locator(f'tr[data-id="{state.quick_id}"]')
    expect(form_row.locator(".badge")).to_have_attribute("data-status", "stopped")
    expect(quick_row.locator(".badge")).to_have_attribute("data-status", "succeeded")
    expect(quick_row.locator(".progress")).to_have_attribute("aria-valuenow", "100")
    shot(page, artifacts, "experiments")

    page.fill('[name="name"]', "browser-")
    expect(quick_row).to_have_count(0)
    expect(form_row).to_have_count(1)
    page.fill('[name="name"]', "")
    page.select_option('[name="status"]', "succeeded")
    expect(form_row).to_have_count(0)
    expect(quick_row).to_have_count(1)
    page.select_option('[name="status"]', "")
    expect(form_row).to_have_count(1)

    form_row.locator("input[type=checkbox]").check()
    quick_row.locator("input[type=checkbox]").check()
    page.click("[data-action=compare]")
    page.wait_for_url(re.compile(r"#/compare\?ids="))
    expect(page.locator(".legend li")).to_have_count(2)
    wait_until(lambda: chart_points(page, "Episode return (mean)") > 0, 30, "compare points")
    diff_lr = page.locator('table.diff tr[data-path="lr"]')
    expect(diff_lr).to_contain_text("0.001")
    expect(diff_lr).to_contain_text("0.0003")
    expect(page.locator('table.diff tr[data-path="stop.env_steps"]')).to_be_visible()
    shot(page, artifacts, "compare")


def test_dark_scheme_and_narrow_window(
    service: LiveServer, browser: Any, artifacts: Path, state: State
) -> None:
    """The pages follow prefers-color-scheme and fit a phone-sized window."""
    errors: list[str] = []
    context, page = new_page(
        browser,
        errors,
        viewport={"width": 390, "height": 844},
        color_scheme="dark",
        has_touch=True,
    )
    try:
        for name, route in [
            ("experiments", "#/"),
            ("experiment", f"#/experiments/{state.form_id}"),
            ("new-experiment", "#/new"),
            ("sweeps", "#/sweeps"),
        ]:
            page.goto(f"{service.url}/{route}")
            page.wait_for_selector("main#app > *")
            page.wait_for_timeout(500)
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert background == "rgb(15, 18, 23)", background  # the dark palette
            # Nothing sticks out sideways: wide tables scroll inside their own box.
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{name} is {overflow}px wider than the window"
            # Every control of the page's toolbars is within reach, none cut off at the edge.
            for control in page.locator(".toolbar :is(input, select, button):visible").all():
                box = control.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, (
                    name,
                    control.evaluate("e => e.outerHTML.slice(0, 80)"),
                    box,
                )
            shot(page, artifacts, f"{name}-dark-narrow")
        # On the runs table a tap on a header sorts, as with a mouse.
        page.goto(f"{service.url}/#/")
        page.wait_for_selector("table.experiments tbody tr")
        page.locator('th[data-sort-key="name"] button').tap()
        page.wait_for_function("location.hash.includes('sort=name')", timeout=10_000)
    finally:
        context.close()
    assert not errors, errors
