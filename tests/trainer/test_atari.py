"""Atari through ale-py's AtariVectorEnv: ids without a module prefix, uint8 [4, 84, 84] frames
declared channels first, NEXT_STEP autoreset rows that never become transitions, raw episode
returns next to clipped learning rewards, env threads sized to the runner's cores.

Episodes are cut short (max_num_frames_per_episode) so the tests take seconds: a random Pong
player loses a point every ~60 steps, so 500-step episodes end truncated with scores around -10.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer import env_runner as env_runner_module
from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.env_runner import EnvRunner
from trainer.envs import env_spaces, env_threads, make_vector_env, observation_space, usable_cores
from trainer.obs_layout import ImageBox, image_layout
from trainer.resolve import resolve_config

EPISODE_FRAMES = 2000  # 500 agent steps at frameskip 4
SHORT = {"max_num_frames_per_episode": EPISODE_FRAMES, "repeat_action_probability": 0.0}


class Recorder:
    """Wraps a vector env's step() and keeps what the env returned, row by row."""

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        self.rewards: list[np.ndarray] = []
        self.done: list[np.ndarray] = []
        self.obs: list[np.ndarray] = []
        self._step = env.step
        env.step = self  # type: ignore[method-assign]

    def __call__(self, actions: np.ndarray):
        obs, rewards, terminated, truncated, info = self._step(actions)
        self.rewards.append(np.array(rewards, np.float64))
        self.done.append(np.array(terminated | truncated))
        self.obs.append(np.array(obs))
        return obs, rewards, terminated, truncated, info


def _runner(**fields: object) -> EnvRunner:
    config = PPOConfig.model_validate(
        {"env_id": "ALE/Pong-v5", "num_envs_per_env_runner": 2, "env_config": SHORT, **fields}
    )
    torch.manual_seed(0)
    return EnvRunner(config)


def test_ale_ids_need_no_module_prefix_and_declare_their_layout() -> None:
    for env_id in ("ALE/Pong-v5", "ale_py:ALE/Pong-v5"):
        env = make_vector_env(env_id, 2, SHORT)
        try:
            space = observation_space(env)
            assert isinstance(space, ImageBox) and image_layout(space) == "channels_first"
            assert space.shape == (4, 84, 84) and space.dtype == np.uint8
            assert env.single_action_space == gym.spaces.Discrete(6)
            obs, _ = env.reset(seed=0)
            assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        finally:
            env.close()
    obs_space, _ = env_spaces("ALE/Pong-v5", SHORT)
    assert image_layout(obs_space) == "channels_first"
    # ale-py sets metadata on VectorEnv's class-level dict; ours must not leak to other envs.
    cartpole = make_vector_env("CartPole-v1", 1, {})
    assert "observation_layout" not in cartpole.metadata
    cartpole.close()


def test_clipping_inside_the_env_is_refused() -> None:
    with pytest.raises(ValueError, match="clip_rewards"):
        make_vector_env("ALE/Pong-v5", 1, {"reward_clipping": True})
    with pytest.raises(gym.error.Error, match="NoSuchGame"):
        make_vector_env("ALE/NoSuchGame-v5", 1, {})


