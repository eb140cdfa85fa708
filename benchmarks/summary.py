"""Medians, ranges and ratios over seeds, and the printed table."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunResult:
    """One contender x seed. Times are seconds on the harness clock (since just before Popen)."""

    contender: str
    seed: int
    reached: bool
    time_to_target_s: float | None = None
    env_steps: int | None = None
    env_steps_per_s: float | None = None  # between the first progress line and the crossing
    first_report_s: float | None = None  # startup until the first episode / iteration was seen
    reported_time_s: float | None = None  # the process's own stamp at the crossing
    wall_s: float = 0.0
    peak_rss_bytes: int = 0
    peak_processes: int = 0
    exit_code: int | None = None
    load_1m: float | None = None  # machine load average at the run's end (this run included)
    phases: dict[str, float] = field(default_factory=dict)
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    def text(self, fmt: str = "{:.1f}", scale: float = 1.0) -> str:
        if math.isinf(self.median):
            return "not reached"
        median = fmt.format(self.median * scale)
        low, high = fmt.format(self.low * scale), fmt.format(self.high * scale)
        return median if low == high else f"{median} ({low}-{high})"


def spread(values: Sequence[float | None]) -> Spread | None:
    """Median over all runs, counting a run that never reached the target as infinitely slow;
    the range covers the runs that reached it."""
    if not values:
        return None
    as_float = [math.inf if v is None else float(v) for v in values]
    finite = [v for v in as_float if math.isfinite(v)]
    if not finite:
        return Spread(math.inf, math.inf, math.inf)
    return Spread(statistics.median(as_float), min(finite), max(finite))


def summarize(results: Sequence[RunResult], order: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per contender: runs, reached count, spreads of every measure, ratio of time medians."""
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        runs = [r for r in results if r.contender == name]
        if not runs:
            continue
        reached = [r for r in runs if r.reached]
        out[name] = {
            "runs": len(runs),
            "reached": len(reached),
            "time_to_target_s": spread([r.time_to_target_s for r in runs]),
            "env_steps": spread([r.env_steps for r in reached]),
            "env_steps_per_s": spread([r.env_steps_per_s for r in reached]),
            "first_report_s": spread([r.first_report_s for r in runs if r.first_report_s]),
            "peak_rss_bytes": spread([r.peak_rss_bytes for r in runs]),
            "peak_processes": max(r.peak_processes for r in runs),
        }
    base = out.get("rollout", {}).get("time_to_target_s")
    for row in out.values():
        mine = row["time_to_target_s"]
        row["time_ratio_to_rollout"] = (
            mine.median / base.median
            if base and math.isfinite(base.median) and math.isfinite(mine.median)
            else None
        )
    return out


def table(summary: dict[str, dict[str, Any]], target: float, describe: dict[str, str]) -> str:
    """A markdown table of medians (min-max) and each contender's time ratio to Rollout."""
    head = (
        f"| contender | time-to-{target:g} s | env steps at {target:g} | env-steps/s "
        "| peak RSS GB (processes) | first result s | reached | time / Rollout's |"
    )
    lines = [head, "|" + "---|" * 8]
    for name, row in summary.items():
        ratio = row["time_ratio_to_rollout"]
        steps = row["env_steps"]
        rate = row["env_steps_per_s"]
        first = row["first_report_s"]
        lines.append(
            f"| {describe.get(name, name)} | {row['time_to_target_s'].text()} "
            f"| {steps.text('{:.0f}k', 1e-3) if steps else '-'} "
            f"| {rate.text('{:.0f}') if rate else '-'} "
            f"| {row['peak_rss_bytes'].text('{:.2f}', 1e-9)} ({row['peak_processes']}) "
            f"| {first.text() if first else '-'} | {row['reached']}/{row['runs']} "
            f"| {'-' if ratio is None else f'{ratio:.2f}x'} |"
        )
    return "\n".join(lines)


def target_verdict(summary: dict[str, dict[str, Any]], factor: float = 3.0) -> str | None:
    """Rollout's goal: its median time at most 1/factor of the fastest peer's median."""
    rollout = summary.get("rollout")
    peers = {n: r for n, r in summary.items() if n != "rollout"}
    if rollout is None or not peers:
        return None
    fastest = min(peers, key=lambda n: peers[n]["time_to_target_s"].median)
    best = peers[fastest]["time_to_target_s"].median
    mine = rollout["time_to_target_s"].median
    speedup = best / mine if math.isfinite(mine) and mine > 0 else 0.0
    verdict = "MET" if speedup >= factor else "MISSED"
    return (
        f"fastest peer: {fastest} (median {best:.1f} s); Rollout median {mine:.1f} s = "
        f"{speedup:.2f}x faster; goal >= {factor:g}x: {verdict}"
    )
