"""Evaluation videos of a Box2D and a MuJoCo env play in Chromium (issue: every env family
renders headless): a checkpoint trained one iteration, `rollout evaluate --video x.webm` as the
evaluation job records it (VP9), then Chromium opens the file and reports it playable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.browser.helpers import new_page, wait_until
from trainer.algorithm import PPO
from trainer.config import PPOConfig

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


def _record(env_id: str, tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    config = PPOConfig(
        env_id=env_id, train_batch_size_per_learner=256, minibatch_size=128, num_epochs=1
    )
    algo = PPO(config)
    try:
        algo.train()
        checkpoint = algo.save_checkpoint(tmp_path / "checkpoint")
    finally:
        algo.stop()
    out = tmp_path / "replay.webm"
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "DISPLAY")}
    cmd = [sys.executable, "-m", "app.cli", "evaluate", str(checkpoint), "--episodes", "1"]
    done = subprocess.run(
        [*cmd, "--video", str(out)], capture_output=True, text=True, timeout=180, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
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
