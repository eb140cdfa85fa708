"""Learning rewards vs episode returns through the whole pipeline (not Atari-specific): clipped
or normalised rewards go into the chunks, raw ones into the returns; the reward filter's
statistics travel with the connector state into checkpoints and back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from trainer.algorithm import PPO
from trainer.config import PPOConfig
from trainer.connectors.running_stats import RunningStats
from trainer.env_runner import EnvRunner


def test_clipped_learning_rewards_raw_returns_on_cartpole() -> None:
    config = PPOConfig(
        num_envs_per_env_runner=4, env_config={"max_episode_steps": 15}, clip_rewards=0.25
    )
    torch.manual_seed(0)
    runner = EnvRunner(config)
    result = runner.sample(200)
    rewards = np.concatenate([c.rewards for c in result.chunks])
    assert rewards.dtype == np.float32 and set(np.unique(rewards)) == {0.25}
    # CartPole pays 1 per step: a raw return is the episode's length, not a quarter of it.
    assert result.episode_returns and result.episode_returns == [
        float(n) for n in result.episode_lengths
    ]


def test_reward_filter_stats_merge_checkpoint_and_restore(tmp_path: Path) -> None:
    config = PPOConfig(
        env_id="Pendulum-v1",
        num_envs_per_env_runner=2,
        train_batch_size_per_learner=256,
        minibatch_size=128,
        num_epochs=1,
        normalize_rewards=True,
        gamma=0.9,
    )
    algo = PPO(config)
    try:
        algo.train()
        state = algo.env_runners.connector_state["reward_filter"]
        assert RunningStats.from_dict(state).count == algo.env_steps  # one R per transition
        runner = algo.env_runners.local
        assert runner is not None
        assert runner.get_connector_state()["reward_filter"] == state  # synced back
        chunk_rewards = np.concatenate(
            [c.rewards for c in runner.sample(64).chunks]  # Pendulum rewards lie in [-16.3, 0]
        )
        assert np.abs(chunk_rewards).max() <= 10.0 and (chunk_rewards < 0).all()
        path = algo.save_checkpoint(tmp_path / "ckpt")
    finally:
        algo.stop()
    restored = PPO.from_checkpoint(path)
    try:
        assert restored.env_runners.connector_state["reward_filter"] == state
        local = restored.env_runners.local
        assert local is not None and local.get_connector_state()["reward_filter"] == state
    finally:
        restored.stop()
