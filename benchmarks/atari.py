"""Atari on one machine: time-to-18 / time-to-20 on Pong (optionally Breakout) with Rollout's
default settings for the env, against the bare vector env's speed and a CleanRL-style PPO.

    python benchmarks/atari.py [--game Pong] [--seconds 330] [--contenders rollout[,cleanrl]]
        [--bare-seconds 15] [--results benchmarks/results/atari] [--docs docs/benchmarks.md]

Per game it (1) measures the bare AtariVectorEnv (random actions, the sub-env count, env
config and thread count Rollout's EnvRunner gets for `ALE/<Game>-v5`), (2) runs
`python -m trainer.cli train --env ALE/<Game>-v5` with nothing but stop criteria (the preset
decides everything else; serial mode, no Ray), (3) runs benchmarks/peers/cleanrl_atari.py with
CleanRL's "Solve Pong in about 5 mins" settings on the same vector env and threads. GPU
utilisation is sampled from nvidia-smi (or torch.cuda.utilization) every second during each
run. Times are the harness clock from just before Popen (interpreter start and imports
included); the crossing is the first iteration whose last-100-episode mean reaches the target
with at least 100 episodes finished. Every run's metrics.jsonl is copied into --results and the
table replaces the block between the atari markers in --docs.

Needs torch, numpy, gymnasium, ale-py, pydantic (trainer.config); never Ray.
`--rollout-set KEY=VALUE` / `--cleanrl-arg ARG` exist for CPU smoke tests of this script, and
for comparison runs kept out of the docs table (`--rollout-set overlap_sampling=true --no-docs`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `benchmarks` and `trainer` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.procs import Run
from benchmarks.progress import RolloutProgress, crossed

REPO = Path(__file__).resolve().parent.parent
TARGETS = (18.0, 20.0)
BEGIN, END = "<!-- atari-results:begin -->", "<!-- atari-results:end -->"
# CleanRL's "Solve Pong in about 5 mins" command (envpool examples/cleanrl_examples).
CLEANRL_ARGS = ["--num-envs", "16", "--num-steps", "128", "--num-minibatches", "8",
                "--update-epochs", "3", "--clip-coef", "0.2"]  # fmt: skip
PHASES = ("time_sample_s", "time_env_step_s", "time_inference_s", "time_gae_s", "time_sgd_s",
          "time_weight_sync_s")  # fmt: skip


@dataclass
class Outcome:
    """One contender on one game."""

    contender: str
    game: str
    command: list[str]
    crossings: dict[str, dict[str, float]] = field(default_factory=dict)  # "18" -> t, env_steps
    best_return: float | None = None
    env_steps: int = 0
    wall_s: float = 0.0
    steps_per_s: float | None = None  # steady state: first iteration's end to the last's
    gpu_util_mean: float | None = None
    phases: dict[str, float] = field(default_factory=dict)  # seconds summed over iterations
    iteration_s: float = 0.0
    startup_s: float | None = None
    exit_code: int | None = None
    metrics_file: str = ""
    log_tail: str = ""  # the end of stderr when the run did not end by itself with 0


# --- the environment and the machine ----------------------------------------------------------
def rollout_config(game: str, overrides: list[str]) -> Any:
    """The config `rollout train --env ALE/<game>-v5` resolves to (same code path)."""
    from trainer.cli import build_config

    args = argparse.Namespace(
        env=f"ALE/{game}-v5", seed=None, stop_return=None, stop_steps=None, stop_seconds=None,
        set=overrides,
    )  # fmt: skip
    return build_config({}, args).config


def bare_env_rate(config: Any, seconds: float) -> dict[str, float]:
    """Steps/s of the same AtariVectorEnv the EnvRunner builds, with random actions."""
    import numpy as np

    from trainer.envs import env_threads, make_vector_env

    threads = int(config.env_config.get("num_threads") or 0) or env_threads(
        config.num_cpus_per_env_runner, in_actor=False, overlap=config.overlap_sampling
    )
    n = config.num_envs_per_env_runner
    env = make_vector_env(config.env_id, n, config.env_config, num_threads=threads)
    rng = np.random.default_rng(0)
    try:
        env.reset(seed=0)
        actions = rng.integers(0, env.single_action_space.n, size=(256, n))
        warm_until = time.perf_counter() + 1.0
        while time.perf_counter() < warm_until:
            env.step(actions[0])
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            env.step(actions[steps % len(actions)])
            steps += 1
        elapsed = time.perf_counter() - t0
    finally:
        env.close()
    return {"num_envs": n, "num_threads": threads, "env_steps_per_s": steps * n / elapsed}


def machine() -> dict[str, Any]:
    info: dict[str, Any] = {"cores": len(os.sched_getaffinity(0)), "cpu": platform.processor()}
    try:
        import torch

        info["torch"] = torch.__version__
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


class GpuSampler:
    """GPU utilisation (%) once a second, from nvidia-smi or torch.cuda.utilization (pynvml)."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def read() -> float | None:
        if shutil.which("nvidia-smi"):
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=5, check=True,
                ).stdout  # fmt: skip
                return float(out.splitlines()[0])
            except (subprocess.SubprocessError, ValueError, IndexError):
                return None
        try:
            import torch

            return float(torch.cuda.utilization()) if torch.cuda.is_available() else None
        except Exception:  # no pynvml, no driver
            return None

    def __enter__(self) -> GpuSampler:
        if self.read() is not None:
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            value = self.read()
            if value is not None:
                self.samples.append(value)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


