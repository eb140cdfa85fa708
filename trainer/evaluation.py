"""A checkpoint's policy outside the service: `load_policy`, and `evaluate` over episodes with an
optional replay video (what `rollout evaluate` and the service's evaluation jobs run)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.checkpoint import load
from trainer.config import PPOConfig
from trainer.video import (
    VideoInfo,
    VideoLimits,
    VideoWriter,
    headless_rendering,
    plan_frame_step,
    rendering_hint,
)


@dataclass
class Policy:
    """The inference module + its observation connectors (filter stats frozen).

    `act(obs)` takes ONE observation of the env and returns the action to send it; call
    `reset()` at every episode start (frame stacking starts from zeros). It acts through the
    policy the EnvRunners would (trainer/policy.py `make_policy`).
    """

    config: PPOConfig
    module: Any  # PPOModule, inference-only
    env_to_module: Any  # EnvToModulePipeline for one env
    module_to_env: Any  # ModuleToEnvPipeline
    acting: Any  # trainer.policy.ActingPolicy over `module`
    _first: bool = True

    def reset(self) -> None:
        self._first = True

    def seed(self, seed: int) -> None:
        """Seed the draws of a stochastic evaluation."""
        self.acting.seed(seed)

    def act(self, obs: np.ndarray, deterministic: bool = True) -> np.ndarray:
        batch = self.env_to_module(np.asarray(obs)[None], np.array([self._first]))  # [1, *obs]
        self._first = False
        actions = self.acting.sample(batch, explore=not deterministic)[0]
        return self.module_to_env(actions)[0]


def load_policy(path: str | Path) -> Policy:
    from trainer.connectors import build_env_to_module, build_module_to_env
    from trainer.envs import env_spaces
    from trainer.module import PPOModule
    from trainer.policy import make_policy

    config, state = load(Path(path))
    obs_space, action_space = env_spaces(config.env_id, config.env_config)
    env_to_module = build_env_to_module(config, obs_space, 1)
    env_to_module.set_state(state["connector_state"])
    for piece in env_to_module.pieces:
        if hasattr(piece, "update_stats"):
            piece.update_stats = False
    module = PPOModule(env_to_module.output_space, action_space, config.model, inference_only=True)
    module.load_inference_state_dict(_module_weights(state["learner"]))
    module.eval()
    acting = make_policy(module, torch.device("cpu"), np.random.default_rng(config.seed))
    return Policy(config, module, env_to_module, build_module_to_env(action_space), acting)


def _module_weights(learner_state: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The full module state dict inside a LearnerGroup state; only its policy part is used."""
    module = learner_state["module"]
    critic = ("vf_encoder.", "vf_head.")
    return {k: v for k, v in module.items() if not k.startswith(critic)}


@dataclass(frozen=True)
class EvaluationResult:
    """Per-episode returns and lengths, and the video of the first episode when one was asked
    for (or why there is none)."""

    returns: list[float]
    lengths: list[int]
    video: VideoInfo | None = None
    video_message: str | None = None

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


EpisodeCallback = Callable[[int, float, int], None]
VideoCallback = Callable[[VideoInfo | None, str | None], None]


def evaluate(
    path: str | Path,
    episodes: int,
    seed: int = 0,
    deterministic: bool = True,
    *,
    video: Path | None = None,
    video_limits: VideoLimits | None = None,
    on_episode: EpisodeCallback | None = None,
    on_video: VideoCallback | None = None,
) -> EvaluationResult:
    """Run `episodes` fresh episodes of one env (episode k reset with `seed + k`).

    With `video`, the first episode is rendered (`render_mode="rgb_array"`) and encoded to that
    file (.webm or .mp4) within `video_limits`; an env that cannot render leaves a message in
    the result instead, and its returns are recorded all the same. `on_episode(index, return,
    length)` is called after every episode, `on_video(info, message)` as soon as the video file
    is complete (after the first episode, before the others run).
    """
    from trainer.envs import make_eval_env

    if video is not None:
        headless_rendering()  # before the first env: MuJoCo reads MUJOCO_GL on import
    policy = load_policy(path)
    policy.seed(seed)
    config = policy.config
    env = make_eval_env(config.env_id, config.env_config)
    returns: list[float] = []
    lengths: list[int] = []
    info, message = None, None
    try:
        for episode in range(episodes):
            if episode == 0 and video is not None:
                recording = _Recording.start(config.env_id, config.env_config, video, video_limits)
                total, length = recording.run(policy, env, seed, deterministic)
                info, message = recording.info, recording.message
                if on_video is not None:
                    on_video(info, message)
            else:
                total, length = _run_episode(policy, env, seed + episode, deterministic)
            returns.append(total)
            lengths.append(length)
            if on_episode is not None:
                on_episode(episode, total, length)
    finally:
        env.close()
    return EvaluationResult(returns, lengths, info, message)


