"""The sweep page in real Chromium, on a seeded sweep (2 learning rates x 3 seeds; members
driven through their lifecycle and posting metrics as their jobs would): one band and one mean
line per group drawn on the canvas, the ranking by final mean return, the hyperparameter ->
final return scatter, live updates, members linked from the experiment list, and Stop sweep;
then a real sweep of tiny CartPole runs on the local Ray head, watched to completion."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.db import transaction
from app.experiments import service as experiments
from tests.browser.helpers import dashboard_settings, new_page, wait_until
from tests.browser.server import LiveServer, live_server

pytestmark = pytest.mark.browser

CONFIG = {"env_id": "CartPole-v1", "stop": {"env_steps": 100_000}}
TITLE = "Episode return (mean over seeds)"


@pytest.fixture(scope="module")
def server(frontend_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("browser-sweeps")
    settings = dashboard_settings(data_dir, frontend_dist)
    with live_server(settings) as live:
        yield live


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1280, "height": 1400})
    page.set_default_timeout(30_000)
    yield page
    context.close()
    assert not errors, f"console errors in {request.node.name}: {errors}"


def _start(server: LiveServer, exp_id: int) -> str:
    with transaction(server.app.state.sessionmaker) as session:
        for to in ("queued", "running"):
            experiments.transition(session, exp_id, to, "test: simulated job")
    return server.issue_job_token(exp_id)


def _post(server: LiveServer, exp_id: int, token: str, steps: range, level: float) -> None:
    rows = [
        {"step": s, "time_s": s / 1000, "values": {"episode_return_mean": level + s / 1000}}
        for s in steps
    ]
    response = httpx.post(
        f"{server.url}/api/v1/jobs/experiments/{exp_id}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text


def _tinted_pixels(page: Any, title: str = TITLE) -> dict[str, int]:
    """Pixels of a chart's canvas tinted blue (group 0) or red (group 1)."""
    return page.evaluate(
        """(title) => {
          const c = document.querySelector(`[data-chart="${title}"] canvas`);
          const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
          let blue = 0, red = 0;
          for (let i = 0; i < d.length; i += 4) {
            const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
            if (a < 10) continue;
            if (b > r + 25 && b > g + 10) blue++;
            if (r > b + 25 && r > g + 25) red++;
          }
          return {blue, red};
        }""",
        title,
    )


