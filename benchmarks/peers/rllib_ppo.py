"""RLlib 2.60 PPO (new API stack) on CartPole-v1 with RLlib's tuned CartPole example.

Source: ray-project/ray, rllib/examples/algorithms/ppo/cartpole_ppo.py (formerly
rllib/tuned_examples/ppo/cartpole_ppo.py): lr 3e-4, num_epochs 6, vf_loss_coeff 0.01, one
32-unit linear hidden layer shared by policy and value (vf_share_layers), everything else RLlib's
PPO defaults (train_batch_size_per_learner 4000, minibatch 128, gamma 0.99, lambda 1.0,
KL loss on). Resources: 1 EnvRunner actor with 8 sub-envs and the learner in the driver, the
fastest RLlib layout measured on a 2-core machine. Runs in its own virtual environment
(benchmarks/.peers/rllib).

RLlib's own ``env_runners/episode_return_mean`` averages only the episodes finished in the
current iteration, so episodes are reported from a callback, each with the EnvRunner's count of
env steps, and the 100-episode window is computed like every other peer's.
"""

from __future__ import annotations

import argparse

import ray
from episode_report import EpisodeReport
from ray.rllib.algorithms.ppo import PPOConfig
from ray.rllib.callbacks.callbacks import RLlibCallback
from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

CROSSED = "bench_target_crossed"


class ReportEpisodes(RLlibCallback):
    """Runs inside the EnvRunner: counts env steps, reports each finished episode."""

    target: float | None = None

    def __init__(self) -> None:
        super().__init__()
        self.report = EpisodeReport(self.target)
        self.env_steps = 0

    def on_episode_step(self, *, episode, **kwargs) -> None:
        self.env_steps += 1

    def on_episode_end(
        self, *, episode, prev_episode_chunks=None, metrics_logger=None, **kwargs
    ) -> None:
        # RLlib cuts ongoing episodes at the end of every sample() call: the whole return is
        # this last chunk's plus the chunks already handed to the learner (as RLlib's own
        # get_metrics() adds them up).
        episode_return = episode.get_return() + sum(
            chunk.get_return() for chunk in prev_episode_chunks or ()
        )
        crossed = self.report.episode(self.env_steps, episode_return)
        if metrics_logger is not None:
            metrics_logger.log_value(CROSSED, int(crossed), reduce="max")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--max-env-steps", type=int, default=1_000_000)
    parser.add_argument("--num-env-runners", type=int, default=1)
    parser.add_argument("--num-envs-per-env-runner", type=int, default=8)
    args = parser.parse_args()

    ReportEpisodes.target = args.target
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(
            num_env_runners=args.num_env_runners,
            num_envs_per_env_runner=args.num_envs_per_env_runner,
        )
        .training(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01)
        .rl_module(
            model_config=DefaultModelConfig(
                fcnet_hiddens=[32], fcnet_activation="linear", vf_share_layers=True
            )
        )
        .callbacks(ReportEpisodes)
        .debugging(seed=args.seed)
    )
    algo = config.build_algo()
    while True:
        result = algo.train()
        runners = result.get("env_runners", {})
        if runners.get(CROSSED, 0) or runners.get("num_env_steps_sampled_lifetime", 0) >= (
            args.max_env_steps
        ):
            break
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
