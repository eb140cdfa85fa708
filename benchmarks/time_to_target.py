"""Time-to-target: Rollout's trainer against SB3 (and, on CartPole-v1, CleanRL and RLlib).

Each contender trains with its own settings for the env: Rollout with its preset (`rollout
train --env ID`), SB3 with the rl-zoo entry that preset was ported from (sb3_zoo.py), so both
sides run one table. Targets: gymnasium's reward_threshold where the env has one (TARGETS),
else --target.

Runs are interleaved (seed 0: rollout, sb3, cleanrl, rllib; seed 1: ...), each a fresh
process, so that load from other work on the machine hits every contender alike and the
ratios stay fair even when the absolute times are noisy. Each run is timed on one clock: from
just before ``Popen`` until the harness sees the progress line on which the mean return of the
last 100 finished episodes first reaches the target; the run is then stopped.

    .venv/bin/python benchmarks/time_to_target.py [--env CartPole-v1] [--peers sb3,cleanrl,rllib]
        [--seeds 0,1,2] [--timeout 300] [--target 475] [--without-rollout] [--json FILE]
        [--rollout-set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.contenders import BENCH_DIR, CONTENDERS, PEERS, REPO, Contender
from benchmarks.procs import Run
from benchmarks.progress import Point, RolloutProgress, crossed, rollout_phases
from benchmarks.summary import RunResult, summarize, table, target_verdict

POLL_S = 0.02


# The default target per env: gymnasium's reward_threshold (env spec) where the env has one;
# Pendulum-v1 has none, and -250 is what SB3 with its rl-zoo entry reaches on every seed within
# the entry's 100k steps (its reference curves, app/references/data: all three seeds by ~64k).
TARGETS: dict[str, float] = {
    "Pendulum-v1": -250.0,
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "LunarLander-v3": 200.0,
    "LunarLanderContinuous-v3": 200.0,
    "Hopper-v5": 3800.0,
    "HalfCheetah-v5": 4800.0,
}


def record_crossing(result: RunResult, point: Point, first: Point) -> None:
    """The run reached the target at `point`; its rate is counted from its `first` point."""
    result.reached = True
    result.time_to_target_s = point.t
    result.env_steps = point.env_steps
    result.reported_time_s = point.reported_t
    if point.t > first.t:
        result.env_steps_per_s = (point.env_steps - first.env_steps) / (point.t - first.t)


def plain_summary(summary: dict[str, dict]) -> dict[str, dict]:
    """summarize()'s rows with their Spreads as dicts, for JSON."""
    return {
        name: {k: (v.__dict__ if hasattr(v, "median") else v) for k, v in row.items()}
        for name, row in summary.items()
    }


