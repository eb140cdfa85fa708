"""Evaluation videos: encoded files decode to the expected frames and size within the caps;
evaluate() records the first episode without changing any return; envs that cannot render
leave a message and their returns; `rollout evaluate --video` writes a playable file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.trainer import render_envs
from tests.trainer.headless_video import record_headless
from trainer.algorithm import PPO
from trainer.checkpoint import META_FILE
from trainer.config import PPOConfig
from trainer.evaluation import evaluate
from trainer.video import (
    MAX_FRAME_STEP,
    VideoError,
    VideoLimits,
    VideoWriter,
    check_frame,
    even_size,
    plan_frame_step,
    probe,
)

ROOT = Path(__file__).resolve().parents[2]


def moving_square(i: int, h: int = 48, w: int = 64) -> np.ndarray:
    frame = np.full((h, w, 3), 30, np.uint8)
    x = (i * 3) % (w - 8)
    frame[20:28, x : x + 8] = (250, 200, 0)
    return frame


def write(path: Path, frames: list[np.ndarray], **kwargs) -> object:
    writer = VideoWriter(path, **kwargs)
    for frame in frames:
        if not writer.add(frame):
            break
    return writer.close()


@pytest.mark.parametrize(
    ("suffix", "codec", "label"), [(".webm", "vp9", "vp9"), (".mp4", "h264", "h264")]
)
def test_encoded_file_decodes_to_every_frame(
    tmp_path: Path, suffix: str, codec: str, label: str
) -> None:
    path = tmp_path / f"v{suffix}"
    info = write(path, [moving_square(i) for i in range(37)], fps=25)
    assert info is not None
    assert (info.frames, info.source_frames, info.frame_step, info.cut) == (37, 37, 1, False)
    assert (info.width, info.height, info.fps, info.codec) == (64, 48, 25.0, label)
    assert info.size_bytes == path.stat().st_size > 0
    assert info.duration_s == pytest.approx(37 / 25)
    decoded = probe(path)
    assert decoded["frames"] == 37 and (decoded["width"], decoded["height"]) == (64, 48)
    assert decoded["codec"] == codec and decoded["fps"] == pytest.approx(25.0)


def test_sizes_become_even_and_large_frames_shrink(tmp_path: Path) -> None:
    assert even_size(65, 49, 640) == (64, 48)
    assert even_size(1280, 720, 640) == (640, 360)
    info = write(tmp_path / "big.webm", [np.zeros((721, 1281, 3), np.uint8)] * 3, fps=30)
    assert (info.width, info.height) == (640, 360)
    assert (probe(tmp_path / "big.webm")["width"], probe(tmp_path / "big.webm")["height"]) == (
        640,
        360,
    )


def test_frame_cap_cuts_and_frame_step_subsamples(tmp_path: Path) -> None:
    frames = [moving_square(i) for i in range(25)]
    cut = write(tmp_path / "cut.webm", frames, fps=50, limits=VideoLimits(max_frames=10))
    assert (cut.frames, cut.cut) == (10, True)
    assert probe(tmp_path / "cut.webm")["frames"] == 10
    thinned = write(tmp_path / "step.webm", frames, fps=50, frame_step=3)
    assert (thinned.frames, thinned.source_frames, thinned.frame_step) == (9, 25, 3)  # 0,3,..,24
    assert thinned.fps == pytest.approx(50 / 3) and not thinned.cut
    assert probe(tmp_path / "step.webm")["frames"] == 9


def test_byte_cap_cuts_before_the_limit(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    noise = [rng.integers(0, 256, (240, 320, 3), dtype=np.uint8) for _ in range(200)]
    limits = VideoLimits(max_bytes=150_000)
    info = write(tmp_path / "noise.webm", noise, fps=30, limits=limits)
    assert info.cut and info.frames < 200
    assert info.size_bytes <= limits.max_bytes
    assert probe(tmp_path / "noise.webm")["frames"] == info.frames


def test_frame_step_plan_and_frame_checks() -> None:
    assert plan_frame_step(None, 1000) == 1
    assert plan_frame_step(501, 1000) == 1
    assert plan_frame_step(1001, 1000) == 2
    assert plan_frame_step(108_001, 1000) == MAX_FRAME_STEP  # longer episodes are cut instead
    with pytest.raises(VideoError, match="returned NoneType"):
        check_frame(None)
    with pytest.raises(VideoError, match="shape"):
        check_frame(np.zeros((4, 4), np.uint8))
    with pytest.raises(VideoError, match="float32"):
        check_frame(np.zeros((4, 4, 3), np.float32))
    assert check_frame(np.zeros((4, 4, 4), np.uint8)).shape == (4, 4, 3)  # RGBA -> RGB
    with pytest.raises(ValueError, match=r"\.webm or \.mp4"):
        VideoWriter(Path("x.gif"), fps=10)


# --- evaluate() with a video -------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = PPOConfig(train_batch_size_per_learner=256, minibatch_size=128, num_epochs=1, seed=1)
    algo = PPO(config)
    algo.train()
    path = algo.save_checkpoint(tmp_path_factory.mktemp("ckpt") / "checkpoint")
    algo.stop()
    return path


def with_env(checkpoint: Path, env_id: str, tmp_path: Path) -> Path:
    """The same checkpoint, for another env with the same spaces."""
    copy = tmp_path / env_id.replace(":", "_")
    copy.mkdir()
    meta = json.loads((checkpoint / META_FILE).read_text())
    meta["config"]["env_id"] = env_id
    (copy / META_FILE).write_text(json.dumps(meta))
    os.symlink(checkpoint / "state.pt", copy / "state.pt")
    return copy


def test_evaluate_records_the_first_episode_and_the_same_returns(
    checkpoint: Path, tmp_path: Path
) -> None:
    seen: list[tuple[int, float, int]] = []
    videos: list[tuple[int, object, object, bool]] = []

    def on_video(info: object, message: object) -> None:  # before any episode is reported
        videos.append((len(seen), info, message, probe(video)["frames"] > 0))

    video = tmp_path / "first.webm"
    result = evaluate(
        checkpoint,
        4,
        seed=11,
        video=video,
        on_episode=lambda *a: seen.append(a),
        on_video=on_video,
    )
    assert videos == [(0, result.video, None, True)]  # complete after the first episode
    plain = evaluate(checkpoint, 4, seed=11)
    assert result.returns == plain.returns and result.lengths == plain.lengths
    assert seen == list(zip(range(4), result.returns, result.lengths, strict=True))
    assert result.mean == pytest.approx(np.mean(result.returns))
    assert result.std == pytest.approx(np.std(result.returns))
    assert result.video_message is None and result.video is not None
    assert result.video.frames == result.lengths[0] + 1  # the reset frame and every step
    assert (result.video.width, result.video.height, result.video.fps) == (600, 400, 50.0)
    decoded = probe(video)
    assert decoded["frames"] == result.lengths[0] + 1
    assert (decoded["width"], decoded["height"]) == (600, 400)
    stochastic = evaluate(checkpoint, 4, seed=11, deterministic=False)
    assert stochastic.returns == evaluate(checkpoint, 4, seed=11, deterministic=False).returns


def test_an_env_without_rendering_gives_a_message_and_its_returns(
    checkpoint: Path, tmp_path: Path
) -> None:
    ckpt = with_env(checkpoint, f"tests.trainer.render_envs:{render_envs.NO_RENDER}", tmp_path)
    video = tmp_path / "none.webm"
    result = evaluate(ckpt, 3, seed=2, video=video)
    assert result.video is None and not video.exists()
    assert "cannot render frames" in result.video_message and "render_mode" in result.video_message
    assert len(result.returns) == 3 and all(r > 0 for r in result.returns)
    assert result.returns == evaluate(ckpt, 3, seed=2).returns


def test_rendering_that_fails_midway_gives_a_message_and_its_returns(
    checkpoint: Path, tmp_path: Path
) -> None:
    ckpt = with_env(checkpoint, f"tests.trainer.render_envs:{render_envs.BROKEN_RENDER}", tmp_path)
    video = tmp_path / "broken.webm"
    result = evaluate(ckpt, 2, seed=4, video=video)
    assert result.video is None and not video.exists()
    assert "rendering failed at frame 5" in result.video_message
    assert render_envs.RENDER_ERROR in result.video_message
    assert result.returns == evaluate(ckpt, 2, seed=4).returns


def test_rollout_evaluate_writes_a_playable_video(checkpoint: Path, tmp_path: Path) -> None:
    out = tmp_path / "replay.mp4"
    cmd = [sys.executable, "-m", "app.cli", "evaluate", str(checkpoint), "--episodes", "2"]
    done = subprocess.run(
        [*cmd, "--video", str(out)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 2 and len(report["returns"]) == 2
    assert report["return_mean"] == pytest.approx(np.mean(report["returns"]))
    assert report["video"]["codec"] == "h264" and report["video"]["media_type"] == "video/mp4"
    assert probe(out)["frames"] == report["lengths"][0] + 1 == report["video"]["frames"]
    bad = subprocess.run(
        [*cmd, "--video", str(tmp_path / "x.gif")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert bad.returncode == 2 and ".webm or .mp4" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("env_id", ["LunarLander-v3", "InvertedPendulum-v5"])
def test_box2d_and_mujoco_envs_record_a_video_headless(env_id: str, tmp_path: Path) -> None:
    """With nothing set (no display, no MUJOCO_GL), Box2D renders through SDL's dummy driver
    and MuJoCo through EGL: `rollout evaluate --video` writes a playable file."""
    out = tmp_path / "replay.mp4"
    report = record_headless(env_id, tmp_path, out)
    assert report["video"] is not None, report
    # Long episodes keep every frame_step-th frame (plan_frame_step), so compare with the plan.
    step = report["video"]["frame_step"]
    assert (
        probe(out)["frames"] == report["video"]["frames"] == -(-(report["lengths"][0] + 1) // step)
    )
