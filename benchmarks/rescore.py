"""Time-to-target at another threshold, from the logs of a finished time_to_target.py run.

Where gymnasium's reward_threshold is out of reach of the 100-episode *training* mean within the
budget (LunarLander-v3, HalfCheetah-v5 with rl-zoo's entries: the stochastic policy scores below
the deterministic one), the runs go to their budget and the harness reports "not reached". Their
logs still hold every point; this reads them again and times each run to a lower threshold: by
default the highest one that every peer seed reaches, rounded down to two significant digits.

Times are on the harness clock, from just before the process started: a peer's episode lines
are stamped from BENCH_T0 (set just before Popen); Rollout's iterations carry the trainer's own
clock, moved onto the harness clock by the offset at the first iteration the harness saw.

    .venv/bin/python -m benchmarks.rescore benchmarks/results/<UTC time> [--target 4000]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.contenders import CONTENDERS
from benchmarks.progress import Point, crossed
from benchmarks.summary import RunResult, summarize, table, target_verdict
from benchmarks.time_to_target import plain_summary, record_crossing

_RUN_DIR = re.compile(r"^(?P<name>[a-z0-9]+)-s(?P<seed>\d+)$")


def points_of(name: str, run_dir: Path, recorded: dict) -> list[Point]:
    """Every progress point of one finished run, on the harness clock (`recorded`: its
    result.json)."""
    points = list(CONTENDERS[name].progress(run_dir).poll(math.nan))
    if not points:
        return []
    if CONTENDERS[name].kind == "rollout":
        offset = float(recorded["first_report_s"]) - points[0].reported_t
    else:
        offset = 0.0
    return [
        Point(p.reported_t + offset, p.env_steps, p.return_mean, p.episodes, p.reported_t)
        for p in points
    ]


def best_mean(points: list[Point]) -> float:
    """The highest full-window mean a run reached (-inf before 100 episodes)."""
    return max((p.return_mean for p in points if crossed(p, -math.inf)), default=-math.inf)


def two_digits_down(x: float) -> float:
    """Round toward -inf to two significant digits: 4123 -> 4100, 143.2 -> 140, -96 -> -96."""
    if x == 0 or not math.isfinite(x):
        return x
    step = 10 ** (math.floor(math.log10(abs(x))) - 1)
    return math.floor(x / step) * step


def rescore(name: str, seed: int, points: list[Point], target: float, recorded: dict) -> RunResult:
    result = RunResult(name, seed, reached=False, wall_s=float(recorded.get("wall_s") or 0.0))
    result.peak_rss_bytes = int(recorded.get("peak_rss_bytes") or 0)
    result.peak_processes = int(recorded.get("peak_processes") or 0)
    result.load_1m = recorded.get("load_1m")
    result.first_report_s = points[0].t if points else None
    hit = next((p for p in points if crossed(p, target)), None)
    if hit is None:
        result.note = f"best 100-episode mean {best_mean(points):.1f}"
        return result
    record_crossing(result, hit, points[0])
    return result


def runs_in(log_dir: Path) -> list[tuple[str, int, Path]]:
    """(contender, seed, folder) of every finished run in a time_to_target.py log folder."""
    found = []
    for run_dir in sorted(log_dir.iterdir()):
        match = _RUN_DIR.match(run_dir.name)
        if match and match["name"] in CONTENDERS and (run_dir / "result.json").exists():
            found.append((match["name"], int(match["seed"]), run_dir))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log_dir", type=Path, help="benchmarks/results/<UTC time> of one run")
    parser.add_argument("--target", type=float, help="default: the highest every peer seed reaches")
    parser.add_argument("--json", type=Path, help="write the runs and the summary here")
    args = parser.parse_args(argv)
    if not args.log_dir.is_dir():
        parser.error(f"{args.log_dir}: not a folder")
    runs = runs_in(args.log_dir)
    if not runs:
        parser.error(f"{args.log_dir}: no finished runs (<contender>-s<seed>/result.json)")
    recorded = {(n, seed): json.loads((d / "result.json").read_text()) for n, seed, d in runs}
    points = {(n, seed): points_of(n, d, recorded[n, seed]) for n, seed, d in runs}
    for (name, seed), pts in points.items():
        print(f"{name:8s} seed {seed}: best 100-episode mean {best_mean(pts):.1f}")
    target = args.target
    if target is None:
        peers = [best_mean(p) for (name, _), p in points.items() if name != "rollout"]
        if not peers:
            parser.error("no peer runs to take a threshold from: give --target")
        target = two_digits_down(min(peers))
        print(f"threshold: {target:g}, the highest every peer seed reaches (two digits, down)")
    results = [rescore(n, seed, points[n, seed], target, recorded[n, seed]) for n, seed, _ in runs]
    for r in results:
        head = f"{r.time_to_target_s:7.1f} s  {r.env_steps:>8,} steps" if r.reached else r.note
        print(f"{r.contender:8s} seed {r.seed}: {head}")
    names = [n for n in CONTENDERS if any(r.contender == n for r in results)]
    summary = summarize(results, names)
    print()
    print(table(summary, target, {n: CONTENDERS[n].describe for n in names}))
    verdict = target_verdict(summary)
    if verdict:
        print("\n" + verdict)
    if args.json:
        report = {"log_dir": str(args.log_dir), "target": target, "verdict": verdict}
        report |= {"runs": [r.as_dict() for r in results], "summary": plain_summary(summary)}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