def test_sweep_page_draws_bands_ranks_groups_updates_live_and_stops(
    server: LiveServer, page: Any, artifacts: Path
) -> None:
    api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
    body = {"name": "ui sweep", "config": CONFIG, "grid": {"lr": [1e-3, 1e-4]}, "seeds": [0, 1, 2]}
    sweep = api.post("/sweeps", json=body).json()
    members = sweep["members"]
    tokens: dict[int, str] = {}
    # Group 0 (lr=0.001) returns around 10, group 1 (lr=0.0001) around 100; the last member
    # of group 1 never starts.
    for i, member in enumerate(members[:5]):
        tokens[member["id"]] = _start(server, member["id"])
        level = 10.0 + 8 * i if member["sweep_group"] == 0 else 100.0 + 8 * i
        _post(server, member["id"], tokens[member["id"]], range(1000, 41_000, 1000), level)

    page.goto(f"{server.url}/#/sweeps/{sweep['id']}")
    chart = page.locator(f'[data-chart="{TITLE}"]')
    wait_until(lambda: int(chart.get_attribute("data-points") or 0) > 10, 30, "band data")
    assert chart.get_attribute("data-bands") == "2"
    assert chart.get_attribute("data-groups") == "2"
    assert page.locator(f'[data-chart="{TITLE}"] .u-legend .u-series').count() == 1 + 3 * 2
    legend = page.locator(f'[data-chart="{TITLE}"] .u-legend').inner_text()
    assert "lr=0.001" in legend and "lr=0.0001" in legend

    def both_drawn() -> dict[str, int] | None:
        tint = _tinted_pixels(page)
        return tint if tint["blue"] > 200 and tint["red"] > 200 else None

    wait_until(both_drawn, 15, "both groups' bands and lines on the canvas")

    ranking = page.locator("table.ranking tbody tr")
    assert ranking.count() == 2
    first = ranking.nth(0).inner_text()
    assert "lr=0.0001" in first and "2 / 3" in first  # higher returns, 2 of 3 seeds report
    assert "lr=0.001" in ranking.nth(1).inner_text() and "3 / 3" in ranking.nth(1).inner_text()
    scatter = page.locator('[data-chart="final vs lr"]')
    assert scatter.get_attribute("data-points") == "2"
    # A decade apart: a log axis with its ticks at the two learning rates; each group's points
    # in its band's colour.
    assert scatter.get_attribute("data-log") == "true"
    assert scatter.get_attribute("data-ticks") == "1e-4 1e-3"
    tint = _tinted_pixels(page, "final vs lr")
    assert tint["blue"] > 20 and tint["red"] > 20, tint
    assert page.locator('[data-role="n-note"]').inner_text().count("/") >= 2
    page.screenshot(path=str(artifacts / "sweep-page.png"), full_page=True)

    # Live: group 0's members climb past group 1; the ranking follows without a reload.
    for member in members[:3]:
        _post(server, member["id"], tokens[member["id"]], range(41_000, 60_000, 1000), 500.0)
    wait_until(
        lambda: (
            "lr=0.001" in page.locator("table.ranking tbody tr").nth(0).inner_text()
            and "lr=0.0001" not in page.locator("table.ranking tbody tr").nth(0).inner_text()
        ),
        30,
        "the ranking to follow the new metrics",
    )
    assert int(chart.get_attribute("data-points") or 0) > 10

    # Members show their sweep on the experiment list.
    page.goto(f"{server.url}/#/")
    page.locator("table.experiments tbody tr").first.wait_for()
    wait_until(lambda: page.locator("a.sweep-link").count() == 6, 15, "sweep links")
    page.locator("a.sweep-link").first.click()
    page.locator(f'[data-chart="{TITLE}"]').wait_for()
    # ... and on their own page.
    page.goto(f"{server.url}/#/experiments/{members[0]['id']}")
    page.locator("p.meta a.sweep-link", has_text=f"member of sweep {sweep['id']}").click()
    page.locator(f'[data-chart="{TITLE}"]').wait_for()

    # Stop the sweep: running members go `stopping` (their jobs would save and stop), the one
    # that never started is stopped at once.
    page.locator('[data-action="stop-sweep"]').click()
    rows = page.locator("table.members tbody tr")
    wait_until(
        lambda: (
            rows.nth(5).get_attribute("data-status") == "stopped"
            and all(rows.nth(i).get_attribute("data-status") == "stopping" for i in range(5))
        ),
        15,
        "members stopping / stopped",
    )
    state = api.get(f"/sweeps/{sweep['id']}").json()
    assert state["counts"] == {"stopping": 5, "stopped": 1}
    page.goto(f"{server.url}/#/sweeps")
    page.locator("table.sweeps tbody tr").first.wait_for()
    assert page.locator("table.sweeps tbody tr").count() == 1
    assert "ui sweep" in page.locator("table.sweeps tbody tr").inner_text()
    api.close()


