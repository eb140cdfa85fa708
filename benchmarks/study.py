"""Hyperparameter search on Acrobot-v1 through the service: a study (TPE + median pruning)
against random search without pruning and against the grid sweep of the same box.

    python benchmarks/study.py [--box wide|narrow] [--study-seeds 0,1,2] [--budget 100000]
                               [--trials 12] [--methods tpe+median,random] [--warmup-intervals N]
                               [--percentile P] [--startup-trials N]
                               [--grid-from EARLIER.json]

Starts `rollout serve` on a fresh data dir in /tmp (its own local Ray head) and submits, over
REST:
- the grid: a sweep over the box's grid points (each run the full budget). `narrow`: lr
  {3e-4, 1e-3, 3e-3} x gae_lambda {0.8, 0.9, 0.98} x num_epochs {2, 4, 8} (27 runs), around the
  preset's own values; `wide`: lr {1e-5, 1e-4, 1e-3, 1e-2} x gae_lambda {0.8, 0.95} x num_epochs
  {1, 4, 10} (24 runs), decades of lr as when the scales are not known yet;
- per study seed, a study over the same box (lr log-uniform, gae_lambda uniform, num_epochs
  an int range, each between the grid's ends) with TPE and the median pruner, and one with the
  random sampler and no pruner, each `--trials` trials.
`--methods` picks other samplers and pruners (tpe, tpe+asha, tpe+percentile),
`--warmup-intervals` the median or percentile pruner's warm-up, `--percentile` the share the
percentile pruner keeps, and `--grid-from` reuses an earlier result's grid runs of the same box and
budget instead of running them again. Every run trains with env seed 0 (the base config's), so
the methods differ only in which points they try and how long. A run's score is a study's
objective: the mean of the last 5 reports of the 100-episode return. The grid's best score is
the bar; for each study the script reports its best score, the env steps it spent in all, and
the steps spent up to the trial that first reached the grid's best (trials in suggestion order):
the target is a study that reaches the bar with at most a third of the grid's env steps. Writes
`<stamp>-study-<box>.json` (every run's params, score and steps, and best-so-far curves against
env steps spent) under --results.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.serve_process import rollout_serve  # noqa: E402

ENV = "Acrobot-v1"
# Each box: the grid a user would enumerate and the same box as a study's search space.
BOXES: dict[str, tuple[dict[str, list[Any]], dict[str, dict[str, Any]]]] = {
    # Around the preset's own values: nearly every point learns, the spread is mostly noise.
    "narrow": (
        {"lr": [3e-4, 1e-3, 3e-3], "gae_lambda": [0.8, 0.9, 0.98], "num_epochs": [2, 4, 8]},
        {
            "lr": {"type": "float", "low": 3e-4, "high": 3e-3, "log": True},
            "gae_lambda": {"type": "float", "low": 0.8, "high": 0.98},
            "num_epochs": {"type": "int", "low": 2, "high": 8},
        },
    ),
    # Scales not known in advance (the usual case on a new env): whole decades of lr.
    "wide": (
        {"lr": [1e-5, 1e-4, 1e-3, 1e-2], "gae_lambda": [0.8, 0.95], "num_epochs": [1, 4, 10]},
        {
            "lr": {"type": "float", "low": 1e-5, "high": 1e-2, "log": True},
            "gae_lambda": {"type": "float", "low": 0.8, "high": 0.95},
            "num_epochs": {"type": "int", "low": 1, "high": 10},
        },
    ),
}
K = 5  # the objective: mean of the last K reports
# Method -> (sampler, pruner) of its studies.
METHODS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "tpe+median": ({"kind": "tpe"}, {"kind": "median"}),
    "random": ({"kind": "random"}, {"kind": "none"}),
    "tpe": ({"kind": "tpe"}, {"kind": "none"}),
    "tpe+asha": ({"kind": "tpe"}, {"kind": "asha"}),
    "tpe+percentile": ({"kind": "tpe"}, {"kind": "percentile"}),
}
ENDED = {"succeeded", "failed", "stopped"}


def score(api: httpx.Client, experiment_id: int) -> float | None:
    """The study objective of one run, computed from its stored metrics like the service."""
    got = api.get(
        f"/experiments/{experiment_id}/metrics",
        params={"names": "episode_return_mean", "max_points": 100_000},
    )
    got.raise_for_status()
    series = got.json()["series"].get("episode_return_mean") or {"value": []}
    values = [v for v in series["value"] if v is not None]
    return sum(values[-K:]) / len(values[-K:]) if values else None


def curve(runs: list[dict[str, Any]]) -> list[tuple[int, float | None]]:
    """(env steps spent so far, best score so far) after each run, in suggestion order."""
    spent, best, out = 0, None, []
    for run in runs:
        spent += run["env_steps"] or 0
        if run["score"] is not None and run["complete"]:
            best = run["score"] if best is None else max(best, run["score"])
        out.append((spent, best))
    return out


def wait(api: httpx.Client, path: str, done: Any, timeout_s: float, what: str) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        got = api.get(path)
        got.raise_for_status()
        body = got.json()
        if done(body):
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not finish within {timeout_s:.0f} s")
        time.sleep(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--box", choices=sorted(BOXES), default="wide")
    parser.add_argument("--study-seeds", default="0,1,2")
    parser.add_argument("--budget", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--trials", type=int, default=12, help="per study")
    parser.add_argument("--port", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=7200.0)
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks/results/studies")
    parser.add_argument(
        "--methods",
        default="tpe+median,random",
        help=f"comma-separated, of: {', '.join(METHODS)}",
    )
    parser.add_argument(
        "--warmup-intervals",
        type=int,
        default=None,
        help="the median or percentile pruner's warm-up",
    )
    parser.add_argument(
        "--percentile", type=float, default=None, help="the percentile pruner's share kept, in %"
    )
    parser.add_argument(
        "--startup-trials", type=int, default=None, help="TPE's random suggestions first"
    )
    parser.add_argument(
        "--grid-from",
        type=Path,
        default=None,
        help="an earlier result's JSON of the same box and budget: its grid runs are reused "
        "(every run trains with env seed 0, so the grid repeats itself) instead of run again",
    )
    args = parser.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; known: {', '.join(METHODS)}")
    seeds = [int(s) for s in args.study_seeds.split(",")]
    grid, space = BOXES[args.box]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    args.results.mkdir(parents=True, exist_ok=True)
    data_dir = Path(tempfile.mkdtemp(prefix=f"rollout-study-{stamp}-"))
    base = {"env_id": ENV, "seed": 0, "stop": {"env_steps": args.budget}, "checkpoint_every": 0}
    started = time.monotonic()
    with rollout_serve(data_dir, port=args.port) as server:
        api = httpx.Client(base_url=f"{server.url}/api/v1", timeout=60)
        sweep = None
        if args.grid_from is None:
            sweep = api.post(
                "/sweeps",
                json={
                    "name": "acrobot grid",
                    "config": {k: v for k, v in base.items() if k != "seed"},
                    "grid": grid,
                    "seeds": [0],
                    "max_parallel": 2,
                },
            )
            sweep.raise_for_status()
        studies: dict[str, int] = {}
        for seed in seeds:
            for method in methods:
                sampler, pruner = METHODS[method]
                if args.warmup_intervals is not None and pruner["kind"] in ("median", "percentile"):
                    pruner = {**pruner, "n_warmup_intervals": args.warmup_intervals}
                if args.percentile is not None and pruner["kind"] == "percentile":
                    pruner = {**pruner, "percentile": args.percentile}
                if args.startup_trials is not None and sampler["kind"] == "tpe":
                    sampler = {**sampler, "n_startup_trials": args.startup_trials}
                made = api.post(
                    "/studies",
                    json={
                        "name": f"acrobot {method} seed {seed}",
                        "config": base,
                        "space": space,
                        "n_trials": args.trials,
                        "max_parallel": 2,
                        "seed": seed,
                        "objective": {"metric": "episode_return_mean", "k": K},
                        "sampler": sampler,
                        "pruner": pruner,
                    },
                )
                made.raise_for_status()
                studies[f"{method} seed {seed}"] = made.json()["id"]
        print(f"studies {studies}: {server.url}", flush=True)
        if sweep is None:
            grid_runs = json.loads(args.grid_from.read_text())["grid"]["runs"]
        else:
            swept = wait(
                api,
                f"/sweeps/{sweep.json()['id']}",
                lambda s: all(m["status"] in ENDED for m in s["members"]),
                args.timeout,
                "the grid",
            )
            grid_runs = [
                {
                    "experiment_id": m["id"],
                    "params": {k: m["config"][k] for k in grid},
                    "env_steps": m["env_steps"],
                    "score": score(api, m["id"]),
                    "complete": m["status"] == "succeeded",
                }
                for m in swept["members"]
            ]
        results: dict[str, Any] = {}
        for label, study_id in studies.items():
            body = wait(
                api,
                f"/studies/{study_id}",
                lambda s: s["status"] in ("succeeded", "stopped"),
                args.timeout,
                label,
            )
            runs = [
                {
                    "number": t["number"],
                    "experiment_id": t["experiment_id"],
                    "params": t["params"],
                    "state": t["state"],
                    "env_steps": t["env_steps"],
                    "score": t["value"],
                    "complete": t["state"] == "complete",
                }
                for t in body["trials"]
            ]
            results[label] = {"study_id": study_id, "runs": runs, "curve": curve(runs)}
    grid_steps = sum(r["env_steps"] or 0 for r in grid_runs)
    grid_scores = [r["score"] for r in grid_runs if r["score"] is not None]
    if not grid_scores:
        print("no grid run finished an episode: raise --budget", file=sys.stderr)
        return 1
    grid_best = max(grid_scores)
    print(f"\ngrid: best {grid_best:.2f} with {grid_steps:,} env steps ({len(grid_runs)} runs)")
    for label, result in results.items():
        runs = result["runs"]
        spent = sum(r["env_steps"] or 0 for r in runs)
        scores = [r["score"] for r in runs if r["complete"] and r["score"] is not None]
        best = max(scores) if scores else None
        reached = next((s for s, b in result["curve"] if b is not None and b >= grid_best), None)
        result.update(best=best, env_steps=spent, steps_to_grid_best=reached)
        pruned = sum(r["state"] == "pruned" for r in runs)
        print(
            f"{label:>20}: best {best if best is None else round(best, 2)}, "
            f"{spent:,} env steps ({spent / grid_steps:.2f} of the grid's), {pruned} pruned; "
            + (
                f"reached the grid's best after {reached:,} ({reached / grid_steps:.2f})"
                if reached
                else "never reached the grid's best"
            ),
            flush=True,
        )
    out = args.results / f"{stamp}-study-{args.box}.json"
    out.write_text(
        json.dumps(
            {
                "command": "python benchmarks/study.py " + " ".join(argv or sys.argv[1:]),
                "env": ENV,
                "box": args.box,
                "study_space": space,
                "budget": args.budget,
                "methods": methods,
                "warmup_intervals": args.warmup_intervals,
                "startup_trials": args.startup_trials,
                "percentile": args.percentile,
                "grid_from": str(args.grid_from) if args.grid_from else None,
                "trials": args.trials,
                "grid": {
                    "space": grid,
                    "runs": grid_runs,
                    "best": grid_best,
                    "env_steps": grid_steps,
                    "curve": curve(grid_runs),
                },
                "studies": results,
                "wall_s": time.monotonic() - started,
            },
            indent=1,
        )
    )
    print(f"wrote {out}")
    shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
