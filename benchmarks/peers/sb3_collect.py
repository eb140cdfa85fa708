"""SB3's rollout collection alone (no training): env steps/s of ``PPO.collect_rollouts``.

Same vector env as the time-to-target run (make_vec_env: DummyVecEnv over Monitor-wrapped
CartPole-v1), MlpPolicy 64x64, one torch thread. Prints one JSON line per num_envs.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.env_util import make_vec_env


def collect_rate(num_envs: int, steps: int) -> float:
    n_steps = max(1, steps // num_envs)
    env = make_vec_env("CartPole-v1", n_envs=num_envs, seed=0)
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=n_steps * num_envs, device="cpu")
    model._setup_learn(total_timesteps=10 * n_steps * num_envs, callback=None)
    callback = CallbackList([])
    callback.init_callback(model)
    # Warm-up pass, then the timed one.
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=n_steps)
    t0 = time.perf_counter()
    model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=n_steps)
    return n_steps * num_envs / (time.perf_counter() - t0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--num-envs", default="1,8,64")
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for n in (int(x) for x in args.num_envs.split(",")):
        print(json.dumps({"num_envs": n, "env_steps_per_s": collect_rate(n, args.steps)}))


if __name__ == "__main__":
    main()
