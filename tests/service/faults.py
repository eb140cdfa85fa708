"""Helpers of the fault tests: exact metric accounting and processes that must not survive."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import httpx

from app.jobs import head_state
from app.jobs.ray_head import alive, descendants, kill_if_alive


def jsonl_points(path: Path) -> dict[str, dict[int, float]]:
    """Every point a job produced, from its local JSONL copy (series -> step -> value)."""
    series: dict[str, dict[int, float]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        values = {"time_s": row["time_s"], **row["values"]}  # as ingest does (setdefault)
        for name, value in values.items():
            series.setdefault(name, {})[row["step"]] = value
    return series


def jsonl_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_stored_exactly(http: httpx.Client, exp_id: int, jsonl: Path) -> int:
    """The API holds exactly the points in the job's JSONL copy: every one, once, with its
    value; returns how many iterations (rows) the job produced."""
    rows = jsonl_rows(jsonl)
    steps = [r["step"] for r in rows]
    assert len(steps) == len(set(steps)), f"the job wrote a step twice: {steps}"
    produced = jsonl_points(jsonl)
    response = http.get(f"/experiments/{exp_id}/metrics")
    response.raise_for_status()
    stored = response.json()["series"]
    assert set(stored) == set(produced)
    for name, points in produced.items():
        assert stored[name]["step"] == sorted(points), name  # none missing, none twice
        assert stored[name]["value"] == [points[s] for s in sorted(points)], name
    return len(rows)


class ProcessReaper:
    """Remembers processes a test caused (pid -> start time) and kills the survivors at the
    end, by pid, whatever happened in between."""

    def __init__(self) -> None:
        self.processes: dict[int, int] = {}
        self.data_dirs: list[Path] = []

    def track_tree(self, root: int) -> dict[int, int]:
        """Everything below `root` right now (call it before `root` goes away)."""
        tree = descendants(root)
        self.processes.update(tree)
        return tree

    def track_heads_of(self, data_dir: Path) -> None:
        """At the end, also whatever local Ray head the data dir records."""
        self.data_dirs.append(data_dir)

    def survivors(self) -> list[int]:
        return alive(self.processes)

    def reap(self) -> None:
        for data_dir in self.data_dirs:
            record = head_state.load(data_dir)
            if record is not None and head_state.is_that_head(record):
                with contextlib.suppress(OSError):
                    self.processes.update({record.pid: record.started, **descendants(record.pid)})
        kill_if_alive(self.processes)
