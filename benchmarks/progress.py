"""Reading a run's progress and finding the moment it reaches the target.

Every contender's progress becomes a stream of ``Point``s: the harness's own clock when the
line was seen (seconds since just before ``Popen``), env steps, the mean return of the last
100 finished episodes, and how many episodes have finished. Peers report single episodes and
the window is computed here; Rollout's metrics.jsonl already holds the same window per
iteration. The crossing rule is the same for all: the first point with at least 100 finished
episodes whose window mean is >= the target.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

WINDOW = 100


@dataclass(frozen=True)
class Point:
    t: float  # harness clock: seconds since just before Popen
    env_steps: int
    return_mean: float  # mean return of the last <= WINDOW finished episodes
    episodes: int  # finished episodes so far
    reported_t: float  # the process's own time stamp, for cross-checking the harness clock


def crossed(point: Point, target: float) -> bool:
    return point.episodes >= WINDOW and point.return_mean >= target


class LineTail:
    """Complete lines appended to a file since the last call (the file may not exist yet)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""

    def lines(self) -> list[str]:
        try:
            with self.path.open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        *complete, self._partial = (self._partial + data).split(b"\n")
        return [line.decode() for line in complete if line.strip()]


class EpisodeProgress:
    """Peers: one JSON line per finished episode ({"t", "steps", "ret"}); window kept here."""

    def __init__(self, path: Path) -> None:
        self.tail = LineTail(path)
        self.window: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self.episodes = 0

    def poll(self, now: float) -> Iterator[Point]:
        for line in self.tail.lines():
            record = json.loads(line)
            self.window.append(float(record["ret"]))
            self.episodes += 1
            yield Point(
                t=now,
                env_steps=int(record["steps"]),
                return_mean=sum(self.window) / len(self.window),
                episodes=self.episodes,
                reported_t=float(record["t"]),
            )


class RolloutProgress:
    """Rollout: DIR/metrics.jsonl, one line per iteration; iterations are kept for phase times."""

    def __init__(self, path: Path) -> None:
        self.tail = LineTail(path)
        self.iterations: list[dict[str, Any]] = []

    def poll(self, now: float) -> Iterator[Point]:
        for line in self.tail.lines():
            metrics = json.loads(line)
            self.iterations.append(metrics)
            mean = metrics.get("episode_return_mean")
            yield Point(
                t=now,
                env_steps=int(metrics["env_steps"]),
                return_mean=float("nan") if mean is None else float(mean),
                episodes=int(metrics.get("episodes") or 0),
                reported_t=float(metrics["time_s"]),
            )


PHASES = ("time_sample_s", "time_gae_s", "time_sgd_s", "time_weight_sync_s")


def rollout_phases(iterations: list[dict[str, Any]], until_s: float) -> dict[str, float]:
    """Where a Rollout run's time went up to its crossing: startup, each phase, the rest.

    startup = process start until the first iteration began (imports, env and module
    construction); the phases are summed over iterations; ``other`` is iteration time outside
    the named phases; ``unaccounted`` is what is left of ``until_s`` (reporting, checkpoints,
    the gap between the last iteration and the harness seeing it).
    """
    if not iterations:
        return {}
    first = iterations[0]
    startup = float(first["time_s"]) - float(first.get("time_iteration_s") or 0.0)
    sums = {p: sum(float(it.get(p) or 0.0) for it in iterations) for p in PHASES}
    iteration_total = sum(float(it.get("time_iteration_s") or 0.0) for it in iterations)
    phases = {"startup_s": startup, **sums}
    phases["other_iteration_s"] = iteration_total - sum(sums.values())
    phases["unaccounted_s"] = until_s - startup - iteration_total
    return phases
