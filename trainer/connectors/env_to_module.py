"""env-to-module pieces: observation batching, running mean/std filter, frame stacking."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from trainer.connectors.running_stats import RunningMoments, RunningStats
from trainer.obs_layout import channel_axis, like


class BatchObservations:
    """Make the vector env's observations one contiguous [N, *obs_shape] array of the space's
    dtype (float32 for vectors, uint8 images stay uint8 so transfers stay small)."""

    name = "batch"

    def __init__(self, space: gym.spaces.Box) -> None:
        self.dtype = np.float32 if np.issubdtype(space.dtype, np.floating) else space.dtype
        self.shape = space.shape

    def output_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        return like(space, space.low, space.high, space.shape, self.dtype)

    def __call__(self, obs: np.ndarray, reset_mask: np.ndarray) -> np.ndarray:
        obs = np.ascontiguousarray(obs, dtype=self.dtype)
        if obs.shape[1:] != self.shape:
            raise ValueError(f"observations {obs.shape} do not match [N, *{self.shape}]")
        return obs


class MeanStdFilter:
    """Normalise observations by a running mean / std and clip to +-clip (SB3 VecNormalize,
    RLlib MeanStdFilter). Chunks store the normalised values, so the Learner needs no filter.

    Several EnvRunners each see part of the data: every runner keeps the global stats it got at
    the last sync (`set_state`) and updates its own copy; what it saw since (the delta, its
    stats minus the synced ones) goes to the driver, which folds all deltas into the global stats
    once per iteration and sends them back (`merge_filter_states`).
    """

    name = "obs_filter"

    def __init__(self, shape: tuple[int, ...], clip: float = 10.0, eps: float = 1e-8) -> None:
        self.clip = clip
        self.eps = eps
        self.update_stats = True
        self._shape = shape
        self.set_state(RunningStats.empty(shape).to_dict())

    def output_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        return like(space, -self.clip, self.clip, space.shape, np.float32)

    def __call__(self, obs: np.ndarray, reset_mask: np.ndarray) -> np.ndarray:
        if self.update_stats:
            self._moments.update(obs)
            self._refresh()
        out = obs - self._mean  # float64: the stats' precision, one cast at the end
        out /= self._std
        np.maximum(out, -self.clip, out=out)  # np.clip's Python wrapper costs more than both
        np.minimum(out, self.clip, out=out)
        return out.astype(np.float32)

    def _refresh(self) -> None:
        self._mean = self._moments.mean
        self._std = np.sqrt(self._moments.var + self.eps)

    def get_state(self) -> dict[str, Any]:
        return self._moments.stats().to_dict()

    def set_state(self, state: dict[str, Any]) -> None:
        self._synced = RunningStats.from_dict(state)
        self._moments = RunningMoments(self._synced)
        self._refresh()

    def pop_delta(self) -> dict[str, Any]:
        current = self._moments.stats()
        delta, self._synced = current.minus(self._synced), current
        return delta.to_dict()


class FrameStack:
    """Concatenate the last k observations along the channel axis: [D] -> [k*D],
    [H, W, C] -> [H, W, k*C] (channels last), [C, H, W] -> [k*C, H, W] (channels first), oldest
    frame first. The axis comes from the space's declared layout (trainer/obs_layout.py).

    Frames before an episode's start are zeros (as RLlib's frame stacking). `reset_mask` tells
    which slots start a new episode with this observation, so no frame leaks across episodes.
    """

    name = "frame_stack"

    def __init__(self, num_frames: int, num_envs: int, space: gym.spaces.Box) -> None:
        self.k = num_frames
        self.shape = space.shape
        self.first = channel_axis(space) == 0
        self._frames = np.zeros((num_envs, num_frames, *space.shape), np.float32)  # [N, k, *obs]

    def output_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        axis = channel_axis(space)
        low = np.concatenate([np.minimum(space.low, 0)] * self.k, axis=axis)
        high = np.concatenate([np.maximum(space.high, 0)] * self.k, axis=axis)
        return like(space, low, high, low.shape, space.dtype)

    def __call__(self, obs: np.ndarray, reset_mask: np.ndarray) -> np.ndarray:
        if self._frames.dtype != obs.dtype:
            self._frames = self._frames.astype(obs.dtype)
        frames = self._frames
        frames[reset_mask] = 0
        frames[:, :-1] = frames[:, 1:]
        frames[:, -1] = obs
        n = len(obs)
        if self.first:  # [N, k, C, H, W] -> [N, k*C, H, W]
            return frames.reshape(n, self.k * obs.shape[1], *obs.shape[2:]).copy()
        # [N, k, *obs] -> [N, ..., k, C] -> [N, ..., k*C]
        stacked = np.moveaxis(frames, 1, -2)
        return stacked.reshape(n, *obs.shape[1:-1], self.k * obs.shape[-1])


def merge_filter_states(state: dict[str, Any], deltas: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold the runners' filter deltas into the global connector state (driver side)."""
    merged = dict(state)
    for name in {name for d in deltas for name in d}:
        stats = RunningStats.from_dict(state[name]) if name in state else None
        for d in deltas:
            if name in d:
                delta = RunningStats.from_dict(d[name])
                stats = delta if stats is None else stats.merge(delta)
        assert stats is not None
        merged[name] = stats.to_dict()
    return merged
