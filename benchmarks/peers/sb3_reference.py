"""Stable-Baselines3 PPO on one env with an rl-baselines3-zoo entry, for reference curves.

Every finished episode is appended to $BENCH_REPORT as one JSON line (episode_report.py), with no
target: the run goes for its whole budget. The entry (--entry, JSON in rl-zoo's keys) is the one
the Rollout preset for --env was ported from; benchmarks/references.py passes it. One torch
thread: the fastest SB3 setting on a small machine for these tiny networks. Runs in its own
virtual environment (benchmarks/.peers/sb3); sb3_zoo.py says how an entry becomes a model.

With --evaluate N the final policy is then scored as rl-zoo scores (and as
benchmarks/zoo_scores.py scores Rollout): N episodes with the deterministic policy on a fresh env,
observation statistics frozen, returns unnormalised; the last stdout line is the JSON report.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", required=True)
    parser.add_argument("--entry", type=json.loads, required=True, help="rl-zoo entry as JSON")
    parser.add_argument(
        "--env-kwargs", type=json.loads, default={}, help="gymnasium.make kwargs as JSON"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--total-timesteps",
        type=int,
        help="stop early (default: the zoo's n_timesteps); lin_ schedules still span the zoo's",
    )
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--evaluate", type=int, default=0, help="episodes to score at the end")
    parser.add_argument("--eval-seed", type=int, default=1000, help="seed of the scoring env")
    args = parser.parse_args()

    import stable_baselines3
    import torch
    from episode_report import EpisodeReport
    from sb3_zoo import ReportEpisodes, build

    torch.set_num_threads(args.torch_threads)
    model, zoo_budget = build(args.env, args.entry, args.seed, args.env_kwargs)
    budget = min(args.total_timesteps or zoo_budget, zoo_budget)
    # SB3 computes progress_remaining over the total_timesteps it is given: learn() the zoo's
    # budget and stop at ours, so that lin_ schedules match the zoo's even on a shorter run.
    model.learn(total_timesteps=zoo_budget, callback=ReportEpisodes(EpisodeReport(None), budget))
    done = {"done": True, "sb3": stable_baselines3.__version__, "env_steps": model.num_timesteps}
    print(json.dumps(done), flush=True)
    if args.evaluate:
        report = evaluate(model, args.env, args.evaluate, args.eval_seed, args.env_kwargs)
        print(json.dumps(report), flush=True)


def evaluate(model, env_id: str, episodes: int, seed: int, env_kwargs: dict) -> dict:
    """Deterministic returns of `episodes` episodes, as rl-zoo's enjoy.py / evaluate_policy, on
    the starts `rollout evaluate --seed` plays: episode k reset with `seed + k`, so that both
    trainers' policies are scored from the same initial states."""
    import numpy as np
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env(env_id, n_envs=1, seed=seed, env_kwargs=env_kwargs)
    trained = model.get_env()
    if isinstance(trained, VecNormalize):  # the training statistics, frozen; raw rewards
        env = VecNormalize(env, training=False, norm_reward=False, clip_obs=trained.clip_obs)
        env.obs_rms = trained.obs_rms
    returns = []
    for episode in range(episodes):
        env.seed(seed + episode)
        obs = env.reset()
        while True:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, dones, infos = env.step(action)
            if dones[0]:  # the Monitor under any VecNormalize: the raw return
                returns.append(float(infos[0]["episode"]["r"]))
                break
    return {
        "episodes": len(returns),
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
    }


if __name__ == "__main__":
    main()
