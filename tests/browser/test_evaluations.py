"""Evaluate a checkpoint from the experiment page in real Chromium: the form on a checkpoint
row, live progress, then the video plays (readyState >= 2, duration > 0) beside the return
distribution; an API error shows on the form."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.helpers import new_page, wait_until
from tests.browser.server import LiveServer
from tests.service.evaluation_seed import seed_experiment, train_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.ray]

EPISODES = 4


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1280, "height": 1000})
    page.set_default_timeout(30_000)
    yield page
    context.close()
    # The test provokes one 422 on purpose (the form's bad episode count).
    unexpected = [e for e in errors if "status of 422" not in e]
    assert not unexpected, f"console errors in {request.node.name}: {errors}"


def video_state(page: Any) -> dict[str, Any] | None:
    return page.evaluate(
        """() => {
          const v = document.querySelector("video[data-evaluation-video]");
          return v ? {ready: v.readyState, duration: v.duration, error: v.error && v.error.message,
                      width: v.videoWidth} : null;
        }"""
    )


def test_evaluate_a_checkpoint_and_watch_the_video(
    jobs_server: LiveServer, page: Any, artifacts: Path, tmp_path: Path
) -> None:
    archive = train_checkpoint(tmp_path, iterations=1)
    exp_id, checkpoint_id = seed_experiment(jobs_server.app.state.settings, archive)
    page.goto(f"{jobs_server.url}/#/experiments/{exp_id}")
    row = page.locator(f'tr[data-checkpoint="{checkpoint_id}"]')
    row.locator('[data-action="evaluate"]').click()
    form = page.locator("form.eval-form")
    form.locator('input[name="episodes"]').fill("0")  # the API's 422 shows on the form
    form.locator('[data-action="start-evaluation"]').click()
    page.locator("form.eval-form .field-error", has_text="episodes").wait_for()
    form.locator('input[name="episodes"]').fill(str(EPISODES))
    form.locator('[data-action="start-evaluation"]').click()
    page.locator("table.eval-list tr[data-evaluation]").first.wait_for()
    assert form.is_hidden()

    state = wait_until(
        lambda: (s := video_state(page)) and s["ready"] >= 2 and s,
        120,
        "the evaluation's video to become playable",
    )
    assert state["duration"] > 0 and state["error"] is None and state["width"] == 600
    badge = page.locator("table.eval-list .badge").first
    wait_until(lambda: badge.get_attribute("data-status") == "succeeded", 30, "succeeded")
    dots = page.locator("svg.return-strip").get_attribute("data-dots")
    assert dots == str(EPISODES)
    assert page.locator("svg.return-strip circle.dot").count() == EPISODES
    assert page.locator("table.eval-list td", has_text=f"{EPISODES}/{EPISODES}").count() == 1
    page.screenshot(path=str(artifacts / "evaluation.png"), full_page=True)

    # Seeking works (the video is served with Range support).
    page.evaluate(
        "() => { document.querySelector('video[data-evaluation-video]').currentTime = 0.2 }"
    )
    wait_until(
        lambda: page.evaluate(
            "() => document.querySelector('video[data-evaluation-video]').currentTime > 0.1"
        ),
        10,
        "the video to seek",
    )
