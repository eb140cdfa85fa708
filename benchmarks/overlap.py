"""CartPole-v1 time-to-475 with `overlap_sampling` off and on, on time_to_target.py's harness.

Both variants are Rollout's default config in serial mode; "on" adds
`--set overlap_sampling=true`. Runs are interleaved (seed 0: off, on; seed 1: ...), each a fresh
process timed from just before ``Popen`` to the progress line where the mean of the last 100
finished episodes first reaches the target (at least 100 finished). Record the numbers on a
quiet machine: on a loaded one the interleaving keeps the ratio fair, not the times.

    .venv/bin/python benchmarks/overlap.py [--seeds 0,1,2] [--timeout 300] [--target 475]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.contenders import BENCH_DIR, CONTENDERS, ENV_ID, Contender
from benchmarks.summary import RunResult, summarize, table
from benchmarks.time_to_target import _median_phases, _phase_text, _run_line, run_once

OFF, ON = "rollout", "rollout-overlap"


def variants(rollout: Contender) -> dict[str, Contender]:
    """The two programs compared: Rollout as benchmarked, and with overlapped sampling."""
    return {
        OFF: replace(rollout, describe="Rollout, default PPOConfig (overlap_sampling off)"),
        ON: replace(
            rollout,
            name=ON,
            describe="Rollout, default PPOConfig + overlap_sampling",
            extra_args=(*rollout.extra_args, "--set", "overlap_sampling=true"),
        ),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma list of seeds")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--target", type=float, default=475.0)
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=BENCH_DIR / "results",
        help="per-run logs go to RESULTS_DIR/overlap-<UTC time>/",
    )
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    programs = variants(CONTENDERS["rollout"])
    if not programs[OFF].executable.exists():
        print(f"missing {programs[OFF].executable}: run `make venv`", file=sys.stderr)
        return 2
    started = datetime.now(UTC)
    out_dir = args.results_dir / f"overlap-{started.strftime('%Y%m%dT%H%M%SZ')}"
    results: list[RunResult] = []
    for seed in args.seeds:
        for name, program in programs.items():
            run_dir = out_dir / f"{name}-s{seed}"
            result = run_once(program, ENV_ID, seed, args.target, args.timeout, run_dir)
            results.append(result)
            print(_run_line(result), flush=True)
            (run_dir / "result.json").write_text(json.dumps(result.as_dict(), indent=2))
    summary = summarize(results, list(programs))
    print()
    print(table(summary, args.target, {n: p.describe for n, p in programs.items()}))
    phases = {}
    for name in programs:
        # _median_phases reads the "rollout" contender's runs: relabel to reuse it.
        runs = [replace(r, contender="rollout") for r in results if r.contender == name]
        phases[name] = _median_phases(runs)
        if phases[name]:
            print(f"{name} time split (median over reached runs, s): {_phase_text(phases[name])}")
    loads = [r.load_1m for r in results if r.load_1m is not None]
    print(f"machine load (1-min average at each run's end): {min(loads):.1f}-{max(loads):.1f}")
    print(f"\nlogs: {out_dir}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        report = {
            "started_utc": started.isoformat(),
            "command": " ".join(sys.argv),
            "cpus": os.cpu_count(),
            "target": args.target,
            "runs": [r.as_dict() for r in results],
            "summary": {n: _plain(row) for n, row in summary.items()},
            "phases_median": phases,
        }
        args.json.write_text(json.dumps(report, indent=2))
    return 0


def _plain(row: dict) -> dict:
    return {k: (v.__dict__ if hasattr(v, "median") else v) for k, v in row.items()}


if __name__ == "__main__":
    raise SystemExit(main())
