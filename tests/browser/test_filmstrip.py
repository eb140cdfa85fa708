"""Watch it learn, in real Chromium with real jobs: a CartPole run with `evaluation_every`
records a video of every 2nd checkpoint and of the final one as it trains (scheduled, niced
evaluation jobs on the shared Ray head); the experiment page shows them as a filmstrip whose
slider and thumbnails play each checkpoint's episode and mark its step on the return curve.
The run is submitted through the new-experiment form, where evaluation_every is a field of the
experiment (beside its name and tags, not in its config)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.helpers import new_page, wait_until
from tests.browser.server import LiveServer

pytestmark = [pytest.mark.browser, pytest.mark.ray]

API = "/api/v1"
# Typed into the new-experiment form (CartPole-v1 is its default env).
FORM_VALUES = {
    "train_batch_size_per_learner": "256",
    "minibatch_size": "64",
    "num_epochs": "2",
    "stop.env_steps": str(12 * 256),  # 12 iterations
    "checkpoint_every": "2",
}
VIDEOS_EVERY = "2"  # checkpoints: iterations 4 and 8, and the final checkpoint (12)


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    errors: list[str] = []
    context, page = new_page(browser, errors, viewport={"width": 1400, "height": 900})
    page.set_default_timeout(30_000)
    yield page
    context.close()
    assert not errors, f"console errors in {request.node.name}: {errors}"


def stage_video(page: Any) -> dict[str, Any] | None:
    return page.evaluate(
        """() => {
          const v = document.querySelector("video[data-role=filmstrip-video]");
          return v ? {ready: v.readyState, duration: v.duration, id: Number(v.dataset.evaluation),
                      error: v.error && v.error.message} : null;
        }"""
    )


def playable(page: Any, evaluation_id: int) -> dict[str, Any]:
    return wait_until(
        lambda: (s := stage_video(page)) and s["id"] == evaluation_id and s["ready"] >= 2 and s,
        30,
        f"evaluation {evaluation_id}'s video to play in the filmstrip",
    )


def test_a_run_with_evaluation_every_shows_a_filmstrip_with_a_step_slider(
    jobs_server: LiveServer, page: Any, artifacts: Path
) -> None:
    page.goto(f"{jobs_server.url}/#/new")
    page.locator('[name="config.lr"]').wait_for()
    page.fill('[name="name"]', "film")
    for path, value in FORM_VALUES.items():
        page.fill(f'[name="config.{path}"]', value)
    page.fill('[name="evaluation_every"]', VIDEOS_EVERY)  # the run's setting, beside its config
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"#/experiments/\d+$"))
    exp_id = int(page.url.rsplit("/", 1)[1])
    with httpx.Client(base_url=jobs_server.url, timeout=30) as client:
        created = client.get(f"{API}/experiments/{exp_id}").json()
        assert (created["evaluation_every"], created["config"]["env_id"]) == (2, "CartPole-v1")
        filmstrip = page.locator("[data-role=filmstrip]")
        filmstrip.wait_for()  # shown (with when the first video comes) before any exists

        def finished() -> list[dict[str, Any]] | None:
            items = client.get(f"{API}/experiments/{exp_id}/evaluations").json()
            done = [e for e in items if e["status"] in ("succeeded", "failed")]
            return items if len(items) == 3 and len(done) == 3 else None

        items = wait_until(finished, 240, "three scheduled evaluations to finish")
        status = client.get(f"{API}/experiments/{exp_id}").json()["status"]
    frames = sorted(items, key=lambda e: e["checkpoint_env_steps"])
    assert status == "succeeded"
    assert [e["checkpoint_iteration"] for e in frames] == [4, 8, 12]
    assert all(e["scheduled"] and e["status"] == "succeeded" and e["video"] for e in frames), [
        (e["status"], e["error"], e["video_message"]) for e in frames
    ]

    # Live: the newest frame is selected and its step is marked on the return curve.
    label = page.locator("[data-role=filmstrip-label]")
    wait_until(lambda: label.text_content().startswith("3 of 3"), 30, "the third frame")
    state = playable(page, frames[2]["id"])
    assert state["duration"] > 0 and state["error"] is None
    slider = page.locator("[data-role=filmstrip-slider]")
    assert slider.get_attribute("max") == "2"
    chart = page.locator('[data-chart="Episode return"]')
    assert chart.get_attribute("data-marker") == str(frames[2]["checkpoint_env_steps"])
    page.screenshot(path=str(artifacts / "filmstrip.png"), full_page=False)

    # The slider goes back to the first checkpoint: its episode plays, its step is marked.
    slider.focus()
    page.keyboard.press("Home")
    wait_until(lambda: label.text_content().startswith("1 of 3"), 10, "the first frame")
    playable(page, frames[0]["id"])
    assert chart.get_attribute("data-marker") == str(frames[0]["checkpoint_env_steps"])
    assert f"iteration {frames[0]['checkpoint_iteration']}" in label.text_content()

    # A thumbnail picks a frame too; the scheduled ones are marked in the evaluations table.
    thumbs = page.locator("[data-role=filmstrip-thumbs] button.thumb")
    assert thumbs.count() == 3
    thumbs.nth(1).click()
    wait_until(lambda: label.text_content().startswith("2 of 3"), 10, "the second frame")
    playable(page, frames[1]["id"])
    assert chart.get_attribute("data-marker") == str(frames[1]["checkpoint_env_steps"])
    assert page.locator("table.eval-list [data-scheduled]").count() == 3
