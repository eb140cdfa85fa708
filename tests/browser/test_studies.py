"""Studies in real Chromium, without Ray: a study created from the form (a bad range first: its
message at that bound, nothing created), then its trials made to exist and progress as the
reconciler and their jobs would (`advance` against the server's database; trial runs moved
through their lifecycle, posting metrics with their job tokens). The page follows by polling,
without a reload: latest intermediate values, a stopped and a pruned trial with their notes,
the best value, the importances, parallel coordinates; then "Fork best trial" and "Seed sweep
of best" open their forms with the best trial's config. A second test stops and deletes a
study from its page."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.db import transaction
from app.experiments import service as experiments
from app.studies import service as studies
from tests.browser.helpers import dashboard_settings, new_page, wait_until
from tests.browser.server import LiveServer, live_server
from trainer.wire import API_PREFIX, STUDY_METRICS

pytestmark = pytest.mark.browser

BUDGET = 50_000  # the pruner's interval is a tenth: 5,000 env steps
CONFIG = {"env_id": "CartPole-v1", "stop": {"env_steps": BUDGET}}
RED = "rgb(220, 38, 38)"  # parallel coordinates: the best value's colour


@pytest.fixture(scope="module")
def server(frontend_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("browser-studies")
    with live_server(dashboard_settings(data_dir, frontend_dist)) as live:
        yield live


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 1200})
    page.set_default_timeout(30_000)
    page.on("dialog", lambda dialog: dialog.accept())
    yield page
    context.close()
    # The form's first submit is refused on purpose: the browser logs that 422 response.
    unexpected = [e for e in errors if "422" not in e]
    assert not unexpected, f"console errors in {request.node.name}: {unexpected}"


def _api(server: LiveServer) -> httpx.Client:
    return httpx.Client(base_url=f"{server.url}{API_PREFIX}", timeout=30)


def _advance(server: LiveServer, study_id: int) -> None:
    """One turn of the study's loop, as the reconciler takes it."""
    with transaction(server.app.state.sessionmaker) as session:
        studies.advance(session, study_id)


def _start(server: LiveServer, exp_id: int) -> str:
    with transaction(server.app.state.sessionmaker) as session:
        for to in ("queued", "running"):
            experiments.transition(session, exp_id, to, "test: simulated job")
    return server.issue_job_token(exp_id)


def _job(server: LiveServer, exp_id: int, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}{API_PREFIX}/jobs/experiments/{exp_id}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def _report(server: LiveServer, exp_id: int, token: str, last_step: int, level: float) -> None:
    """Metric rows every 5,000 env steps up to `last_step`, the return flat at `level`."""
    rows = [
        {"step": s, "time_s": s / 1000, "values": {"episode_return_mean": level}}
        for s in range(5000, last_step + 1, 5000)
    ]
    with _job(server, exp_id, token) as job:
        job.post("/metrics", json={"rows": rows}).raise_for_status()


def _end(server: LiveServer, exp_id: int, token: str, status: str) -> None:
    with _job(server, exp_id, token) as job:
        job.post("/status", json={"status": status, "reason": "test"}).raise_for_status()


def _level(params: dict[str, Any]) -> float:
    """A trial's return: higher with lr, a little higher with the larger net."""
    return round(300 + 50 * math.log10(params["lr"]) + 20 * len(params["model.hidden_sizes"]), 3)


def _fetches(page: Any, study_id: int) -> int:
    """Finished GET /studies/{id} requests of the page (its resource timing entries)."""
    return int(
        page.evaluate(
            "(p) => performance.getEntriesByType('resource')"
            ".filter((e) => e.name.endsWith(p)).length",
            f"/studies/{study_id}",
        )
    )


