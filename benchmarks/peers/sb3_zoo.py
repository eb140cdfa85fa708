"""Stable-Baselines3 PPO built from an rl-baselines3-zoo entry, as rl-zoo's train.py builds it.

The entry comes in rl-zoo's own keys (hyperparams/ppo.yml), as JSON on the command line: the
harness passes the entry a Rollout preset was ported from (trainer/presets.py `zoo_entry`), so
both sides of a benchmark run one table. As rl-zoo does: ``lin_X`` is ``progress_remaining * X``
over the zoo's n_timesteps; ``normalize: true`` wraps the vector env in VecNormalize over
observations and rewards with the entry's gamma (the returns reported come from the Monitor
wrapper underneath it, i.e. unnormalised); ``activation_fn`` names a torch.nn class. Keys an
entry omits take SB3's PPO defaults. Plain standard library besides SB3 and torch: it runs in the
peer venv (benchmarks/.peers/sb3), which cannot import the project.
"""

from __future__ import annotations

from typing import Any

import torch
from episode_report import EpisodeReport
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize


def schedule(value: Any) -> Any:
    """rl-zoo's ``lin_<initial>`` (SB3 passes progress_remaining: 1 -> 0); numbers unchanged."""
    if isinstance(value, str) and value.startswith("lin_"):
        initial = float(value[len("lin_") :])
        return lambda progress_remaining: progress_remaining * initial
    return value


def policy_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    out = dict(kwargs)
    if "activation_fn" in out:  # "nn.ReLU" -> torch.nn.ReLU, as rl-zoo's eval() of the string
        out["activation_fn"] = getattr(torch.nn, out["activation_fn"].removeprefix("nn."))
    return out


def build(
    env_id: str, entry: dict[str, Any], seed: int, env_kwargs: dict[str, Any] | None = None
) -> tuple[PPO, int]:
    """The PPO model for one rl-zoo entry, and the entry's n_timesteps; `env_kwargs` go to
    gymnasium.make (rl-zoo's `--env-kwargs`)."""
    hyper = dict(entry)
    n_envs = int(hyper.pop("n_envs", 1))
    total = int(hyper.pop("n_timesteps"))
    policy = hyper.pop("policy", "MlpPolicy")
    normalize = hyper.pop("normalize", False)
    env = make_vec_env(env_id, n_envs=n_envs, seed=seed, env_kwargs=env_kwargs)
    if normalize:
        env = VecNormalize(env, gamma=hyper.get("gamma", 0.99))
    for key in ("learning_rate", "clip_range"):
        if key in hyper:
            hyper[key] = schedule(hyper[key])
    if "policy_kwargs" in hyper:
        hyper["policy_kwargs"] = policy_kwargs(hyper["policy_kwargs"])
    return PPO(policy, env, seed=seed, device="cpu", verbose=0, **hyper), total


class ReportEpisodes(BaseCallback):
    """Reports every finished episode (Monitor's info['episode']); ends learn() once the report
    has crossed its target, or at `budget` env steps."""

    def __init__(self, report: EpisodeReport, budget: int | None = None) -> None:
        super().__init__()
        self.report = report
        self.budget = budget

    def _on_step(self) -> bool:
        crossed = False
        for info in self.locals["infos"]:
            episode = info.get("episode")
            if episode is not None:
                crossed = self.report.episode(self.num_timesteps, episode["r"])
        return not crossed and (self.budget is None or self.num_timesteps < self.budget)