def _run_episode(
    policy: Policy, env: Any, seed: int, deterministic: bool, recording: _Recording | None = None
) -> tuple[float, int]:
    """One episode: (undiscounted return, steps); frames go to `recording` while it records."""
    obs, _ = env.reset(seed=seed)
    policy.reset()
    if recording is not None:
        recording.capture()
    total, length, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.act(obs, deterministic))
        total += float(reward)
        length += 1
        done = terminated or truncated
        if recording is not None:
            recording.capture()
    return total, length


class _Recording:
    """The first episode's env with `rgb_array` rendering and the writer its frames go to.

    Every way rendering can fail (the env refuses the render mode, render() raises or returns
    no image) ends the recording with a message; the episode itself goes on.
    """

    def __init__(self, env: Any, writer: VideoWriter | None, message: str | None) -> None:
        self.env = env
        self.writer = writer
        self.message = message
        self.info: VideoInfo | None = None

    @classmethod
    def start(
        cls, env_id: str, env_config: dict[str, Any], path: Path, limits: VideoLimits | None
    ) -> _Recording:
        from trainer.envs import make_eval_env

        limits = limits or VideoLimits()  # evaluate() has set up headless rendering
        try:
            env = make_eval_env(env_id, env_config, render=True)
        except Exception as exc:
            return cls(
                None,
                None,
                f"{env_id} cannot render frames (render_mode='rgb_array'): "
                f"{type(exc).__name__}: {exc}",
            )
        if env.render_mode != "rgb_array":
            env.close()
            return cls(None, None, f"{env_id} does not support render_mode='rgb_array'")
        steps = env.spec.max_episode_steps if env.spec is not None else None
        steps = steps or getattr(env, "max_episode_steps", None)
        step = plan_frame_step(steps + 1 if steps else None, limits.max_frames)
        fps = env.metadata.get("render_fps")
        return cls(env, VideoWriter(path, fps, step, limits), None)

    def run(
        self, policy: Policy, fallback: Any, seed: int, deterministic: bool
    ) -> tuple[float, int]:
        """Play one episode on the rendering env (or `fallback` when there is none)."""
        try:
            result = _run_episode(policy, self.env or fallback, seed, deterministic, self)
            self.finish()
            return result
        finally:
            self.close()

    def capture(self) -> None:
        if self.writer is None:
            return
        try:
            frame = self.env.render()
            if not self.writer.add(frame):
                self._stop()  # full: the rest of the episode is not rendered
        except Exception as exc:
            at = self.writer.source_frames
            self.message = (
                f"rendering failed at frame {at}: {type(exc).__name__}: {exc}{rendering_hint(exc)}"
            )
            self.writer.discard()
            self.writer = None

    def _stop(self) -> None:
        assert self.writer is not None
        self.info = self.writer.close()
        self.writer = None

    def finish(self) -> None:
        """The episode ended: finish the file."""
        if self.writer is not None:
            self._stop()
        if self.info is None and self.message is None:
            self.message = "the episode rendered no frame"

    def close(self) -> None:
        if self.writer is not None:
            self.writer.discard()
            self.writer = None
        if self.env is not None:
            self.env.close()
            self.env = None
