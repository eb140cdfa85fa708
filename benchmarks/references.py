"""Reference learning curves that the dashboard overlays: SB3 PPO with rl-zoo settings.

For each env, one run per seed of benchmarks/peers/sb3_reference.py (in the SB3 peer venv, one
after the other, each a fresh process); every finished episode is reported with its env steps
and its time since the process started. Per seed the curve is the mean return of the last 100
finished episodes (Rollout's `episode_return_mean`); across seeds the file keeps the mean and the
min/max on a common grid of ~200 points, once against env steps and once against wall time.
Writes app/references/data/<env>.json (the ALE-style "/" in an env id becomes "__").

    make -C benchmarks references
    .venv/bin/python -m benchmarks.references [--envs CartPole-v1,Acrobot-v1,Pendulum-v1]
        [--seeds 0,1,2] [--points 200] [--timeout 900] [--budget Acrobot-v1=200000]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
import platform
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `app` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.references.schemas import Band, ReferenceCurves, ReferenceRun
from benchmarks import contenders
from benchmarks.contenders import BENCH_DIR, PEER_SCRIPTS, PEERS_DIR, REPO, zoo_args
from benchmarks.procs import Run

ENVS = ("CartPole-v1", "Acrobot-v1", "Pendulum-v1", "LunarLander-v3", "HalfCheetah-v5")
WINDOW = 100  # as Rollout's episode_return_mean and SB3's ep_info_buffer
# Shorter than the zoo's n_timesteps where the curve is flat long before (CPU time on a small
# machine): Acrobot's 1e6 steps take ~10 min per seed here, and it plateaus by ~150k. The zoo
# uses no lin_ schedule for Acrobot, so the curve up to the cut is the zoo's.
BUDGETS: dict[str, int] = {"Acrobot-v1": 200_000}
SCRIPT = PEER_SCRIPTS / "sb3_reference.py"
PYTHON = PEERS_DIR / "sb3" / "bin" / "python"
DATA_DIR = REPO / "app" / "references" / "data"
COMMAND = "make -C benchmarks references"
POLL_S = 0.5


@dataclass(frozen=True)
class Episode:
    t: float  # seconds since just before the process started
    steps: int  # env steps sampled when it finished
    ret: float


def read_episodes(path: Path) -> list[Episode]:
    """The episode lines a peer appended (episode_report.py's format)."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            d = json.loads(line)
            out.append(Episode(float(d["t"]), int(d["steps"]), float(d["ret"])))
    return out


def rolling_mean(episodes: Sequence[Episode], window: int = WINDOW) -> list[tuple[Episode, float]]:
    """After each episode: the mean return of the last <= `window` ones."""
    recent: deque[float] = deque(maxlen=window)
    total = 0.0
    out = []
    for e in episodes:
        if len(recent) == window:
            total -= recent[0]
        recent.append(e.ret)
        total += e.ret
        out.append((e, total / len(recent)))
    return out


def grid(lo: float, hi: float, n: int) -> list[float]:
    """n evenly spaced points from lo to hi (both included)."""
    if n < 2 or hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def value_at(xs: Sequence[float], ys: Sequence[float], x: float) -> float | None:
    """The curve as a step function: the last y at or before x (held after the last point)."""
    i = bisect.bisect_right(xs, x) - 1
    return ys[i] if i >= 0 else None


def band(
    curves: Sequence[tuple[Sequence[float], Sequence[float]]], points: int, x_digits: int = 2
) -> Band:
    """Mean and min/max over curves on a common grid, from where every curve has a value to
    where the last one ends (a curve that ended earlier holds its final value).

    x is rounded to `x_digits` decimals (0: whole numbers, for env steps) and the values are
    taken at the rounded x; the two ends round up, so the first point has every curve and the
    last one every curve's final value."""
    lo = max(xs[0] for xs, _ in curves)
    hi = max(xs[-1] for xs, _ in curves)
    xs_grid = grid(lo, hi, points)
    out: dict[str, list[float]] = {"x": [], "mean": [], "min": [], "max": []}
    for i, raw in enumerate(xs_grid):
        x = _round(raw, x_digits, up=i in (0, len(xs_grid) - 1))
        if out["x"] and x <= out["x"][-1]:
            continue  # a grid finer than the rounding
        values = [value_at(xs, ys, x) for xs, ys in curves]
        present = [v for v in values if v is not None]
        assert len(present) == len(values), "the grid starts where every curve has a value"
        out["x"].append(x)
        out["mean"].append(round(sum(present) / len(present), 3))
        out["min"].append(round(min(present), 3))
        out["max"].append(round(max(present), 3))
    return Band(**out)


def _round(x: float, digits: int, up: bool) -> float:
    scale = 10**digits
    # round(..., 6) first: 0.23 * 100 is 23.000000000000004, whose ceiling would be 24.
    scaled = math.ceil(round(x * scale, 6)) if up else round(x * scale)
    return int(scaled) if digits == 0 else scaled / scale


def curves_of(
    runs: Sequence[Sequence[Episode]], window: int = WINDOW
) -> tuple[list[tuple[list[float], list[float]]], list[tuple[list[float], list[float]]]]:
    """Per run: (env steps, window mean) and (time, window mean), x strictly increasing."""
    by_steps, by_time = [], []
    for episodes in runs:
        rolled = rolling_mean(episodes, window)
        by_steps.append(_increasing([(e.steps, m) for e, m in rolled]))
        by_time.append(_increasing([(e.t, m) for e, m in rolled]))
    return by_steps, by_time


def _increasing(points: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Several episodes can end on the same step (vector envs): keep the last value per x."""
    xs: list[float] = []
    ys: list[float] = []
    for x, y in points:
        if xs and x <= xs[-1]:
            ys[-1] = y
            continue
        xs.append(float(x))
        ys.append(y)
    return xs, ys


def build_reference(
    env_id: str,
    runs: dict[int, list[Episode]],
    settings: dict,
    budget: int,
    *,
    sb3_version: str,
    machine: str,
    points: int,
    notes: str = "",
) -> ReferenceCurves:
    seeds = sorted(runs)
    episodes = [runs[s] for s in seeds]
    by_steps, by_time = curves_of(episodes)
    return ReferenceCurves(
        env_id=env_id,
        label="SB3 PPO (rl-zoo)",
        source=(
            f"stable-baselines3 {sb3_version} PPO (MlpPolicy), hyperparameters from "
            f"rl-baselines3-zoo hyperparams/ppo.yml, entry {env_id}; "
            "benchmarks/peers/sb3_reference.py"
        ),
        settings=settings,
        budget_env_steps=budget,
        window=WINDOW,
        seeds=seeds,
        command=COMMAND,
        generated_at=datetime.now(UTC).replace(microsecond=0),
        machine=machine,
        notes=notes,
        env_steps=band(by_steps, points, x_digits=0),
        wall_time_s=band(by_time, points),
        runs=[
            ReferenceRun(
                seed=s,
                episodes=len(runs[s]),
                env_steps=runs[s][-1].steps,
                wall_s=round(runs[s][-1].t, 2),
                final_return=round(rolling_mean(runs[s])[-1][1], 3),
            )
            for s in seeds
        ],
    )


def file_name(env_id: str) -> str:
    return env_id.replace("/", "__") + ".json"


def dump(reference: ReferenceCurves) -> str:
    """One top-level key per line, each value compact: small, and diffs stay readable."""
    data = reference.model_dump(mode="json")
    lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in data.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


# --- running the peer ----------------------------------------------------------------------------


def peer_settings(env_id: str) -> dict:
    """The rl-zoo entry Rollout's preset for `env_id` was ported from: what SB3 runs."""
    entry = contenders.zoo_entry(env_id)
    if entry is None:
        raise SystemExit(f"{env_id}: no rl-zoo entry behind its preset (trainer/presets.py)")
    return entry


def sb3_version() -> str:
    code = "import importlib.metadata as m; print(m.version('stable-baselines3'))"
    return subprocess.run(
        [str(PYTHON), "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


def run_seed(env_id: str, seed: int, budget: int, timeout_s: float, run_dir: Path) -> list[Episode]:
    """One run to its budget; raises if it fails or times out (no partial references)."""
    report = run_dir / "episodes.jsonl"
    report.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BENCH_REPORT": str(report)}
    env["BENCH_T0"] = repr(time.time())
    cmd = [str(PYTHON), str(SCRIPT), "--env", env_id, "--seed", str(seed)]
    cmd += [*zoo_args(env_id), "--total-timesteps", str(budget)]
    run = Run(cmd, env, REPO, run_dir)
    try:
        while not run.exited():
            if run.elapsed() > timeout_s:
                raise RuntimeError(f"{env_id} seed {seed}: timeout after {timeout_s:g} s")
            time.sleep(POLL_S)
    finally:
        code = run.stop()
    if code != 0:
        tail = (run_dir / "stderr.log").read_text()[-2000:]
        raise RuntimeError(f"{env_id} seed {seed}: exit {code}\n{tail}")
    episodes = read_episodes(report)
    if len(episodes) < 2:
        raise RuntimeError(f"{env_id} seed {seed}: only {len(episodes)} episodes reported")
    return episodes


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(ENVS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--points", type=int, default=200, help="grid points per curve")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument(
        "--budget", action="append", default=[], help="ENV=STEPS (default: BUDGETS, else the zoo's)"
    )
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    parser.add_argument("--results-dir", type=Path, default=BENCH_DIR / "results" / "references")
    args = parser.parse_args(argv)
    args.envs = [e for e in args.envs.split(",") if e]
    args.seeds = [int(s) for s in args.seeds.split(",")]
    budgets = dict(BUDGETS)
    for item in args.budget:
        env_id, _, steps = item.partition("=")
        if not steps.isdigit():
            parser.error(f"--budget {item!r}: expected ENV=STEPS")
        budgets[env_id] = int(steps)
    args.budgets = budgets
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not PYTHON.exists():
        print(f"missing {PYTHON}: run `make -C benchmarks peers`", file=sys.stderr)
        return 2
    version = sb3_version()
    out_dir = args.results_dir / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    args.out.mkdir(parents=True, exist_ok=True)
    for env_id in args.envs:
        settings = peer_settings(env_id)
        zoo_budget = int(settings["n_timesteps"])
        budget = min(args.budgets.get(env_id, zoo_budget), zoo_budget)
        loads: list[float] = []
        runs: dict[int, list[Episode]] = {}
        for seed in args.seeds:
            started = time.monotonic()
            runs[seed] = run_seed(env_id, seed, budget, args.timeout, out_dir / f"{env_id}-s{seed}")
            loads.append(os.getloadavg()[0])
            final = rolling_mean(runs[seed])[-1][1]
            took = time.monotonic() - started
            print(f"{env_id} seed {seed}: {took:.0f} s, final return {final:.1f}", flush=True)
        cores = os.cpu_count()
        machine = (
            f"{platform.machine()}, {cores} cores, {platform.system()}; 1-minute load average "
            f"{min(loads):.1f}-{max(loads):.1f} at the runs' ends (wall times scale with load)"
        )
        notes = ""
        if budget < zoo_budget:
            notes = f"runs cut at {budget} of the zoo's {settings['n_timesteps']} env steps"
        reference = build_reference(
            env_id,
            runs,
            settings,
            budget,
            sb3_version=version,
            machine=machine,
            points=args.points,
            notes=notes,
        )
        path = args.out / file_name(env_id)
        path.write_text(dump(reference))
        print(f"wrote {path} ({path.stat().st_size / 1024:.0f} KiB)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
