"""Evaluation videos of a Box2D and a MuJoCo env play in Chromium (issue: every env family
renders headless): a checkpoint trained one iteration, `rollout evaluate --video x.webm` as the
evaluation job records it (VP9), then Chromium opens the file and reports it playable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.browser.helpers import new_page, wait_until
from tests.trainer.headless_video import record_headless

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def _record(env_id: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path / "replay.webm"
    report = record_headless(env_id, tmp_path, out)
    assert report["video"] is not None and report["video"]["media_type"] == "video/webm", report
    return out, report["video"]


@pytest.mark.parametrize("env_id", ["LunarLander-v3", "InvertedPendulum-v5"])
def test_a_box2d_and_a_mujoco_video_play_in_chromium(
    env_id: str, browser: Any, tmp_path: Path
) -> None:
    video, meta = _record(env_id, tmp_path)
    errors: list[str] = []
    context, page = new_page(browser, errors)
    try:
        page.goto(video.as_uri())  # Chromium's own media document
        state = wait_until(
            lambda: (
                (
                    s := page.evaluate(
                        """() => {
                          const v = document.querySelector("video");
                          return v ? {ready: v.readyState, duration: v.duration,
                                      width: v.videoWidth, height: v.videoHeight,
                                      error: v.error && v.error.message} : null;
                        }"""
                    )
                )
                and s["ready"] >= 2
                and s
            ),
            30,
            f"the {env_id} video to become playable",
        )
    finally:
        context.close()
    assert state["error"] is None and state["duration"] > 0, state
    assert (state["width"], state["height"]) == (meta["width"], meta["height"]), (state, meta)
    assert abs(state["duration"] - meta["frames"] / meta["fps"]) < 0.5, (state, meta)
    assert not errors, errors
