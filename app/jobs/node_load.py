"""How many of this machine's cores sat idle lately, read from /proc/stat.

Scheduled evaluations (a run's `evaluation_every`) launch only while at least
`MIN_IDLE_CORES` (the setting `scheduled_evaluation_min_idle_cores`) were idle over the last
`WINDOW_S`: on a machine that training keeps busy they wait (at the latest until the run
ends) instead of slowing it.
Niceness alone is not enough: starting a Ray job also wakes Ray's own processes (the job
supervisor, the dashboard) at normal priority; measured on CartPole with 2 cores, niced
evaluations alone slowed the run by ~19 % (docs/benchmarks.md). The API runs on the Ray head,
where those jobs' drivers run, so this machine's cores are the ones that count.
"""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path

MIN_IDLE_CORES = 1.0
# Idle time is averaged over this long: a moment of idleness (a checkpoint upload, the run's
# start-up) is not a core training leaves free.
WINDOW_S = 3.0
# The figure needs at least this much history.
MIN_INTERVAL_S = 0.5
# A sample this recent is current enough: the reconciler records one each tick, and its
# check in the same tick does not read /proc/stat again.
FRESH_S = 0.2


def _ticks() -> tuple[int, int] | None:
    """(idle, total) clock ticks over every core since boot; None off Linux."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return idle, sum(values)


class IdleCores:
    """`sample()`: idle cores averaged over the last `WINDOW_S` (None: not known yet, or off
    Linux); `min_idle` 0 lets background work start whatever the load."""

    def __init__(self, min_idle: float = MIN_IDLE_CORES, cores: int | None = None) -> None:
        self.min_idle = min_idle
        self.cores = cores or os.cpu_count() or 1
        first = _ticks()
        self.known = first is not None
        self._history: deque[tuple[float, int, int]] = deque()
        if first is not None:
            self._history.append((time.monotonic(), *first))

    def record(self) -> None:
        """Add a sample (the reconciler calls this every tick, to keep the window current);
        none when the newest is under `FRESH_S` old."""
        now = time.monotonic()
        if self._history and now - self._history[-1][0] < FRESH_S:
            return
        ticks = _ticks()
        if ticks is None:
            return
        self._history.append((now, *ticks))
        # The window starts at the newest sample at least WINDOW_S old; a history with a gap
        # (no tick for a while) says nothing of the last seconds: start it again.
        while len(self._history) > 2 and now - self._history[1][0] >= WINDOW_S:
            self._history.popleft()
        if now - self._history[0][0] > 2 * WINDOW_S:
            self._history = deque([self._history[-1]])

    def sample(self) -> float | None:
        """Record a sample (unless one is fresh) and return the idle cores over the window
        (None: too short yet)."""
        self.record()
        if len(self._history) < 2:
            return None
        (at0, idle0, total0), (at1, idle1, total1) = self._history[0], self._history[-1]
        if at1 - at0 < MIN_INTERVAL_S or total1 <= total0:
            return None
        return self.cores * (idle1 - idle0) / (total1 - total0)

    def allows_background_work(self) -> bool:
        """True when a low-priority job would take only idle CPU (or nothing is known)."""
        if self.min_idle <= 0:
            return True
        idle = self.sample()
        if idle is None:
            return not self.known  # no /proc/stat: nothing to go by; else too soon to say
        return idle >= self.min_idle
