"""module-to-env pieces: what the env receives, derived from what the module sampled."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


class ClipActions:
    """Clip Box actions to the space bounds. The chunk keeps the unclipped sample, whose
    log-prob the PPO ratio needs (RLlib NormalizeAndClipActions, SB3 `clip_actions`)."""

    name = "clip_actions"

    def __init__(self, space: gym.spaces.Box) -> None:
        self.low = space.low.astype(np.float32)
        self.high = space.high.astype(np.float32)

    def __call__(self, actions: np.ndarray) -> np.ndarray:
        return np.clip(actions, self.low, self.high)


class DiscreteActions:
    """Discrete actions go to the env as int64 values: the module's index 0..n-1 plus the
    space's `start` offset (gymnasium Discrete(n, start=s))."""

    name = "discrete_actions"

    def __init__(self, space: gym.spaces.Discrete) -> None:
        self.start = int(space.start)

    def __call__(self, actions: np.ndarray) -> np.ndarray:
        out = actions.astype(np.int64, copy=False)
        return out + self.start if self.start else out
