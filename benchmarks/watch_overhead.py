"""Watch it learn's cost: how much `evaluation_every` slows the run it films (target <= 5 %).

Starts `rollout serve` as a user does (SQLite, its own local Ray head) and runs each env's
preset through the service, seed by seed, once without and once with `evaluation_every` (about
ten videos per run), the two arms interleaved and their order alternated per seed. Both arms
save the same checkpoints; only the scheduled evaluations differ. For each run it records

- run time: the run's `started_at` (submitted to Ray) -> `finished_at` (its final status), what
  a user waits for the trained policy;
- for the filmed arm, how many videos were recorded, and how long after the run ended the
  final checkpoint's video and the last of all were ready.

and prints the median ratio (filmed / plain) per env. The next run starts only once the
previous run's evaluations have ended, so no arm runs beside another's leftovers.

    .venv/bin/python -m benchmarks.watch_overhead [--envs CartPole-v1,Acrobot-v1]
        [--seeds 0,1,2] [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.docs_section import write_section
from tests.serve_process import rollout_serve

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ".venv/bin/python -m benchmarks.watch_overhead --write docs/benchmarks.md"
START, END = "<!-- watch_overhead:start -->", "<!-- watch_overhead:end -->"
TARGET = 1.05
# Per env: the preset with a shorter budget where the full one takes many minutes here, and
# checkpoint / evaluation cadences that give about ten videos per run.
RUNS: dict[str, dict[str, Any]] = {
    "CartPole-v1": {"stop": {"env_steps": 100_000}, "checkpoint_every": 10, "every": 2},
    "Acrobot-v1": {"stop": {"env_steps": 200_000}, "checkpoint_every": 5, "every": 1},
}


def _time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def run_once(api: httpx.Client, env_id: str, seed: int, filmed: bool, timeout_s: float) -> dict:
    spec = RUNS[env_id]
    config: dict[str, Any] = {
        "env_id": env_id,
        "seed": seed,
        "stop": spec["stop"],
        "checkpoint_every": spec["checkpoint_every"],
    }
    name = f"watch-overhead {env_id} seed {seed} {'filmed' if filmed else 'plain'}"
    every = spec["every"] if filmed else 0
    body = {"name": name, "config": config, "evaluation_every": every}
    response = api.post("/experiments", json=body)
    response.raise_for_status()
    exp_id = response.json()["id"]
    deadline = time.monotonic() + timeout_s
    while True:
        exp = api.get(f"/experiments/{exp_id}").json()
        evaluations = api.get(f"/experiments/{exp_id}/evaluations").json()
        ended = exp["status"] in ("succeeded", "failed", "stopped")
        if ended and all(e["status"] in ("succeeded", "failed") for e in evaluations):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} did not finish in {timeout_s:.0f} s")
        time.sleep(0.5)
    if exp["status"] != "succeeded":
        raise SystemExit(f"{name} ended {exp['status']}: {exp['error']}")
    started, finished = _time(exp["started_at"]), _time(exp["finished_at"])
    videos = [e for e in evaluations if e["status"] == "succeeded" and e["video"]]
    last_video = max((_time(e["finished_at"]) for e in videos), default=None)
    final = max(videos, key=lambda e: e["checkpoint_iteration"], default=None)
    result = {
        "env": env_id,
        "seed": seed,
        "filmed": filmed,
        "run_s": (finished - started).total_seconds(),
        "env_steps": exp["env_steps"],
        "videos": len(videos),
        "evaluations": len(evaluations),
        "last_video_after_end_s": (last_video - finished).total_seconds() if last_video else None,
        "final_video_after_end_s": (
            (_time(final["finished_at"]) - finished).total_seconds() if final else None
        ),
    }
    print(json.dumps(result), flush=True)
    return result


def summarise(results: list[dict]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for env_id in dict.fromkeys(r["env"] for r in results):
        plain = [r["run_s"] for r in results if r["env"] == env_id and not r["filmed"]]
        filmed = [r for r in results if r["env"] == env_id and r["filmed"]]
        after = [r["last_video_after_end_s"] for r in filmed if r["last_video_after_end_s"]]
        final = [r["final_video_after_end_s"] for r in filmed if r["final_video_after_end_s"]]
        out[env_id] = {
            "plain_s": statistics.median(plain),
            "filmed_s": statistics.median(r["run_s"] for r in filmed),
            "ratio": statistics.median(r["run_s"] for r in filmed) / statistics.median(plain),
            "videos": statistics.median(r["videos"] for r in filmed),
            "last_video_after_end_s": statistics.median(after) if after else float("nan"),
            "final_video_after_end_s": statistics.median(final) if final else float("nan"),
        }
    return out


def section(results: list[dict], summary: dict[str, dict[str, float]]) -> str:
    lines = [
        START,
        "### Watch it learn: the cost of `evaluation_every`",
        "",
        f"`{COMMAND}` ({dt.date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} cores). Each env's preset through `rollout serve` (SQLite, local Ray "
        "head), per seed once without and once with `evaluation_every` (order alternated); "
        "run time = submitted to Ray -> final status. Target: filmed / plain <= "
        f"{TARGET:.2f}.",
        "",
        "| env | budget | videos per run | plain (median s) | filmed (median s) | ratio | "
        "final checkpoint's video / all videos, after the run ended (median s) | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for env_id, s in summary.items():
        verdict = "met" if s["ratio"] <= TARGET else "missed"
        steps = RUNS[env_id]["stop"]["env_steps"]
        lines.append(
            f"| {env_id} | {steps:,} steps | {s['videos']:.0f} | {s['plain_s']:.1f} | "
            f"{s['filmed_s']:.1f} | {s['ratio']:.3f} | {s['final_video_after_end_s']:.1f} / "
            f"{s['last_video_after_end_s']:.1f} | {verdict} |"
        )
    lines += ["", "Per run:", "", "| env | seed | arm | run s | env steps | videos |"]
    lines.append("|---|---|---|---|---|---|")
    for r in results:
        arm = "filmed" if r["filmed"] else "plain"
        lines.append(
            f"| {r['env']} | {r['seed']} | {arm} | {r['run_s']:.1f} | {r['env_steps']:,} | "
            f"{r['videos']} |"
        )
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(RUNS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--write", type=Path, help="rewrite this file's watch_overhead section")
    args = parser.parse_args()
    envs = args.envs.split(",")
    unknown = [e for e in envs if e not in RUNS]
    if unknown:
        parser.error(f"no run settings for {', '.join(unknown)} (known: {', '.join(RUNS)})")
    seeds = [int(s) for s in args.seeds.split(",")]
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rollout-watch-") as tmp:
        env = {"ROLLOUT_API_TOKEN": None, "ROLLOUT_DATABASE_URL": None}
        with (
            rollout_serve(Path(tmp), env=env, start_timeout_s=120) as served,
            httpx.Client(base_url=f"{served.url}/api/v1", timeout=30) as api,
        ):
            for env_id in envs:
                for seed in seeds:
                    order = (False, True) if seed % 2 == 0 else (True, False)
                    for filmed in order:
                        results.append(run_once(api, env_id, seed, filmed, args.timeout_s))
    summary = summarise(results)
    for env_id, s in summary.items():
        print(
            f"{env_id}: plain {s['plain_s']:.1f} s, filmed {s['filmed_s']:.1f} s "
            f"({s['videos']:.0f} videos): ratio {s['ratio']:.3f} (target <= {TARGET})",
            flush=True,
        )
    if args.write:
        write_section(
            args.write,
            START,
            END,
            section(results, summary),
            anchor="## Dashboard",
            heading="## Watch it learn",
        )


if __name__ == "__main__":
    main()
