"""Learning quality against rl-zoo: each env trained as a user would, scored as rl-zoo scores.

For every env and seed: `rollout train --env ID --seed S --out DIR` with nothing else (the
preset's settings, the preset's budget), then `rollout evaluate` of the final checkpoint over 50
episodes with the deterministic policy, as rl-zoo's benchmark evaluates. Where the preset's
budget is not rl-zoo's (CartPole keeps PPOConfig's defaults, 1M steps), `--set stop.env_steps`
gives rl-zoo's, and the table says so.

With `--trainer sb3` the same row is run by Stable-Baselines3 with the rl-zoo entry the preset
was ported from (benchmarks/peers/sb3_reference.py, in the SB3 peer venv) and scored the same way:
where a row falls short of rl-zoo's published score, it says whether SB3 itself reaches it today
on the same env version, or whether the gap is ours.

Resumable env by env and seed by seed: every finished run is one line in RESULTS (JSON lines),
and a run already there is not repeated (`--rerun` repeats it). After each run the table in
docs/benchmarks.md is rewritten from every line of RESULTS.

    .venv/bin/python benchmarks/zoo_scores.py --envs Pendulum-v1,CartPole-v1 [--seeds 0,1,2]
        [--trainer rollout|sb3] [--results benchmarks/results/zoo_scores.jsonl] [--rerun]
        [--no-docs] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.contenders import BENCH_DIR, REPO, zoo_args
from benchmarks.docs_section import write_section
from benchmarks.references import PYTHON as SB3_PYTHON
from benchmarks.references import SCRIPT as SB3_SCRIPT
from trainer.resolve import resolve_config, zoo_entry, zoo_env_kwargs

ROLLOUT = REPO / ".venv" / "bin" / "rollout"
TRAINERS = ("rollout", "sb3")
RESULTS = BENCH_DIR / "results" / "zoo_scores.jsonl"
DOCS = REPO / "docs" / "benchmarks.md"
START, END = "<!-- zoo_scores:start -->", "<!-- zoo_scores:end -->"
EVAL_EPISODES = 50
EVAL_SEED_OFFSET = 1000  # evaluation episodes never replay the training seeds' resets
_CHECKPOINT = re.compile(r"checkpoint (\S+)\s*$")


@dataclass(frozen=True)
class ZooRow:
    """One row of rl-baselines3-zoo's benchmark.md for PPO."""

    env_id: str
    score: float
    budget: int
    zoo_env: str  # the env id rl-zoo scored (older versions for Box2D and MuJoCo)
    # At least 2, 3 where a run takes under 5 minutes on 2 cores; 10 where one takes about a
    # minute or less, where the seeds scatter by more than the gaps to rl-zoo's single agent.
    seeds: int


ZOO_TABLE: tuple[ZooRow, ...] = (
    ZooRow("CartPole-v1", 500.0, 100_000, "CartPole-v1", 10),
    ZooRow("Acrobot-v1", -73.5, 1_000_000, "Acrobot-v1", 10),
    ZooRow("MountainCar-v0", -110.4, 1_000_000, "MountainCar-v0", 10),
    ZooRow("MountainCarContinuous-v0", 88.3, 20_000, "MountainCarContinuous-v0", 10),
    ZooRow("Pendulum-v1", -172.2, 100_000, "Pendulum-v1", 10),
    ZooRow("LunarLander-v3", 242.1, 1_000_000, "LunarLander-v2", 10),
    ZooRow("LunarLanderContinuous-v3", 270.9, 1_000_000, "LunarLanderContinuous-v2", 10),
    ZooRow("BipedalWalker-v3", 287.9, 5_000_000, "BipedalWalker-v3", 3),
    ZooRow("HalfCheetah-v5", 5819.0, 1_000_000, "HalfCheetah-v3", 3),
    ZooRow("Hopper-v5", 2410.0, 1_000_000, "Hopper-v3", 3),
    ZooRow("Walker2d-v5", 3479.0, 1_000_000, "Walker2d-v3", 3),
    ZooRow("Ant-v5", 1327.0, 1_000_000, "Ant-v3", 3),
    ZooRow("Swimmer-v5", 281.6, 1_000_000, "Swimmer-v3", 3),
)
ROWS = {row.env_id: row for row in ZOO_TABLE}


