"""Episode chunks: the unit EnvRunners hand to Learners.

A chunk is a contiguous piece of one environment episode, stored as numpy arrays (no per-step
dicts). It carries T+1 observations and T of everything else, so the Learner can compute every
V(s_t) and the chunk's bootstrap value V(s_T) in one batched forward pass.

A chunk ends in one of three ways, kept apart until GAE:
- terminated: the MDP ended; bootstrap value 0.
- truncated: the env's time limit cut it; bootstrap V(s_T).
- cut: sample() ended while the episode was still running; bootstrap V(s_T). The episode
  continues in the next sample() with the same `id` and `t_started` = this chunk's end.

Axis vocabulary used across the trainer: T time, N sub-envs, B = flattened batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class EpisodeChunk:
    id: str  # stable over all chunks of one env episode
    t_started: int  # step index of this chunk's first action within its episode
    obs: np.ndarray  # [T+1, *obs_shape]; obs[T] is the bootstrap state
    actions: np.ndarray  # [T, *action_shape], as sampled (before clipping for the env)
    rewards: np.ndarray  # [T] float32
    logp: np.ndarray  # [T] float32, log-prob of `actions` under the sampling policy
    dist_inputs: np.ndarray  # [T, D] float32, logits or (mean, log_std) of that policy
    terminated: bool
    truncated: bool
    weights_version: int  # version of the weights that sampled this chunk

    def __post_init__(self) -> None:
        t = len(self.rewards)
        if t < 1:
            raise ValueError("an episode chunk needs at least one step")
        if len(self.obs) != t + 1:
            raise ValueError(f"obs must have T+1={t + 1} rows, got {len(self.obs)}")
        for name in ("actions", "logp", "dist_inputs"):
            if len(getattr(self, name)) != t:
                raise ValueError(f"{name} must have T={t} rows, got {len(getattr(self, name))}")
        if self.terminated and self.truncated:
            # gymnasium allows both; termination wins (no bootstrap), as in SB3.
            object.__setattr__(self, "truncated", False)

    def __len__(self) -> int:
        return len(self.rewards)

    @property
    def is_done(self) -> bool:
        """True when the env episode ended with this chunk (terminated or truncated)."""
        return self.terminated or self.truncated

    @property
    def bootstraps(self) -> bool:
        """Whether the value target at the last step uses V(s_T) (truncated or cut)."""
        return not self.terminated
