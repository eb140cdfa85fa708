"""The crossing rule, the file tail and the Rollout phase split used by time_to_target."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchmarks.progress import (
    WINDOW,
    EpisodeProgress,
    LineTail,
    Point,
    RolloutProgress,
    crossed,
    rollout_phases,
)


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def test_line_tail_returns_only_complete_new_lines(tmp_path: Path) -> None:
    tail = LineTail(tmp_path / "log.jsonl")
    assert tail.lines() == []  # file not there yet
    _append(tail.path, '{"a": 1}\n{"b"')
    assert tail.lines() == ['{"a": 1}']
    _append(tail.path, ': 2}\n\n{"c": 3}\n')
    assert tail.lines() == ['{"b": 2}', '{"c": 3}']
    assert tail.lines() == []


def _episodes(path: Path, returns: list[float], start_step: int = 0) -> None:
    lines = [
        json.dumps({"t": 0.1 * i, "steps": start_step + 500 * (i + 1), "ret": r})
        for i, r in enumerate(returns)
    ]
    _append(path, "".join(line + "\n" for line in lines))


def test_episode_progress_needs_a_full_window_at_the_target(tmp_path: Path) -> None:
    progress = EpisodeProgress(tmp_path / "episodes.jsonl")
    _episodes(progress.tail.path, [500.0] * (WINDOW - 1))
    points = list(progress.poll(now=1.0))
    assert len(points) == WINDOW - 1
    assert not any(crossed(p, 475.0) for p in points)  # 99 perfect episodes are not enough

    _episodes(progress.tail.path, [500.0])
    (last,) = progress.poll(now=2.0)
    assert last.episodes == WINDOW and last.return_mean == 500.0
    assert crossed(last, 475.0)
    assert last.t == 2.0  # the harness clock, not the process's own stamp
    assert last.reported_t == pytest.approx(0.0)


def test_episode_progress_window_drops_old_episodes(tmp_path: Path) -> None:
    progress = EpisodeProgress(tmp_path / "episodes.jsonl")
    _episodes(progress.tail.path, [10.0] * 50 + [500.0] * WINDOW)
    points = list(progress.poll(now=1.0))
    first = next(i for i, p in enumerate(points) if crossed(p, 475.0))
    # Crossing needs >= 95 of the 100 returns at 500 when the others are 10:
    # mean = (500 k + 10 (100 - k)) / 100 >= 475  <=>  k >= 95 (the first 50 were 10s).
    assert points[first].episodes == 50 + 95
    assert points[first].env_steps == 500 * (50 + 95)


def test_rollout_progress_reads_metrics_lines(tmp_path: Path) -> None:
    progress = RolloutProgress(tmp_path / "metrics.jsonl")
    rows = [
        {"env_steps": 512, "episodes": 20, "episode_return_mean": None, "time_s": 3.0},
        {"env_steps": 1024, "episodes": 120, "episode_return_mean": 480.0, "time_s": 3.5},
    ]
    _append(progress.tail.path, "".join(json.dumps(r) + "\n" for r in rows))
    first, second = progress.poll(now=4.0)
    assert math.isnan(first.return_mean) and not crossed(first, 475.0)
    assert crossed(second, 475.0) and second.env_steps == 1024 and second.reported_t == 3.5
    assert len(progress.iterations) == 2


def test_crossing_needs_both_window_and_mean() -> None:
    assert not crossed(Point(1.0, 10, 500.0, WINDOW - 1, 1.0), 475.0)
    assert not crossed(Point(1.0, 10, 474.9, WINDOW, 1.0), 475.0)
    assert crossed(Point(1.0, 10, 475.0, WINDOW, 1.0), 475.0)


def test_rollout_phases_split_the_time_to_target() -> None:
    iterations = [
        {"time_s": 5.0, "time_iteration_s": 1.0, "time_sample_s": 0.3, "time_gae_s": 0.1,
         "time_sgd_s": 0.5, "time_weight_sync_s": 0.05},
        {"time_s": 6.2, "time_iteration_s": 1.0, "time_sample_s": 0.3, "time_gae_s": 0.1,
         "time_sgd_s": 0.5, "time_weight_sync_s": 0.05},
    ]  # fmt: skip
    phases = rollout_phases(iterations, until_s=6.5)
    assert phases["startup_s"] == pytest.approx(4.0)
    assert phases["time_sgd_s"] == pytest.approx(1.0)
    assert phases["time_sample_s"] == pytest.approx(0.6)
    assert phases["other_iteration_s"] == pytest.approx(2.0 - 1.9)
    assert phases["unaccounted_s"] == pytest.approx(6.5 - 4.0 - 2.0)
    assert rollout_phases([], until_s=1.0) == {}
