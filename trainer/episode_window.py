"""The 100-episode return window: the returns and lengths of the last finished episodes.

The window is explicit: the last 100 FINISHED episodes, whatever iteration they finished in
(RLlib 2.60's `episode_return_mean` averages only the current iteration's episodes and crosses
a threshold about twice as early). Episodes that span several sample() calls are reported once,
by the EnvRunner, with their full return. The reported mean covers whatever has finished so
far; the return stop criterion waits for a full window (`full`), as docs/benchmarks.md measures.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

EPISODE_WINDOW = 100


class EpisodeWindow:
    """Returns and lengths of the last `size` finished episodes, plus lifetime counts."""

    def __init__(self, size: int = EPISODE_WINDOW) -> None:
        self.size = size
        self.returns: deque[float] = deque(maxlen=size)
        self.lengths: deque[int] = deque(maxlen=size)
        self.episodes = 0  # lifetime

    def add(self, returns: list[float], lengths: list[int]) -> None:
        self.returns.extend(returns)
        self.lengths.extend(lengths)
        self.episodes += len(returns)

    @property
    def full(self) -> bool:
        """`size` episodes have finished: the mean is a last-`size` mean."""
        return len(self.returns) == self.size

    @property
    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def as_dict(self) -> dict[str, float]:
        if not self.returns:
            nan = float("nan")
            return {
                "episode_return_mean": nan,
                "episode_return_min": nan,
                "episode_return_max": nan,
                "episode_len_mean": nan,
            }
        r = np.asarray(self.returns)
        return {
            "episode_return_mean": float(r.mean()),
            "episode_return_min": float(r.min()),
            "episode_return_max": float(r.max()),
            "episode_len_mean": float(np.mean(self.lengths)),
        }

    def get_state(self) -> dict[str, Any]:
        return {
            "returns": list(self.returns),
            "lengths": list(self.lengths),
            "episodes": self.episodes,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.returns.clear()
        self.lengths.clear()
        self.returns.extend(state["returns"])
        self.lengths.extend(state["lengths"])
        self.episodes = int(state["episodes"])