def test_a_study_from_the_form_followed_live_to_its_best_trial(
    server: LiveServer, page: Any, artifacts: Path
) -> None:
    from playwright.sync_api import expect

    api = _api(server)
    page.goto(f"{server.url}/#/studies")
    expect(page.locator("header nav a.active")).to_have_text("Studies")
    page.click(".new-study > summary")
    form = page.locator("[data-role=study-form]")
    metrics = form.locator('[name="objective.metric"] option').all_text_contents()
    assert metrics == list(STUDY_METRICS)
    form.locator('[name="study.name"]').fill("ui study")
    form.locator('[name="study.config"]').fill(json.dumps(CONFIG))
    rows = form.locator("[data-role=space-row]")
    lr = rows.nth(0)  # the form starts with an lr row
    expect(lr.locator('[name="space.key"]')).to_have_value("lr")
    expect(lr.locator('[name="space.type"] option')).to_have_text(["float", "int", "categorical"])
    lr.locator('[name="space.low"]').fill("0.1")
    lr.locator('[name="space.high"]').fill("0.001")
    form.locator("[data-action=add-space-row]").click()
    sizes = rows.nth(1)
    sizes.locator('[name="space.key"]').select_option("model.hidden_sizes")
    # A list field takes choices only.
    expect(sizes.locator('[name="space.type"] option')).to_have_text(["categorical"])
    expect(sizes.locator('[name="space.low"]')).to_be_hidden()
    sizes.locator('[name="space.choices"]').fill("[[32], [64, 64]]")
    form.locator('[name="study.n_trials"]').fill("7")
    form.locator('[name="study.max_parallel"]').fill("3")

    form.locator("[data-action=create-study]").click()
    expect(lr.locator('[data-error-for="space.lr.low"]')).to_have_text("low 0.1 > high 0.001")
    expect(form.locator("[data-role=study-error]")).to_contain_text("1 field needs fixing")
    assert api.get("/studies").json()["items"] == []
    form.screenshot(path=str(artifacts / "study-form.png"))

    lr.locator('[name="space.low"]').fill("1e-4")
    lr.locator('[name="space.high"]').fill("1e-2")
    form.locator("[data-action=create-study]").click()
    page.wait_for_url(re.compile(r"#/studies/\d+$"))
    study_id = int(page.url.rsplit("/", 1)[1])
    created = api.get(f"/studies/{study_id}").json()
    assert created["space"] == {
        "lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True, "step": None},
        "model.hidden_sizes": {"type": "categorical", "choices": [[32], [64, 64]]},
    }
    assert (created["n_trials"], created["max_parallel"]) == (7, 3)
    assert created["objective"]["metric"] == "episode_return_mean"
    assert created["interval_env_steps"] == BUDGET // 10

    settings = page.locator("[data-role=settings]")
    expect(settings.locator('[data-setting="objective"]')).to_contain_text(
        "maximize episode_return_mean: the mean of its last 5 reports"
    )
    expect(settings.locator('[data-setting="pruner"]')).to_contain_text("median")
    expect(settings.locator('[data-setting="trials"]')).to_contain_text("7, at most 3 at once")
    expect(page.locator('[data-action="stop-study"]')).to_be_enabled()
    expect(page.locator('[data-action="fork-best"]')).to_be_hidden()
    page.evaluate("() => { window.__notReloaded = true; }")
    table = page.locator("table.trials tbody tr")
    heads = page.locator("table.trials thead th").all_text_contents()
    assert heads[2:4] == ["lr", "model.hidden_sizes"]

    # The reconciler's turn: three trials at once.
    _advance(server, study_id)
    wait_until(lambda: table.count() == 3, 15, "three trials on the page")
    trials = api.get(f"/studies/{study_id}").json()["trials"]
    runs = {t["number"]: t["experiment_id"] for t in trials}
    tokens = {n: _start(server, runs[n]) for n in range(3)}
    for n in range(3):
        _report(server, runs[n], tokens[n], 20_000, _level(trials[n]["params"]))
    _advance(server, study_id)
    first_value = page.locator('tr[data-number="0"] [data-role=value]')
    wait_until(lambda: first_value.get_attribute("data-kind") == "latest", 15, "latest values")
    expect(first_value).to_contain_text("latest @ 20.0k")
    expect(page.locator('tr[data-number="0"] [data-role=experiment-link]')).to_have_attribute(
        "href", f"#/experiments/{runs[0]}"
    )

    # Trials 0 and 1 meet their budget; trial 2's run is stopped by its user.
    for n in (0, 1):
        _report(server, runs[n], tokens[n], BUDGET, _level(trials[n]["params"]))
        _end(server, runs[n], tokens[n], "succeeded")
    api.post(f"/experiments/{runs[2]}/stop").raise_for_status()
    _end(server, runs[2], tokens[2], "stopped")
    _advance(server, study_id)  # settles them and suggests trials 3-5
    stopped = page.locator('tr[data-number="2"]')
    wait_until(lambda: stopped.get_attribute("data-state") == "stopped", 15, "trial 2 stopped")
    expect(stopped.locator("[data-role=note]")).to_have_text("its run was stopped")
    assert stopped.get_attribute("title") == "its run was stopped"
    wait_until(lambda: table.count() == 6, 15, "trials 3-5 on the page")
    expect(page.locator('tr[data-number="0"] [data-role=value]')).to_have_attribute(
        "data-kind", "final"
    )
    expect(page.locator("[data-role=importances]")).to_contain_text("at least 4 trials")

    trials = api.get(f"/studies/{study_id}").json()["trials"]
    runs = {t["number"]: t["experiment_id"] for t in trials}
    for n in (3, 4, 5):
        tokens[n] = _start(server, runs[n])
        _report(server, runs[n], tokens[n], BUDGET, _level(trials[n]["params"]))
        _end(server, runs[n], tokens[n], "succeeded")
    _advance(server, study_id)  # five complete; suggests the last trial
    complete = [t for t in trials if t["number"] in (0, 1, 3, 4, 5)]
    best = max(complete, key=lambda t: (_level(t["params"]), -t["number"]))
    best_line = page.locator("[data-role=best]")
    wait_until(lambda: best_line.get_attribute("data-best"), 15, "the best value")
    assert float(best_line.get_attribute("data-best") or "nan") == pytest.approx(
        _level(best["params"])
    )
    expect(best_line).to_contain_text(f"trial #{best['number']}")
    bars = page.locator("[data-role=importances] .imp-row")
    wait_until(lambda: bars.count() == 2, 15, "an importance bar per parameter")
    shares = [float(bars.nth(i).get_attribute("data-share") or "nan") for i in range(2)]
    assert shares == sorted(shares, reverse=True) and sum(shares) == pytest.approx(1.0, abs=0.01)
    chart = page.locator('[data-chart="Best value over trials"]')
    wait_until(lambda: chart.get_attribute("data-points") == "5", 15, "five complete trials")
    assert float(chart.get_attribute("data-best") or "nan") == pytest.approx(_level(best["params"]))
    wait_until(lambda: table.count() == 7, 15, "the last trial on the page")

    # The last trial falls far behind the median: the pruner stops its run.
    trials = api.get(f"/studies/{study_id}").json()["trials"]
    runs[6] = trials[6]["experiment_id"]
    tokens[6] = _start(server, runs[6])
    _report(server, runs[6], tokens[6], 20_000, -100.0)
    _advance(server, study_id)
    last = page.locator('tr[data-number="6"]')
    wait_until(lambda: last.get_attribute("data-state") == "pruning", 15, "trial 6 pruning")
    _end(server, runs[6], tokens[6], "stopped")  # its job saved and stopped
    _advance(server, study_id)
    wait_until(lambda: last.get_attribute("data-state") == "pruned", 15, "trial 6 pruned")
    expect(last.locator("[data-role=note]")).to_contain_text("median pruner")
    expect(page.locator(".study .badge").first).to_have_attribute("data-status", "succeeded")
    expect(page.locator("[data-role=progress]")).to_contain_text(
        "7 / 7 done (5 complete, 1 pruned, 1 stopped)"
    )
    expect(page.locator('[data-action="stop-study"]')).to_be_disabled()
    expect(page.locator('[data-action="delete-study"]')).to_be_visible()

    parallel = page.locator('[data-chart="parallel coordinates"]')
    assert parallel.get_attribute("data-lines") == "7"
    labels = parallel.locator(".axis-label").all_text_contents()
    assert labels == ["lr", "model.hidden_sizes", "episode_return_mean"]
    best_line_color = parallel.locator(f'polyline[data-trial="{best["number"]}"]')
    assert best_line_color.get_attribute("data-color") == RED
    assert parallel.locator('polyline[data-trial="6"]').get_attribute("stroke-dasharray")
    assert page.evaluate("() => window.__notReloaded") is True
    page.screenshot(path=str(artifacts / "study-page.png"), full_page=True)

    # The study has ended: the page polls no more.
    seen = _fetches(page, study_id)
    page.wait_for_timeout(4500)
    assert _fetches(page, study_id) <= seen + 1

    # The pruned trial's run links its study and says what became of the trial.
    page.locator('tr[data-number="6"] a[href^="#/experiments/"]').click()
    page.wait_for_url(re.compile(rf"#/experiments/{runs[6]}$"))
    study_link = page.locator("a.study-link")
    expect(study_link).to_have_text("trial #6 of study ui study")
    expect(study_link).to_have_attribute("href", f"#/studies/{study_id}")
    expect(study_link).to_have_attribute("title", re.compile("^median pruner"))
    expect(page.locator(".meta")).to_contain_text("trial #6 of study ui study (pruned)")
    study_link.click()
    page.wait_for_url(re.compile(rf"#/studies/{study_id}$"))
    expect(page.locator('tr[data-number="6"]')).to_have_attribute("data-state", "pruned")

    # Fork the best trial: the experiment form with its config, its run as the parent.
    page.locator('[data-action="fork-best"]').click()
    page.wait_for_url(re.compile(rf"#/new\?study={study_id}$"))
    lr_input = page.locator('[name="config.lr"]')
    wait_until(
        lambda: (
            lr_input.input_value()
            and float(lr_input.input_value()) == pytest.approx(best["params"]["lr"])
        ),
        15,
        "the best trial's lr in the form",
    )
    sizes_value = [int(v) for v in best["params"]["model.hidden_sizes"]]
    expect(page.locator('[name="config.model.hidden_sizes"]')).to_have_value(
        ", ".join(map(str, sizes_value))
    )
    expect(page.locator('[name="name"]')).to_have_value(f"ui study #{best['number']}-fork")
    page.locator("form.new-form button[type=submit]").click()
    page.wait_for_url(re.compile(r"#/experiments/\d+$"))
    fork = api.get(f"/experiments/{page.url.rsplit('/', 1)[1]}").json()
    assert fork["parent_id"] == best["experiment_id"]
    assert fork["config"]["lr"] == pytest.approx(best["params"]["lr"])
    assert fork["config"]["model"]["hidden_sizes"] == sizes_value

    # A seed sweep of the best trial: its config without its seed, seeds 0, 1, 2.
    page.goto(f"{server.url}/#/studies/{study_id}")
    page.locator('[data-action="seed-sweep-best"]').click()
    page.wait_for_url(re.compile(rf"#/sweeps\?study={study_id}$"))
    base = page.locator('[name="sweep.config"]')
    expect(base).to_be_visible()
    shown = json.loads(base.input_value())
    assert "seed" not in shown and shown["lr"] == pytest.approx(best["params"]["lr"])
    expect(page.locator('[name="sweep.seeds"]')).to_have_value("0, 1, 2")
    expect(page.locator('[name="sweep.name"]')).to_have_value(f"ui study #{best['number']} sweep")

    page.goto(f"{server.url}/#/studies")
    row = page.locator(f'table.studies tbody tr[data-id="{study_id}"]')
    expect(row).to_contain_text("ui study")
    expect(row.locator("[data-role=trials]")).to_have_text(
        "7 / 7 done (5 complete, 1 pruned, 1 stopped)"
    )
    expect(row.locator("[data-role=best]")).to_contain_text(f"(#{best['number']})")
    expect(row.locator(".badge")).to_have_attribute("data-status", "succeeded")
    api.close()


