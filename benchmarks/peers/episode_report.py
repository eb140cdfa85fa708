"""Per-episode progress reports that every benchmarked trainer writes the same way.

Each peer script runs in its own virtual environment and cannot import the project, so this
module is plain standard library. A report line is JSON: seconds since the harness started the
process (``BENCH_T0``, an epoch time set just before ``Popen``), env steps sampled so far, and the
finished episode's return. The harness computes the time-to-target from these lines itself; the
rolling window here only lets a peer stop on its own once it has crossed.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time

WINDOW = 100  # episodes in the rolling mean, as in SB3's ep_info_buffer and Rollout's metrics


class EpisodeReport:
    """Appends one line per finished episode and tracks the last-100-episodes mean."""

    def __init__(self, target: float | None) -> None:
        self.target = target
        self.t0 = float(os.environ.get("BENCH_T0", time.time()))
        path = os.environ.get("BENCH_REPORT")
        self._out = open(path, "a", buffering=1) if path else sys.stdout  # noqa: SIM115
        self._window: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self.crossed = False

    def episode(self, env_steps: int, episode_return: float) -> bool:
        """Record one finished episode; True once the full window's mean reaches the target."""
        record = {"t": time.time() - self.t0, "steps": int(env_steps), "ret": float(episode_return)}
        self._out.write(json.dumps(record) + "\n")
        self._window.append(float(episode_return))
        if (
            self.target is not None
            and len(self._window) == WINDOW
            and sum(self._window) / WINDOW >= self.target
        ):
            self.crossed = True
        return self.crossed
