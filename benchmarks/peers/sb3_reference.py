"""Stable-Baselines3 PPO on one env with rl-baselines3-zoo's hyperparameters, for reference curves.

Every finished episode is appended to $BENCH_REPORT as one JSON line (episode_report.py), with no
target: the run goes for the whole budget. `--print-settings` prints the env's settings as JSON
(what benchmarks/references.py records in the reference file) and exits.

Source of the hyperparameters: DLR-RM/rl-baselines3-zoo, hyperparams/ppo.yml, one entry per env
below. Keys an entry omits take SB3's PPO defaults. ``lin_X`` is ``progress_remaining * X`` over
the zoo's n_timesteps; ``normalize: true`` is VecNormalize over observations and rewards (the
episode returns reported come from the Monitor wrapper underneath it, i.e. unnormalised).
One torch thread: the fastest SB3 setting on a small machine for these tiny networks. Runs in
its own virtual environment (benchmarks/.peers/sb3).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "n_envs": 8,
        "n_timesteps": 100_000,
        "n_steps": 32,
        "batch_size": 256,
        "gae_lambda": 0.8,
        "gamma": 0.98,
        "n_epochs": 20,
        "ent_coef": 0.0,
        "learning_rate": "lin_0.001",
        "clip_range": "lin_0.2",
    },
    "Acrobot-v1": {
        "normalize": True,
        "n_envs": 16,
        "n_timesteps": 1_000_000,
        "n_steps": 256,
        "gae_lambda": 0.94,
        "gamma": 0.99,
        "n_epochs": 4,
        "ent_coef": 0.0,
    },
    "Pendulum-v1": {
        "n_envs": 4,
        "n_timesteps": 100_000,
        "n_steps": 1024,
        "gae_lambda": 0.95,
        "gamma": 0.9,
        "n_epochs": 10,
        "ent_coef": 0.0,
        "learning_rate": 1e-3,
        "clip_range": 0.2,
        "use_sde": True,
        "sde_sample_freq": 4,
    },
}

PPO_KEYS = (
    "n_steps",
    "batch_size",
    "gae_lambda",
    "gamma",
    "n_epochs",
    "ent_coef",
    "learning_rate",
    "clip_range",
    "use_sde",
    "sde_sample_freq",
)


def schedule(value: Any) -> Any:
    """rl-zoo's ``lin_<initial>`` (SB3 passes progress_remaining: 1 -> 0); numbers unchanged."""
    if isinstance(value, str) and value.startswith("lin_"):
        initial = float(value[4:])
        return lambda progress_remaining: progress_remaining * initial
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True, choices=sorted(ZOO))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--total-timesteps",
        type=int,
        help="stop early (default: the zoo's n_timesteps); lin_ schedules still span the zoo's",
    )
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--print-settings", action="store_true")
    args = parser.parse_args()
    settings = ZOO[args.env]
    if args.print_settings:
        print(json.dumps(settings))
        return

    import stable_baselines3
    import torch
    from episode_report import EpisodeReport
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    class ReportEpisodes(BaseCallback):
        """Reports every finished episode (Monitor's info['episode']); ends learn() at `budget`."""

        def __init__(self, report: EpisodeReport, budget: int) -> None:
            super().__init__()
            self.report = report
            self.budget = budget

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                episode = info.get("episode")
                if episode is not None:
                    self.report.episode(self.num_timesteps, episode["r"])
            return self.num_timesteps < self.budget

    torch.set_num_threads(args.torch_threads)
    env = make_vec_env(args.env, n_envs=settings["n_envs"], seed=args.seed)
    if settings.get("normalize"):
        env = VecNormalize(env)
    kwargs = {k: schedule(settings[k]) for k in PPO_KEYS if k in settings}
    model = PPO("MlpPolicy", env, seed=args.seed, device="cpu", verbose=0, **kwargs)
    zoo_budget = settings["n_timesteps"]
    budget = min(args.total_timesteps or zoo_budget, zoo_budget)
    # SB3 computes progress_remaining over the total_timesteps it is given: learn() the zoo's
    # budget and stop at ours, so that lin_ schedules match the zoo's even on a shorter run.
    model.learn(total_timesteps=zoo_budget, callback=ReportEpisodes(EpisodeReport(None), budget))
    print(json.dumps({"done": True, "sb3": stable_baselines3.__version__}), flush=True)


if __name__ == "__main__":
    main()