# --- one run --------------------------------------------------------------------------------
def run(contender: str, game: str, cmd: list[str], out: Path, seconds: float) -> Outcome:
    """Start `cmd`, follow OUT/metrics.jsonl until it ends, return what it reached when.

    The process's stdout/stderr go to OUT.logs/, beside OUT: `rollout train --out` refuses a
    directory that already holds files.
    """
    logs = out.with_name(out.name + ".logs")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    progress = RolloutProgress(out / "metrics.jsonl")
    outcome = Outcome(contender, game, cmd)
    first: tuple[float, int] | None = None
    with GpuSampler() as gpu:
        proc = Run(cmd, env, REPO, logs)
        deadline = seconds + 180  # start-up and the last iteration, then it is hung
        while not proc.exited() and proc.elapsed() < deadline:
            time.sleep(0.25)
            _follow(progress, proc.elapsed(), outcome)
            if first is None and progress.iterations:
                first = (proc.elapsed(), int(progress.iterations[0]["env_steps"]))
        ended_alone = proc.exited()
        outcome.exit_code = proc.stop()
        outcome.wall_s = proc.elapsed()
        _follow(progress, outcome.wall_s, outcome)
    if not ended_alone or outcome.exit_code != 0:
        outcome.log_tail = (logs / "stderr.log").read_text(errors="replace")[-3000:]
    outcome.gpu_util_mean = gpu.mean()
    rows = progress.iterations
    if rows:
        outcome.env_steps = int(rows[-1]["env_steps"])
        last, head = rows[-1], rows[0]
        span = float(last["time_s"]) - float(head["time_s"])
        if span > 0:
            outcome.steps_per_s = (int(last["env_steps"]) - int(head["env_steps"])) / span
        outcome.phases = {p: sum(float(r.get(p) or 0.0) for r in rows) for p in PHASES}
        outcome.iteration_s = sum(float(r.get("time_iteration_s") or 0.0) for r in rows)
        outcome.startup_s = first[0] - float(head.get("time_iteration_s") or 0.0) if first else None
    return outcome


def _follow(progress: RolloutProgress, now: float, outcome: Outcome) -> None:
    for point in progress.poll(now):
        if point.episodes >= 100 and point.return_mean == point.return_mean:  # not NaN
            best = outcome.best_return
            outcome.best_return = (
                point.return_mean if best is None else max(best, point.return_mean)
            )
        for target in TARGETS:
            key = f"{target:g}"
            if key not in outcome.crossings and crossed(point, target):
                outcome.crossings[key] = {"t": point.t, "env_steps": point.env_steps}


def peer_seconds(args: argparse.Namespace) -> float:
    """The peer's budget: --peer-seconds when given (Rollout may run on to 20 while the peer
    gets the issue's 25 minutes), else the same as Rollout's."""
    return args.seconds if args.peer_seconds is None else args.peer_seconds


def commands(game: str, args: argparse.Namespace, config: Any, out: Path) -> dict[str, list[str]]:
    py = sys.executable
    rollout = [py, "-m", "trainer.cli", "train", "--env", f"ALE/{game}-v5",
               "--stop-seconds", str(args.seconds), "--stop-return", f"{max(TARGETS):g}",
               "--seed", str(args.seed), "--out", str(out / "rollout")]  # fmt: skip
    for item in args.rollout_set:
        rollout += ["--set", item]
    threads = int(config.env_config.get("num_threads") or 0)
    if not threads:
        from trainer.envs import env_threads

        threads = env_threads(1.0, in_actor=False)  # the peer alternates sampling and SGD
    cleanrl = [py, str(REPO / "benchmarks" / "peers" / "cleanrl_atari.py"),
               "--env-id", f"ALE/{game}-v5", "--seconds", str(peer_seconds(args)),
               "--stop-return", f"{max(TARGETS):g}", "--num-threads", str(threads),
               "--seed", str(args.seed),
               *CLEANRL_ARGS, *args.cleanrl_arg, "--out", str(out / "cleanrl")]  # fmt: skip
    return {"rollout": rollout, "cleanrl": cleanrl}


# --- reporting ------------------------------------------------------------------------------
def _fmt(value: float | None, spec: str = "{:.0f}") -> str:
    return "n/a" if value is None else spec.format(value)


def _where(phases: dict[str, float], total: float) -> str:
    """Top-level phases as shares of iteration time; env stepping and inference are parts of
    sampling. With sampling overlapped with learning the shares add up to more than 100 %."""
    share = {k.removeprefix("time_").removesuffix("_s"): v / total for k, v in phases.items()}
    parts = [f"sample {share.get('sample', 0):.0%} (env {share.get('env_step', 0):.0%}, "
             f"inference {share.get('inference', 0):.0%})"]  # fmt: skip
    parts += [f"{k} {share[k]:.0%}" for k in ("gae", "sgd", "weight_sync") if share.get(k)]
    return ", ".join(parts)


