"""The experiments table sorts by a clicked column and keeps its sort and filters in the URL:
a reload (or a shared link) shows the same view. Simulated jobs, no Ray."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import dashboard_settings, new_page, wait_until
from tests.browser.server import live_server
from tests.browser.simulate import SimulatedJob
from trainer.wire import API_PREFIX

pytestmark = pytest.mark.browser


def test_sort_and_filters_live_in_the_url(
    browser: Any, frontend_dist: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    with live_server(dashboard_settings(tmp_path, frontend_dist)) as server:
        ids = {}
        for name, seed in (("alpha", 1), ("bravo", 2), ("charlie", 3)):
            config = {"env_id": "CartPole-v1", "lr": {"alpha": 3e-3, "bravo": 1e-4}.get(name, 5e-4)}
            body = {"name": name, "config": config}
            ids[name] = httpx.post(f"{server.url}{API_PREFIX}/experiments", json=body).json()["id"]
            job = SimulatedJob(server, ids[name], seed=seed)
            job.status("running", "started")
            job.iterations(seed * 20)  # later ones learn longer: higher best returns

        def names() -> list[str]:
            return page.locator("table.experiments tbody td.name > a:first-child").all_inner_texts()

        try:
            page.goto(f"{server.url}/#/?sort=best&dir=asc")
            wait_until(lambda: names() == ["alpha", "bravo", "charlie"], 15, "sorted by best, asc")
            expect(page.locator('th[data-sort-key="best"]')).to_have_attribute(
                "aria-sort", "ascending"
            )
            page.click('th[data-sort-key="name"] button')
            wait_until(lambda: names() == ["charlie", "bravo", "alpha"], 15, "by name, desc")
            assert page.url.endswith("#/?sort=name&dir=desc")
            page.click('th[data-sort-key="name"] button')
            wait_until(lambda: names() == ["alpha", "bravo", "charlie"], 15, "by name, asc")
            page.fill('[name="name"]', "a")  # all three contain an a
            page.fill('[name="name"]', "ar")
            wait_until(lambda: names() == ["charlie"], 15, "the name filter")
            assert page.url.endswith("#/?name=ar&sort=name&dir=asc")
            page.reload()
            wait_until(lambda: names() == ["charlie"], 15, "the same view after a reload")
            expect(page.locator('[name="name"]')).to_have_value("ar")

            # A config field as a column, sortable, kept in the URL too.
            page.fill('[name="name"]', "")
            page.fill('[name="add-column"]', "lr")
            page.click("[data-action=add-column]")
            lr_cells = page.locator('td[data-config="lr"]')
            wait_until(lambda: lr_cells.count() == 3, 15, "the lr column")
            page.click('th[data-sort-key="config.lr"] button.sort')
            wait_until(lambda: names() == ["alpha", "charlie", "bravo"], 15, "by lr, desc")
            assert lr_cells.all_inner_texts() == ["0.003", "0.0005", "0.0001"]
            assert page.url.endswith("#/?cols=lr&sort=config.lr&dir=desc")
            page.reload()
            wait_until(lambda: names() == ["alpha", "charlie", "bravo"], 15, "the column kept")
            page.click('[data-remove-column="lr"]')
            expect(lr_cells).to_have_count(0)
            assert page.url.endswith("#/")

            # A metric's min as a column: the server's summaries, sortable, in the URL.
            page.select_option('[name="column-kind"]', "min")
            page.fill('[name="add-column"]', "vf_loss")
            page.click("[data-action=add-column]")
            vf_cells = page.locator('td[data-metric-col="min:vf_loss"]')
            wait_until(
                lambda: vf_cells.count() == 3 and "\u2013" not in vf_cells.all_inner_texts(),
                15,
                "the min:vf_loss column filled",
            )
            expect(page.locator('th[data-sort-key="metric.min:vf_loss"]')).to_contain_text(
                "vf_loss (min)"
            )
            summaries = httpx.get(
                f"{server.url}{API_PREFIX}/metric-summaries",
                params={"ids": ",".join(str(i) for i in ids.values()), "names": "vf_loss"},
            ).json()["summaries"]
            lowest = {name: summaries[str(i)]["vf_loss"]["min"] for name, i in ids.items()}
            page.click('th[data-sort-key="metric.min:vf_loss"] button.sort')
            by_min_desc = sorted(lowest, key=lowest.__getitem__, reverse=True)
            wait_until(lambda: names() == by_min_desc, 15, "by min vf_loss, desc")
            assert page.url.endswith("#/?cols=min%3Avf_loss&sort=metric.min%3Avf_loss&dir=desc")
            page.reload()
            wait_until(lambda: names() == by_min_desc, 15, "the metric column kept")
            page.click('[data-remove-column="min:vf_loss"]')
            expect(vf_cells).to_have_count(0)
        finally:
            context.close()
    assert not errors, errors
