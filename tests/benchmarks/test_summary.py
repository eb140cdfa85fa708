"""Medians over seeds, ratios to Rollout, the printed table and the 3x verdict."""

from __future__ import annotations

import math

from benchmarks.summary import RunResult, spread, summarize, table, target_verdict


def _run(name: str, seed: int, t: float | None, steps: int = 50_000) -> RunResult:
    return RunResult(
        name,
        seed,
        reached=t is not None,
        time_to_target_s=t,
        env_steps=steps if t is not None else None,
        env_steps_per_s=10_000.0 if t is not None else None,
        first_report_s=2.0,
        peak_rss_bytes=300_000_000,
        peak_processes=1,
    )


def test_spread_counts_unreached_runs_as_infinitely_slow() -> None:
    s = spread([10.0, None, 30.0])
    assert s is not None and s.median == 30.0 and (s.low, s.high) == (10.0, 30.0)
    s = spread([None, None, 5.0])
    assert s is not None and math.isinf(s.median) and s.text() == "not reached"
    assert spread([]) is None
    assert spread([4.0, 2.0, 3.0]).text() == "3.0 (2.0-4.0)"


def test_summary_ratios_and_verdict() -> None:
    results = [
        _run("rollout", 0, 4.0),
        _run("rollout", 1, 5.0),
        _run("rollout", 2, 6.0),
        _run("sb3", 0, 15.0),
        _run("sb3", 1, 16.0),
        _run("sb3", 2, None),
        _run("rllib", 0, 60.0),
        _run("rllib", 1, 70.0),
        _run("rllib", 2, 80.0),
    ]
    summary = summarize(results, ["rollout", "sb3", "rllib"])
    assert summary["rollout"]["time_ratio_to_rollout"] == 1.0
    assert summary["sb3"]["time_ratio_to_rollout"] == 16.0 / 5.0
    assert summary["sb3"]["reached"] == 2 and summary["sb3"]["runs"] == 3
    assert summary["rllib"]["time_ratio_to_rollout"] == 14.0
    verdict = target_verdict(summary)
    assert verdict is not None and "sb3" in verdict and "3.20x" in verdict and "MET" in verdict

    text = table(summary, 475.0, {"rollout": "Rollout"})
    lines = text.splitlines()
    assert len(lines) == 2 + 3
    assert lines[2].startswith("| Rollout | 5.0 (4.0-6.0) | 50k | 10000 | 0.30 (1) |")
    assert "2/3" in lines[3] and "3.20x" in lines[3]


def test_verdict_missed_and_absent() -> None:
    summary = summarize([_run("rollout", 0, 10.0), _run("sb3", 0, 20.0)], ["rollout", "sb3"])
    verdict = target_verdict(summary)
    assert verdict is not None and "2.00x" in verdict and "MISSED" in verdict
    assert target_verdict(summarize([_run("sb3", 0, 20.0)], ["sb3"])) is None