def test_runner_frames_layout_raw_returns_and_clipped_learning_rewards() -> None:
    runner = _runner(clip_rewards=0.5)  # Pong's +-1 points become +-0.5 for learning
    assert runner.env_to_module.output_space == ImageBox(
        0, 255, (4, 84, 84), np.uint8, layout="channels_first"
    )
    assert runner.module.pi_encoder.conv[0].in_channels == 4
    rec = Recorder(runner.env)
    results = [runner.sample(600), runner.sample(600)]
    rewards, done = np.stack(rec.rewards), np.stack(rec.done)  # [K, N]
    reset = np.zeros_like(done)
    reset[1:] = done[:-1]  # NEXT_STEP: the row after an episode's last step is its reset
    # Episode returns: the raw rewards summed between resets, slot by slot.
    expected = []
    for slot in range(2):
        total = 0.0
        for k in range(len(rewards)):
            if not reset[k, slot]:
                total += rewards[k, slot]
            if done[k, slot]:
                expected.append(total)
                total = 0.0
    returns = [r for res in results for r in res.episode_returns]
    assert sorted(returns) == sorted(expected)
    assert len(returns) >= 2 and min(returns) <= -2  # several points lost: unclipped sums
    assert all(length == EPISODE_FRAMES // 4 for res in results for length in res.episode_lengths)
    # Autoreset rows are no transitions: every recorded row is a chunk step or a reset row.
    assert sum(res.env_steps for res in results) == done.size - reset.sum()
    chunks = [c for res in results for c in res.chunks]
    assert sum(len(c) for c in chunks) == done.size - reset.sum()
    learning = np.concatenate([c.rewards for c in chunks])
    assert set(np.unique(learning)) <= {-0.5, 0.0, 0.5} and (learning == -0.5).any()
    # A new episode starts with the reset row's observation, not a transition into it.
    first_obs = {c.obs[0].tobytes() for c in chunks if c.t_started == 0}
    k, slot = np.argwhere(reset)[0]
    assert rec.obs[k][slot].tobytes() in first_obs
    # The step that ends an episode carries the true final frame stack (not a reset one).
    finished = [c for c in chunks if c.truncated]
    assert finished and all(c.obs.dtype == np.uint8 for c in finished)


def test_env_threads_follow_the_runners_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_threads(3.0, in_actor=True) == 3
    assert env_threads(0.5, in_actor=True) == 1
    assert env_threads(1.0, in_actor=False) == usable_cores()
    assert env_threads(1.0, in_actor=False, overlap=True) == max(1, usable_cores() - 1)
    seen: dict[str, object] = {}
    real = env_runner_module.make_vector_env

    def spy(env_id: str, num_envs: int, env_config: dict, *, num_threads: int, **kwargs: str):
        seen["num_threads"] = num_threads
        return real(env_id, num_envs, env_config, num_threads=num_threads, **kwargs)

    monkeypatch.setattr(env_runner_module, "make_vector_env", spy)
    config = PPOConfig(env_id="ALE/Pong-v5", num_envs_per_env_runner=2, num_cpus_per_env_runner=3)
    EnvRunner(config, worker_index=1).stop()  # a Ray actor's runner: the CPUs Ray reserved
    assert seen["num_threads"] == 3
    EnvRunner(config, worker_index=0).stop()  # serial: every core (the env steps synchronously)
    assert seen["num_threads"] == usable_cores()


def test_one_ppo_iteration_with_the_atari_preset() -> None:
    """The preset as resolved for ALE/Pong-v5, shrunk to CPU-test size: one full iteration."""
    resolved = resolve_config(
        {
            "env_id": "ALE/Pong-v5",
            "num_envs_per_env_runner": 4,
            "train_batch_size_per_learner": 128,
            "minibatch_size": 64,
            "num_epochs": 1,
            "env_config": {"max_num_frames_per_episode": 100},  # 25-step episodes
        }
    )
    assert resolved.preset == "atari" and resolved.config.clip_rewards == 1.0
    assert resolved.config.env_config == {
        "repeat_action_probability": 0.0,
        "img_height": 64,
        "img_width": 64,
        "max_num_frames_per_episode": 100,
    }
    assert resolved.config.model.cnn_channels == (16, 32)
    algo = PPO(resolved.config)
    try:
        metrics = algo.train()
    finally:
        algo.stop()
    assert metrics["env_steps"] >= 128 and metrics["episodes"] >= 4
    assert np.isfinite(metrics["policy_loss"]) and np.isfinite(metrics["vf_loss"])
    assert metrics["lr"] == resolved.config.lr


def test_an_atari_checkpoint_is_evaluated_on_the_env_it_trained_on(tmp_path) -> None:
    """`rollout evaluate` on an Atari checkpoint: the preset's preprocessed 64x64 frames (the
    policy's own input), episodes to the end, and a video of what the agent sees."""
    from trainer.evaluation import evaluate

    resolved = resolve_config(
        {
            "env_id": "ALE/Pong-v5",
            "num_envs_per_env_runner": 2,
            "train_batch_size_per_learner": 64,
            "minibatch_size": 64,
            "num_epochs": 1,
            "env_config": {"max_num_frames_per_episode": 400},  # 100-step episodes
        }
    )
    algo = PPO(resolved.config)
    try:
        algo.train()
        ckpt = algo.save_checkpoint(tmp_path / "ckpt")
    finally:
        algo.stop()
    video = tmp_path / "pong.webm"
    result = evaluate(ckpt, 2, seed=3, video=video)
    assert result.lengths == [100, 100] and all(np.isfinite(result.returns))
    assert result.video is not None, result.video_message
    assert (result.video.width, result.video.height) == (256, 256)
    assert result.video.source_frames == 101 and video.stat().st_size > 0
    again = evaluate(ckpt, 2, seed=3)
    assert again.returns == result.returns and again.lengths == result.lengths