def run_once(
    contender: Contender,
    env_id: str,
    seed: int,
    target: float,
    timeout_s: float,
    run_dir: Path,
) -> RunResult:
    """Start one run, watch its progress until it crosses the target or times out, stop it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    progress = contender.progress(run_dir)
    env = {**os.environ, **contender.env(run_dir), "PYTHONUNBUFFERED": "1"}
    env["BENCH_T0"] = repr(time.time())  # peers stamp their lines relative to this
    run = Run(contender.command(env_id, seed, target, run_dir), env, REPO, run_dir)
    result = RunResult(contender.name, seed, reached=False)
    first = None
    while True:
        now = run.elapsed()
        for point in progress.poll(now):
            first = first or point
            if crossed(point, target):
                record_crossing(result, point, first)
                break
        if result.reached:
            break
        if run.exited():
            result.note = "exited before reaching the target"
            break
        if now > timeout_s:
            result.note = f"timeout after {timeout_s:g} s"
            break
        time.sleep(POLL_S)
    result.wall_s = run.elapsed()
    result.load_1m = os.getloadavg()[0]
    result.exit_code = run.stop()
    result.peak_rss_bytes = run.memory.peak_rss
    result.peak_processes = run.memory.peak_processes
    result.first_report_s = first.t if first else None
    if isinstance(progress, RolloutProgress):
        until = result.time_to_target_s if result.reached else result.wall_s
        result.phases = rollout_phases(progress.iterations, until)
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1", help="gymnasium env id")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma list of " + str(PEERS))
    parser.add_argument("--seeds", default="0,1,2", help="comma list of seeds")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument(
        "--target", type=float, help="mean of the last 100 episodes (default: TARGETS[env])"
    )
    parser.add_argument("--without-rollout", action="store_true", help="peers only")
    parser.add_argument(
        "--rollout-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a `rollout train --set` override for Rollout's runs (e.g. vector_env=serial)",
    )
    parser.add_argument("--json", type=Path, help="write every run and the summary here")
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=BENCH_DIR / "results",
        help="per-run logs and progress files go to RESULTS_DIR/<UTC time>/",
    )
    args = parser.parse_args(argv)
    args.peers = [p for p in args.peers.split(",") if p and p != "none"]
    unknown = set(args.peers) - set(PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}; choose from {PEERS}")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    if args.target is None:
        if args.env not in TARGETS:
            parser.error(f"{args.env} has no reward_threshold here: give --target")
        args.target = TARGETS[args.env]
    for name in args.peers:
        try:
            CONTENDERS[name].command(args.env, 0, args.target, Path("."))
        except ValueError as exc:
            parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = ([] if args.without_rollout else ["rollout"]) + args.peers
    missing = [n for n in names if not CONTENDERS[n].executable.exists()]
    if missing:
        paths = ", ".join(str(CONTENDERS[n].executable) for n in missing)
        print(f"missing {paths}: run `make venv` and `make -C benchmarks peers`", file=sys.stderr)
        return 2
    started = datetime.now(UTC)
    out_dir = args.results_dir / started.strftime("%Y%m%dT%H%M%SZ")
    results: list[RunResult] = []
    for seed in args.seeds:
        for name in names:
            run_dir = out_dir / f"{name}-s{seed}"
            contender = CONTENDERS[name]
            if name == "rollout" and args.rollout_set:
                overrides = tuple(a for kv in args.rollout_set for a in ("--set", kv))
                contender = dataclasses.replace(
                    contender, extra_args=(*contender.extra_args, *overrides)
                )
            result = run_once(contender, args.env, seed, args.target, args.timeout, run_dir)
            results.append(result)
            print(_run_line(result), flush=True)
            (run_dir / "result.json").write_text(json.dumps(result.as_dict(), indent=2))

    summary = summarize(results, names)
    describe = {n: CONTENDERS[n].describe for n in names}
    if args.rollout_set and "rollout" in describe:
        describe["rollout"] += f", --set {' '.join(args.rollout_set)}"
    print()
    print(table(summary, args.target, describe))
    verdict = target_verdict(summary)
    if verdict:
        print("\n" + verdict)
    phases = _median_phases(results)
    if phases:
        print("Rollout time split (median over reached runs, s): " + _phase_text(phases))
    loads = [r.load_1m for r in results if r.load_1m is not None]
    print(f"machine load (1-min average at each run's end): {min(loads):.1f}-{max(loads):.1f}")
    print(f"\nlogs: {out_dir}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(_report(args, started, results, summary), indent=2))
    return 0


def _run_line(r: RunResult) -> str:
    if r.reached:
        head = f"{r.time_to_target_s:7.1f} s  {r.env_steps:>8,} steps"
    else:
        head = f"not reached ({r.note})"
    return (
        f"{r.contender:8s} seed {r.seed}: {head}  peak {r.peak_rss_bytes / 1e9:.2f} GB "
        f"in {r.peak_processes} processes  exit {r.exit_code}  load {r.load_1m:.1f}"
    )


def _median_phases(results: list[RunResult]) -> dict[str, float]:
    runs = [r.phases for r in results if r.contender == "rollout" and r.reached and r.phases]
    if not runs:
        return {}
    return {k: sorted(p[k] for p in runs)[len(runs) // 2] for k in runs[0]}


def _phase_text(phases: dict[str, float]) -> str:
    return ", ".join(
        f"{k.removeprefix('time_').removesuffix('_s')} {v:.2f}" for k, v in phases.items()
    )


def _report(args, started, results, summary) -> dict:
    return {
        "started_utc": started.isoformat(),
        "command": " ".join(sys.argv),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_average_at_end": os.getloadavg(),
        "env_id": args.env,
        "target": args.target,
        "timeout_s": args.timeout,
        "runs": [r.as_dict() for r in results],
        "summary": plain_summary(summary),
        "verdict": target_verdict(summary),
        "rollout_phases_median": _median_phases(results),
    }


if __name__ == "__main__":
    raise SystemExit(main())