def test_stop_and_delete_a_study_from_its_page(server: LiveServer, page: Any) -> None:
    from playwright.sync_api import expect

    api = _api(server)
    body = {
        "name": "to stop",
        "config": CONFIG,
        "space": {"gamma": {"type": "float", "low": 0.9, "high": 0.999}},
        "n_trials": 4,
    }
    study = api.post("/studies", json=body).json()
    _advance(server, study["id"])  # two trials, their runs waiting
    page.goto(f"{server.url}/#/studies/{study['id']}")
    table = page.locator("table.trials tbody tr")
    wait_until(lambda: table.count() == 2, 15, "two trials")
    expect(page.locator('[data-action="delete-study"]')).to_be_hidden()

    page.locator('[data-action="stop-study"]').click()
    badge = page.locator(".study .badge").first
    expect(badge).to_have_attribute("data-status", "stopping")
    _advance(server, study["id"])  # the stopped runs settle their trials
    expect(badge).to_have_attribute("data-status", "stopped")
    for n in (0, 1):
        note = page.locator(f'tr[data-number="{n}"] [data-role=note]')
        expect(note).to_have_text(f"stopped with study {study['id']}")
    page.locator('[data-action="delete-study"]').click()
    page.wait_for_url(re.compile(r"#/studies$"))
    expect(page.locator(f'table.studies tbody tr[data-id="{study["id"]}"]')).to_have_count(0)
    assert api.get(f"/studies/{study['id']}").status_code == 404
    api.close()