def budget_args(row: ZooRow) -> list[str]:
    """`--set stop.env_steps=N` where the preset's own budget is not rl-zoo's, else nothing."""
    preset_budget = resolve_config({"env_id": row.env_id}).config.stop.env_steps
    return [] if preset_budget == row.budget else ["--set", f"stop.env_steps={row.budget}"]


def _git_commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def run_one(row: ZooRow, seed: int, work: Path) -> dict[str, Any]:
    """Train and evaluate one seed with Rollout; the result line for RESULTS."""
    out = work / f"{row.env_id.replace('/', '_')}-s{seed}"
    extra = budget_args(row)
    train = [str(ROLLOUT), "train", "--env", row.env_id, "--seed", str(seed), *extra]
    train += ["--out", str(out), "--overwrite"]
    log = work / f"{out.name}.log"
    t0 = time.monotonic()
    with log.open("w") as log_file:
        done = subprocess.run(train, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO)
    train_s = time.monotonic() - t0
    lines = log.read_text().splitlines()
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(train)} exited {done.returncode}: {lines[-5:]}")
    match = next((m for m in map(_CHECKPOINT.search, reversed(lines)) if m), None)
    if match is None:
        raise RuntimeError(f"no checkpoint in the output of {' '.join(train)}")
    checkpoint = match.group(1)
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    evaluate = [str(ROLLOUT), "evaluate", checkpoint, "--episodes", str(EVAL_EPISODES)]
    evaluate += ["--seed", str(EVAL_SEED_OFFSET + seed)]
    t1 = time.monotonic()
    scored = subprocess.run(evaluate, capture_output=True, text=True, cwd=REPO)
    if scored.returncode != 0:
        raise RuntimeError(f"{' '.join(evaluate)} exited {scored.returncode}: {scored.stderr}")
    report = json.loads(scored.stdout.strip().splitlines()[-1])
    return {
        "env_id": row.env_id,
        "seed": seed,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": _git_commit(),
        "command": " ".join(["rollout", *train[1:-3]]),
        "env_steps": int(last["env_steps"]),
        "train_s": round(train_s, 1),
        "eval_s": round(time.monotonic() - t1, 1),
        "train_return_mean": last.get("episode_return_mean"),
        "eval_return_mean": report["return_mean"],
        "eval_return_std": report["return_std"],
        "eval_episodes": report["episodes"],
    }


def run_sb3(row: ZooRow, seed: int, work: Path) -> dict[str, Any]:
    """Train and evaluate one seed with SB3 and the preset's rl-zoo entry; the RESULTS line."""
    name = f"sb3-{row.env_id.replace('/', '_')}-s{seed}"
    report, log = work / f"{name}.episodes.jsonl", work / f"{name}.log"
    report.unlink(missing_ok=True)
    args = ["--env", row.env_id, "--seed", str(seed), "--total-timesteps", str(row.budget)]
    args += ["--evaluate", str(EVAL_EPISODES), "--eval-seed", str(EVAL_SEED_OFFSET + seed)]
    cmd = [str(SB3_PYTHON), str(SB3_SCRIPT), *zoo_args(row.env_id), *args]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "BENCH_REPORT": str(report)}
    env["BENCH_T0"] = repr(time.time())  # episode times from process start, as time_to_target.py
    t0 = time.monotonic()
    with log.open("w") as log_file:
        done = subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    took = time.monotonic() - t0
    lines = log.read_text().splitlines()
    if done.returncode != 0:
        raise RuntimeError(
            f"{SB3_SCRIPT.name} {' '.join(args)} exited {done.returncode}: {lines[-5:]}"
        )
    trained, scored = json.loads(lines[-2]), json.loads(lines[-1])
    episodes = [json.loads(line) for line in report.read_text().splitlines() if line.strip()]
    last_100 = [e["ret"] for e in episodes[-100:]]
    return {
        "trainer": "sb3",
        "env_id": row.env_id,
        "seed": seed,
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "commit": _git_commit(),
        "command": f"sb3_reference.py --entry <{row.env_id}'s zoo entry> {' '.join(args)}",
        "entry": zoo_entry(row.env_id),
        "env_kwargs": zoo_env_kwargs(row.env_id),
        "env_steps": int(trained["env_steps"]),
        "train_s": round(took, 1),  # training and the evaluation after it, one process
        "train_return_mean": statistics.fmean(last_100) if last_100 else None,
        "eval_return_mean": scored["return_mean"],
        "eval_return_std": scored["return_std"],
        "eval_episodes": scored["episodes"],
    }


