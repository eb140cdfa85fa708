"""Stable-Baselines3 PPO with an rl-baselines3-zoo entry, timed to a target (time-to-target).

The entry (--entry, JSON in rl-zoo's keys) is the one the Rollout preset for --env was ported
from; the harness passes it (benchmarks/time_to_target.py). One torch thread: the fastest SB3
setting on a 2-core machine for these small networks. Runs in its own virtual environment
(benchmarks/.peers/sb3); sb3_zoo.py says how an entry becomes a model.
"""

from __future__ import annotations

import argparse
import json

import torch
from episode_report import EpisodeReport
from sb3_zoo import ReportEpisodes, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--env", required=True)
    parser.add_argument("--entry", type=json.loads, required=True, help="rl-zoo entry as JSON")
    parser.add_argument(
        "--env-kwargs", type=json.loads, default={}, help="gymnasium.make kwargs as JSON"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, required=True)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()

    torch.set_num_threads(args.torch_threads)
    model, total = build(args.env, args.entry, args.seed, args.env_kwargs)
    model.learn(total_timesteps=total, callback=ReportEpisodes(EpisodeReport(args.target)))


if __name__ == "__main__":
    main()
