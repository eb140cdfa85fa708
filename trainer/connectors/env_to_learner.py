"""env-to-learner pieces: the rewards the Learner trains on, derived from the env's rewards.

They run in the EnvRunner on every vector step (axes: N sub-envs) and only change what goes
into the chunks; episode returns are summed from the env's raw rewards, so a clipped or
normalised run still reports the game's score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainer.connectors.running_stats import RunningMoments, RunningStats


class ClipRewards:
    """Clip learning rewards to [-c, c] (Mnih et al. 2015 clip Atari rewards to [-1, 1]; for
    Atari's integer rewards that is their sign, as SB3's ClipRewardEnv and envpool's
    reward_clip)."""

    name = "clip_rewards"

    def __init__(self, clip: float) -> None:
        self.clip = float(clip)

    def __call__(self, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> np.ndarray:
        return np.clip(rewards, -self.clip, self.clip)


class NormalizeRewards:
    """Scale rewards by the running std of the discounted return (SB3 VecNormalize's
    norm_reward, gymnasium's NormalizeReward), then clip to +-clip.

    Per sub-env it keeps the discounted return R <- gamma * R + r (reset to 0 when the episode
    ends); the std is over all R seen. Like MeanStdFilter, each runner updates its copy of the
    global stats of the last sync and hands what it saw since (the delta) to the driver, which
    merges the deltas of all runners (`merge_filter_states`) and checkpoints the result.
    Autoreset rows (`valid` False) are no transitions: they neither update R nor the stats.
    """

    name = "reward_filter"

    def __init__(self, num_envs: int, gamma: float, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.gamma = gamma
        self.clip = clip
        self.eps = eps
        self.update_stats = True
        self._returns = np.zeros(num_envs, np.float64)  # [N] discounted return so far
        self.set_state(RunningStats.empty(()).to_dict())

    def __call__(self, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> np.ndarray:
        returns = self._returns
        all_valid = bool(valid.all())
        if self.update_stats and (all_valid or valid.any()):
            if all_valid:  # the common step: no autoreset row
                returns *= self.gamma
                returns += rewards
                self._moments.update(returns)
            else:
                returns[valid] = returns[valid] * self.gamma + rewards[valid]
                self._moments.update(returns[valid])
        scaled = rewards / np.sqrt(float(self._moments.var) + self.eps)
        if done.any():
            returns[done & valid] = 0.0
        np.maximum(scaled, -self.clip, out=scaled)
        np.minimum(scaled, self.clip, out=scaled)
        return scaled.astype(np.float32)

    def get_state(self) -> dict[str, Any]:
        return self._moments.stats().to_dict()

    def set_state(self, state: dict[str, Any]) -> None:
        self._synced = RunningStats.from_dict(state)
        self._moments = RunningMoments(self._synced)

    def pop_delta(self) -> dict[str, Any]:
        current = self._moments.stats()
        delta, self._synced = current.minus(self._synced), current
        return delta.to_dict()