def test_sweep_page_shows_metrics_that_came_without_an_announcement(
    server: LiveServer, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The service announces a member's progress at most once per PROGRESS_ANNOUNCE_S and never
    sends a skipped announcement later: the page must still show the member's last metrics."""
    api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
    body = {"name": "quiet", "config": CONFIG, "grid": {"lr": [1e-3]}, "seeds": [0, 1]}
    sweep = api.post("/sweeps", json=body).json()
    tokens = {m["id"]: _start(server, m["id"]) for m in sweep["members"]}
    for exp_id, token in tokens.items():
        _post(server, exp_id, token, range(1000, 11_000, 1000), 0.0)  # final return 10
    path = f"/api/v1/sweeps/{sweep['id']}/metrics"

    def fetches() -> int:
        """Finished requests for the sweep's metrics (the page's resource timing entries)."""
        return int(
            page.evaluate(
                "(p) => performance.getEntriesByType('resource')"
                ".filter((e) => e.name.includes(p)).length",
                path,
            )
        )

    page.goto(f"{server.url}/#/sweeps/{sweep['id']}")
    first = page.locator("table.ranking tbody tr").first
    wait_until(lambda: "2 / 2" in first.inner_text(), 30, "both members in the ranking")
    wait_until(lambda: first.locator("td").nth(2).inner_text() == "10", 15, "final mean 10")
    # The page load's fetch and the one when the live stream comes online are both done.
    wait_until(lambda: fetches() >= 2, 15, "the page's first two metric refreshes")

    # From now on no progress is announced (as for an ingest within a second of the last one).
    monkeypatch.setattr(experiments, "PROGRESS_ANNOUNCE_S", 3600.0)
    for exp_id, token in tokens.items():
        _post(server, exp_id, token, range(11_000, 31_000, 1000), 0.0)  # final return 30
    wait_until(lambda: first.locator("td").nth(2).inner_text() == "30", 15, "final mean 30")
    assert api.get(f"/sweeps/{sweep['id']}/metrics").json()["metrics"]["episode_return_mean"][
        "groups"
    ][0]["final"]["mean"] == pytest.approx(30.0)
    api.close()


@pytest.fixture(scope="module")
def ray_server(
    ray_head: Any, frontend_dist: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    data_dir = tmp_path_factory.mktemp("browser-sweeps-ray")
    settings = dashboard_settings(
        data_dir,
        frontend_dist,
        ray_address=ray_head.address,
        max_concurrent_experiments=4,
    )
    with live_server(settings) as live:
        yield live


@pytest.mark.ray
def test_two_hyperparameters_get_parallel_coordinates_coloured_by_return(
    server: LiveServer, page: Any
) -> None:
    api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=30)
    grid = {"lr": [1e-3, 1e-4], "num_epochs": [2, 4]}
    body = {"name": "two keys", "config": CONFIG, "grid": grid, "seeds": [0]}
    sweep = api.post("/sweeps", json=body).json()
    members = sweep["members"]  # groups 0-3; group 3 never reports
    for level, member in zip((10.0, 50.0, 90.0), members[:3], strict=True):
        token = _start(server, member["id"])
        _post(server, member["id"], token, range(1000, 6000, 1000), level)

    page.goto(f"{server.url}/#/sweeps/{sweep['id']}")
    box = page.locator('[data-chart="parallel coordinates"]')
    wait_until(lambda: box.get_attribute("data-lines") == "4", 30, "a line per group")
    labels = box.locator(".axis-label").all_text_contents()
    assert labels == ["lr", "num_epochs", "final return"]
    colors = {
        int(line.get_attribute("data-group") or -1): line.get_attribute("data-color")
        for line in box.locator("polyline").all()
    }
    assert len(colors) == 4
    lowest, highest = members[0]["sweep_group"], members[2]["sweep_group"]
    assert colors[lowest] == "rgb(37, 99, 235)" and colors[highest] == "rgb(220, 38, 38)"
    silent = members[3]["sweep_group"]
    assert colors[silent] == "#9ca3af"
    assert box.locator(f'polyline[data-group="{silent}"]').get_attribute("stroke-dasharray")
    # Each scatter fits its own cell (a chart built mid-layout once spilled into the next).
    widths = page.evaluate(
        """() => [...document.querySelectorAll('.scatter')].map(
          (s) => [s.clientWidth, s.querySelector('.u-wrap').getBoundingClientRect().width])"""
    )
    assert len(widths) == 2 and all(plot <= box for box, plot in widths), widths


def test_a_real_sweep_on_the_local_ray_head_draws_its_bands_live(
    ray_server: LiveServer, page: Any
) -> None:
    """2 learning rates x 2 seeds of tiny CartPole runs, watched from the page as they run."""
    from tests.service.test_e2e_sweeps import TINY

    api = httpx.Client(base_url=f"{ray_server.url}/api/v1", timeout=30)
    body = {"name": "live", "config": TINY, "grid": {"lr": [1e-3, 3e-3]}, "seeds": [0, 1]}
    sweep = api.post("/sweeps", json={**body, "max_parallel": 2}).json()
    page.goto(f"{ray_server.url}/#/sweeps/{sweep['id']}")
    rows = page.locator("table.members tbody tr")
    rows.first.wait_for()

    def all_succeeded() -> bool:
        statuses = [rows.nth(i).get_attribute("data-status") for i in range(rows.count())]
        assert "failed" not in statuses, api.get(f"/sweeps/{sweep['id']}").json()["members"]
        return statuses == ["succeeded"] * 4

    wait_until(all_succeeded, 300, "every member to succeed, seen on the page")
    chart = page.locator(f'[data-chart="{TITLE}"]')
    wait_until(lambda: int(chart.get_attribute("data-points") or 0) > 2, 30, "group curves")
    assert chart.get_attribute("data-bands") == "2"

    def both_drawn() -> dict[str, int] | None:
        tint = _tinted_pixels(page)
        return tint if tint["blue"] > 100 and tint["red"] > 100 else None

    wait_until(both_drawn, 15, "both groups drawn")
    ranking = page.locator("table.ranking tbody tr")
    wait_until(lambda: ranking.count() == 2 and "2 / 2" in ranking.nth(1).inner_text(), 15, "rank")
    assert page.locator('[data-action="stop-sweep"]').is_disabled()
    api.close()