def trainer_of(result: dict[str, Any]) -> str:
    return result.get("trainer", "rollout")  # lines from before --trainer are Rollout's


def load_results(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runs_the_current_entry(result: dict[str, Any]) -> bool:
    """Whether an SB3 line ran the entry (and env kwargs) the env's preset has now: a line from
    before a preset changed its entry says nothing about the entry it has, and a line that does
    not say what it ran says nothing about any."""
    env_id = result["env_id"]
    same_entry = "entry" in result and result["entry"] == zoo_entry(env_id)
    return same_entry and result.get("env_kwargs") == zoo_env_kwargs(env_id)


def latest_per_run(
    results: list[dict[str, Any]], trainer: str = "rollout"
) -> dict[tuple[str, int], dict[str, Any]]:
    """One trainer's last line for each (env, seed): a rerun replaces the earlier one, and an
    SB3 line of another entry than the preset's is no run of this row."""
    return {
        (r["env_id"], r["seed"]): r
        for r in results
        if trainer_of(r) == trainer and (trainer != "sb3" or runs_the_current_entry(r))
    }


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per env of ZOO_TABLE with Rollout runs: per-seed scores, their mean, the verdict,
    and SB3's runs of the same entry where there are any."""
    runs = latest_per_run(results)
    sb3 = latest_per_run(results, "sb3")
    rows = []
    for row in ZOO_TABLE:
        mine = sorted((r for (env, _), r in runs.items() if env == row.env_id), key=_seed)
        if not mine:
            continue
        scores = [r["eval_return_mean"] for r in mine]
        mean = statistics.fmean(scores)
        # The standard error of the seed mean: how far another set of seeds may land.
        sem = statistics.stdev(scores) / len(scores) ** 0.5 if len(scores) > 1 else None
        peer = sorted((r for (env, _), r in sb3.items() if env == row.env_id), key=_seed)
        rows.append(
            {
                "row": row,
                "runs": mine,
                "mean": mean,
                "sem": sem,
                "met": mean >= row.score,
                "gap": mean - row.score,
                "train_s_median": statistics.median(r["train_s"] for r in mine),
                "budget_flag": bool(budget_args(row)),
                "sb3": peer,
            }
        )
    return rows


def _seed(result: dict[str, Any]) -> int:
    return int(result["seed"])


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        START,
        "| env | rl-zoo PPO | budget | seeds | Rollout (mean of seeds) | ± s.e. | per seed "
        "(50-episode mean ± std) | train time (median) | verdict | SB3, same entry (per seed) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in rows:
        row: ZooRow = s["row"]
        per_seed = "; ".join(
            f"s{r['seed']} {r['eval_return_mean']:.1f} ± {r['eval_return_std']:.1f}"
            for r in s["runs"]
        )
        zoo = f"{row.score:g}" + ("" if row.zoo_env == row.env_id else f" ({row.zoo_env})")
        budget = f"{row.budget:,}" + (" (flag)" if s["budget_flag"] else "")
        verdict = "met" if s["met"] else f"short by {-s['gap']:.1f}"
        sem = "" if s["sem"] is None else f"{s['sem']:.1f}"
        if not s["met"] and s["sem"] is not None and -s["gap"] <= s["sem"]:
            verdict += " (within one s.e.)"
        peer = s.get("sb3") or []
        sb3 = "not run"
        if peer:
            peer_mean = statistics.fmean(r["eval_return_mean"] for r in peer)
            peer_seeds = "; ".join(f"s{r['seed']} {r['eval_return_mean']:.1f}" for r in peer)
            sb3 = f"{peer_mean:.1f} ({peer_seeds})"
        lines.append(
            f"| {row.env_id} | {zoo} | {budget} | {len(s['runs'])} | {s['mean']:.1f} | {sem} | "
            f"{per_seed} | {s['train_s_median']:.0f} s | {verdict} | {sb3} |"
        )
    missing = [r.env_id for r in ZOO_TABLE if r.env_id not in {s["row"].env_id for s in rows}]
    if missing:
        lines.append("")
        lines.append("Not run yet: " + ", ".join(missing) + ".")
    every = [r for s in rows for r in [*s["runs"], *(s.get("sb3") or [])]]
    dates = sorted({r["date"] for r in every})
    commits = sorted({r["commit"] for r in every})
    if dates:
        lines.append("")
        lines.append(
            f"Runs from {dates[0]} to {dates[-1]} (commits {', '.join(commits)}); "
            "each line of benchmarks/results/zoo_scores.jsonl is one run with its command."
        )
    lines.append(END)
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default="", help="comma list of env ids (default: every row)")
    parser.add_argument("--seeds", default="", help="comma list (default: the row's count)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--work", type=Path, default=BENCH_DIR / "results" / "zoo_runs")
    parser.add_argument("--trainer", choices=TRAINERS, default="rollout")
    parser.add_argument("--rerun", action="store_true", help="repeat runs already recorded")
    parser.add_argument("--no-docs", action="store_true", help="leave docs/benchmarks.md alone")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    args = parser.parse_args(argv)
    args.envs = [e for e in args.envs.split(",") if e] or [r.env_id for r in ZOO_TABLE]
    unknown = [e for e in args.envs if e not in ROWS]
    if unknown:
        parser.error(f"no rl-zoo row for {unknown}; choose from {sorted(ROWS)}")
    args.seeds = [int(s) for s in args.seeds.split(",") if s]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        print(markdown(summary_rows(load_results(args.results))))
        return 0
    if args.trainer == "rollout" and not ROLLOUT.exists():
        print(f"missing {ROLLOUT}: run `make venv`", file=sys.stderr)
        return 2
    if args.trainer == "sb3" and not SB3_PYTHON.exists():
        print(f"missing {SB3_PYTHON}: run `make -C benchmarks peers`", file=sys.stderr)
        return 2
    run = run_one if args.trainer == "rollout" else run_sb3
    args.work.mkdir(parents=True, exist_ok=True)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    for env_id in args.envs:
        row = ROWS[env_id]
        for seed in args.seeds or list(range(row.seeds)):
            done = latest_per_run(load_results(args.results), args.trainer)
            who = f"{env_id} seed {seed} ({args.trainer})"
            if (env_id, seed) in done and not args.rerun:
                print(f"{who}: recorded, skipped (--rerun repeats it)")
                continue
            print(f"{who}: training {row.budget:,} steps ...", flush=True)
            result = run(row, seed, args.work)
            with args.results.open("a") as f:
                f.write(json.dumps(result) + "\n")
            print(
                f"{who}: {result['eval_return_mean']:.1f} ± "
                f"{result['eval_return_std']:.1f} over {EVAL_EPISODES} episodes "
                f"(rl-zoo {row.score:g}), trained in {result['train_s']:.0f} s",
                flush=True,
            )
            if not args.no_docs:
                write_docs(load_results(args.results))
    print(markdown(summary_rows(load_results(args.results))))
    return 0


def write_docs(results: list[dict[str, Any]]) -> None:
    write_section(
        DOCS,
        START,
        END,
        markdown(summary_rows(results)),
        anchor="## Learning quality against rl-zoo",
        heading="## Learning quality against rl-zoo",
    )


if __name__ == "__main__":
    raise SystemExit(main())
