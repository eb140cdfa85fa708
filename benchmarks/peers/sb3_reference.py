"""Stable-Baselines3 PPO on one env with an rl-baselines3-zoo entry, for reference curves.

Every finished episode is appended to $BENCH_REPORT as one JSON line (episode_report.py), with no
target: the run goes for its whole budget. The entry (--entry, JSON in rl-zoo's keys) is the one
the Rollout preset for --env was ported from; benchmarks/references.py passes it. One torch
thread: the fastest SB3 setting on a small machine for these tiny networks. Runs in its own
virtual environment (benchmarks/.peers/sb3); sb3_zoo.py says how an entry becomes a model.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True)
    parser.add_argument("--entry", type=json.loads, required=True, help="rl-zoo entry as JSON")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--total-timesteps",
        type=int,
        help="stop early (default: the zoo's n_timesteps); lin_ schedules still span the zoo's",
    )
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()

    import stable_baselines3
    import torch
    from episode_report import EpisodeReport
    from sb3_zoo import ReportEpisodes, build

    torch.set_num_threads(args.torch_threads)
    model, zoo_budget = build(args.env, args.entry, args.seed)
    budget = min(args.total_timesteps or zoo_budget, zoo_budget)
    # SB3 computes progress_remaining over the total_timesteps it is given: learn() the zoo's
    # budget and stop at ours, so that lin_ schedules match the zoo's even on a shorter run.
    model.learn(total_timesteps=zoo_budget, callback=ReportEpisodes(EpisodeReport(None), budget))
    print(json.dumps({"done": True, "sb3": stable_baselines3.__version__}), flush=True)


if __name__ == "__main__":
    main()
