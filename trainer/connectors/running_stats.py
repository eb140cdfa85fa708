"""Running mean / variance with an exact merge (Chan et al. 1979, parallel variance).

Kept apart from the connector so the merge rule used across EnvRunners is a pure function
that tests can check against numpy on the concatenated data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RunningStats:
    count: float
    mean: np.ndarray  # [*obs_shape] float64
    m2: np.ndarray  # [*obs_shape] float64, sum of squared deviations from the mean

    @staticmethod
    def empty(shape: tuple[int, ...]) -> RunningStats:
        return RunningStats(0.0, np.zeros(shape, np.float64), np.zeros(shape, np.float64))

    @staticmethod
    def of(batch: np.ndarray) -> RunningStats:
        """Stats of a batch [B, *obs_shape]."""
        x = np.asarray(batch, dtype=np.float64)
        mean = x.mean(axis=0)
        return RunningStats(float(len(x)), mean, ((x - mean) ** 2).sum(axis=0))

    def merge(self, other: RunningStats) -> RunningStats:
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / n)
        return RunningStats(n, mean, m2)

    @property
    def var(self) -> np.ndarray:
        return self.m2 / max(self.count, 1.0)

    def to_dict(self) -> dict[str, object]:
        return {"count": self.count, "mean": self.mean.tolist(), "m2": self.m2.tolist()}

    @staticmethod
    def from_dict(d: dict[str, object]) -> RunningStats:
        return RunningStats(
            float(d["count"]),  # type: ignore[arg-type]
            np.asarray(d["mean"], np.float64),
            np.asarray(d["m2"], np.float64),
        )
