"""Stable-Baselines3 PPO on CartPole-v1 with rl-baselines3-zoo's tuned hyperparameters.

Source of the hyperparameters: DLR-RM/rl-baselines3-zoo, hyperparams/ppo.yml, entry CartPole-v1
(n_envs 8, n_timesteps 1e5, n_steps 32, batch_size 256, gae_lambda 0.8, gamma 0.98, n_epochs 20,
ent_coef 0.0, learning_rate lin_0.001, clip_range lin_0.2). The zoo's ``lin_X`` is
``progress_remaining * X`` over n_timesteps. One torch thread: the fastest SB3 setting on a
2-core machine for this tiny network. Runs in its own virtual environment (benchmarks/.peers/sb3).
"""

from __future__ import annotations

import argparse

import torch
from episode_report import EpisodeReport
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env


def linear(initial: float):
    """rl-zoo's ``lin_<initial>`` schedule (SB3 passes progress_remaining: 1 -> 0)."""
    return lambda progress_remaining: progress_remaining * initial


class ReportEpisodes(BaseCallback):
    """Reports every finished episode (Monitor's info['episode']) and stops at the target."""

    def __init__(self, report: EpisodeReport) -> None:
        super().__init__()
        self.report = report

    def _on_step(self) -> bool:
        crossed = False
        for info in self.locals["infos"]:
            episode = info.get("episode")
            if episode is not None:
                crossed = self.report.episode(self.num_timesteps, episode["r"])
        return not crossed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--total-timesteps", type=int, default=100_000)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.torch_threads)
    env = make_vec_env("CartPole-v1", n_envs=8, seed=args.seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=args.seed,
        device="cpu",
        verbose=0,
    )
    model.learn(
        total_timesteps=args.total_timesteps, callback=ReportEpisodes(EpisodeReport(args.target))
    )


if __name__ == "__main__":
    main()