def table(games: dict[str, dict[str, Any]], meta: dict[str, Any]) -> str:
    peer = meta.get("peer_seconds")
    peer = f" ({peer:g} s for the peer)" if peer is not None and peer != meta["seconds"] else ""
    lines = [
        f"Run {meta['date']} on {meta['machine'].get('gpu', 'no GPU')}, "
        f"{meta['machine']['cores']} cores, torch {meta['machine'].get('torch', '?')}; "
        f"budget {meta['seconds']:g} s per run{peer}. Command: `{meta['command']}`.",
        "",
        "| game | contender | time-to-18 s (env steps) | time-to-20 s (env steps) "
        "| best 100-ep mean | env steps/s end to end | bare vector env steps/s (envs, threads) "
        "| end to end / bare | GPU util % | where the time goes (share of iteration time) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for game, result in games.items():
        bare = result["bare"]
        for o in result["outcomes"]:
            cells = []
            for target in TARGETS:
                c = o["crossings"].get(f"{target:g}")
                cells.append(f"{c['t']:.0f} ({c['env_steps'] / 1e6:.2f}M)" if c else "not reached")
            ratio = (
                f"{o['steps_per_s'] / bare['env_steps_per_s']:.0%}" if o["steps_per_s"] else "n/a"
            )
            where = _where(o["phases"], o["iteration_s"] or 1.0)
            startup = f"; start-up {o['startup_s']:.0f} s" if o["startup_s"] is not None else ""
            lines.append(
                f"| {game} | {o['contender']} | {cells[0]} | {cells[1]} "
                f"| {_fmt(o['best_return'], '{:.1f}')} | {_fmt(o['steps_per_s'])} "
                f"| {bare['env_steps_per_s']:.0f} ({bare['num_envs']}, {bare['num_threads']}) "
                f"| {ratio} | {_fmt(o['gpu_util_mean'])} | {where}{startup} |"
            )
    lines.append("")
    lines.append(f"metrics.jsonl of every run: `{meta['results']}`.")
    return "\n".join(lines)


def _shown(path: Path) -> Path:
    return path.resolve().relative_to(REPO) if path.resolve().is_relative_to(REPO) else path


def write_docs(docs: Path, text: str) -> None:
    content = docs.read_text()
    if BEGIN not in content or END not in content:
        raise SystemExit(f"{docs} has no {BEGIN} ... {END} block to replace")
    head, rest = content.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    docs.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", action="append", help="Pong (default); repeat for Breakout")
    parser.add_argument("--seconds", type=float, default=330.0, help="budget per run")
    parser.add_argument("--contenders", default="rollout", help="rollout,cleanrl for both")
    parser.add_argument(
        "--peer-seconds", type=float, default=None, help="the peer's budget (default --seconds)"
    )
    parser.add_argument("--bare-seconds", type=float, default=15.0)
    parser.add_argument("--results", type=Path, default=REPO / "benchmarks/results/atari")
    parser.add_argument("--docs", type=Path, default=REPO / "docs/benchmarks.md")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--rollout-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cleanrl-arg", action="append", default=[], metavar="ARG")
    parser.add_argument("--seed", type=int, default=0, help="every contender's seed")
    parser.add_argument(
        "--keep-runs",
        action="store_true",
        help="keep each run's folder (checkpoints, logs) beside the results, for evaluation",
    )
    args = parser.parse_args(argv)
    games = args.game or ["Pong"]
    args.results.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    work = args.results / f"{stamp}-runs"
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
        "seconds": args.seconds,
        "peer_seconds": peer_seconds(args),
        "command": " ".join(["python benchmarks/atari.py", *(argv or sys.argv[1:])]),
        "results": str(_shown(args.results)),
    }
    results: dict[str, dict[str, Any]] = {}
    for game in games:
        config = rollout_config(game, args.rollout_set)
        bare = bare_env_rate(config, args.bare_seconds)
        print(f"{game}: bare vector env {bare}", flush=True)
        cmds = commands(game, args, config, work / game)
        outcomes = []
        for name in args.contenders.split(","):
            budget = args.seconds if name == "rollout" else peer_seconds(args)
            outcome = run(name, game, cmds[name], work / game / name, budget)
            src = work / game / name / "metrics.jsonl"
            dst = args.results / f"{stamp}-{game.lower()}-{name}.metrics.jsonl"
            if src.exists():
                shutil.copyfile(src, dst)
                outcome.metrics_file = dst.name
            print(f"{game} {name}: {json.dumps(asdict(outcome))}", flush=True)
            outcomes.append(asdict(outcome))
        results[game] = {"bare": bare, "outcomes": outcomes, "config": config.to_json_dict()}
    summary = {"meta": meta, "games": results}
    (args.results / f"{stamp}-summary.json").write_text(json.dumps(summary, indent=2))
    text = table(results, meta)
    print(text)
    if not args.no_docs:
        write_docs(args.docs, text)
    if args.keep_runs:
        print(f"runs kept in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)  # logs and checkpoints: the metrics are kept
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
