"""Raw sampling throughput of Rollout's EnvRunner against its limit and against SB3.

For each number of sub-envs N, env steps per second (autoreset steps not counted) of:
  - limit:   the EnvRunner's own vector env (trainer.envs.make_vector_env) stepped with random
             actions drawn in one numpy call per step; no policy, no recording;
  - rollout: EnvRunner.sample() with the default policy (inference, recording, chunking);
  - sb3:     SB3 PPO.collect_rollouts (DummyVecEnv, policy + value forward per step), run in
             the SB3 peer venv, if it exists.
One torch thread everywhere. Prints a table with each rate's ratio to the limit.

    .venv/bin/python benchmarks/sampling_throughput.py [--num-envs 1,8,16,64] [--steps 20000]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from benchmarks.contenders import CONTENDERS, ENV_ID, PEER_SCRIPTS
from trainer.config import PPOConfig
from trainer.env_runner import EnvRunner
from trainer.envs import make_vector_env


def limit_rate(num_envs: int, steps: int) -> float:
    """Random actions through the same vector env, counting transitions like the EnvRunner."""
    env = make_vector_env(ENV_ID, num_envs, {})
    rng = np.random.default_rng(0)
    n_actions = int(env.single_action_space.n)
    env.reset(seed=0)
    pending = np.zeros(num_envs, bool)
    counted = 0
    t0 = time.perf_counter()
    while counted < steps:
        _, _, terminated, truncated, _ = env.step(rng.integers(n_actions, size=num_envs))
        counted += num_envs - int(pending.sum())
        pending = terminated | truncated
    rate = counted / (time.perf_counter() - t0)
    env.close()
    return rate


def rollout_rate(num_envs: int, steps: int) -> dict[str, float]:
    """EnvRunner.sample() with a freshly initialised policy; one warm-up call first."""
    config = PPOConfig(num_envs_per_env_runner=num_envs, torch_num_threads=1)
    runner = EnvRunner(config)
    runner.sample(min(steps, 2_000))
    result = runner.sample(steps)
    runner.stop()
    return {
        "env_steps_per_s": result.env_steps / result.time_total_s,
        "env_share": result.time_env_s / result.time_total_s,
        "inference_share": result.time_inference_s / result.time_total_s,
    }


def sb3_rates(num_envs: list[int], steps: int) -> dict[int, float]:
    python = CONTENDERS["sb3"].executable
    if not python.exists():
        return {}
    out = subprocess.run(
        [
            str(python),
            str(PEER_SCRIPTS / "sb3_collect.py"),
            "--num-envs",
            ",".join(map(str, num_envs)),
            "--steps",
            str(steps),
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {row["num_envs"]: row["env_steps_per_s"] for row in rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-envs", default="1,8,16,64")
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    sizes = [int(n) for n in args.num_envs.split(",")]
    sb3 = sb3_rates(sizes, args.steps)
    rows = []
    for n in sizes:
        limit = limit_rate(n, args.steps)
        rollout = rollout_rate(n, args.steps)
        rows.append({"num_envs": n, "limit": limit, "rollout": rollout, "sb3": sb3.get(n)})

    print(
        "| N envs | limit (random actions) | Rollout EnvRunner | / limit | env / inference "
        "share | SB3 collect_rollouts | / limit | Rollout / SB3 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        r, lim, s = row["rollout"], row["limit"], row["sb3"]
        sb3_text = (
            f"{s:,.0f} | {s / lim:.2f} | {r['env_steps_per_s'] / s:.1f}x" if s else "- | - | -"
        )
        print(
            f"| {row['num_envs']} | {lim:,.0f} | {r['env_steps_per_s']:,.0f} "
            f"| {r['env_steps_per_s'] / lim:.2f} "
            f"| {r['env_share']:.0%} / {r['inference_share']:.0%} | {sb3_text} |"
        )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"steps": args.steps, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
