"""`rollout train` and `rollout evaluate`: run the trainer locally, without the service.

    rollout train [--config FILE] [--env ID] [--set key=value ...] [--stop-return R]
                  [--stop-steps N] [--stop-seconds S] [--seed S] --out DIR
    rollout train --resume CHECKPOINT [--set ...] [--stop-...] --out DIR
    rollout train ... --out DIR --overwrite     (replace the run DIR holds)
    rollout evaluate CHECKPOINT --episodes N [--seed S] [--stochastic] [--video out.webm|out.mp4]

The config is resolved first (PPOConfig defaults < the env family's preset < the file and the
flags, trainer/resolve.py); the resolved config is printed, with the preset and the fields it
set, and saved as OUT/config.json.

Exit codes: 0 a stop criterion was met, 2 invalid config or arguments, 130 interrupted by
Ctrl-C (a final checkpoint is saved first), 1 anything else.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainer.config import PPOConfig
from trainer.field_names import config_error_message
from trainer.inputs import CliError, add_stop_flags, parse_assignments, read_config, stop_overrides
from trainer.resolve import Resolution, deep_merge, resolve_config


def _process_start() -> float:
    """time.monotonic() at process start, so `time_s` includes interpreter start and imports."""
    try:
        import psutil

        return time.monotonic() - (time.time() - psutil.Process().create_time())
    except Exception:  # psutil missing or /proc unreadable: count from here
        return time.monotonic()


PROCESS_START = _process_start()
EXIT_OK, EXIT_ERROR, EXIT_CONFIG, EXIT_INTERRUPTED = 0, 1, 2, 130


def main(argv: list[str]) -> int:
    """`python -m trainer.cli train|evaluate ...`: the same commands as `rollout train|evaluate`
    (the same `register`), without the service's packages."""
    parser = argparse.ArgumentParser(prog="rollout", description="Train and evaluate PPO.")
    register(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return EXIT_CONFIG if exc.code else EXIT_OK
    try:
        return args.handler(args)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code


def register(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser | None = None
) -> None:
    """Add `train` and `evaluate` to a `rollout` parser; each sets `handler(args) -> exit code`.

    Parsing loads no torch (app/cli.py builds the whole `rollout` tree with this): the handlers
    import the trainer when they run."""
    parents = [common] if common is not None else []
    train = sub.add_parser(
        "train", parents=parents, help="train a PPO policy locally, without the service"
    )
    train.set_defaults(handler=run_train)
    train.add_argument("--config", type=Path, help="JSON or YAML file with PPOConfig fields")
    train.add_argument("--resume", type=Path, help="checkpoint directory or .tar.gz to resume")
    train.add_argument("--env", help="gymnasium env id (env_id)")
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a field; dotted keys (stop.env_steps=1e5); value parsed as JSON",
    )
    add_stop_flags(train)
    train.add_argument("--seed", type=int)
    train.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output directory; must be empty or new unless --resume or --overwrite",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run in --out (its config.json, metrics.jsonl and checkpoints/)",
    )
    evaluate = sub.add_parser(
        "evaluate", parents=parents, help="evaluate a checkpoint locally, without the service"
    )
    evaluate.set_defaults(handler=run_evaluate)
    evaluate.add_argument("checkpoint", type=Path, help="checkpoint directory or .tar.gz")
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument(
        "--stochastic", action="store_true", help="sample actions instead of the mode"
    )
    evaluate.add_argument(
        "--video", type=Path, help="record the first episode to this .webm (VP9) or .mp4 (H.264)"
    )


def run_train(args: argparse.Namespace) -> int:
    _prepare_process()
    return _train(args)


def run_evaluate(args: argparse.Namespace) -> int:
    _prepare_process()
    return _evaluate(args)


def _prepare_process() -> None:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    _import_from_working_dir()


def _import_from_working_dir() -> None:
    """Let `--env mymodule:MyEnv-v0` find a user's own env module in the working directory, as
    `python -m` would (a console script's sys.path starts at its bin dir instead). Appended, so
    a file there never shadows an installed package. Ray actors get the driver's working
    directory on their path too."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)


# --- config ----------------------------------------------------------------------------------
def build_config(base: dict[str, Any], args: argparse.Namespace) -> Resolution:
    """Overlay the command-line overrides on `base`; resolve its preset and validate."""
    overrides: dict[str, Any] = {}
    if getattr(args, "env", None):
        overrides["env_id"] = args.env
    if args.seed is not None:
        overrides["seed"] = args.seed
    stop = stop_overrides(args)
    if stop:
        overrides["stop"] = stop
    data = deep_merge(deep_merge(base, overrides), parse_assignments(args.set))
    if "num_gpus_per_learner" not in data and not data.get("num_learners") and _cuda_available():
        # Like SB3's device="auto": a local run learns on the machine's GPU unless told not to.
        data["num_gpus_per_learner"] = 1
    try:
        return resolve_config(data)
    except ValidationError as exc:
        lines = [
            f"  {'.'.join(str(p) for p in err['loc']) or '(config)'}: {config_error_message(err)}"
            for err in exc.errors()
        ]
        raise CliError("invalid config:\n" + "\n".join(lines)) from None


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def describe_resolution(resolution: Resolution, saved_to: Path) -> str:
    """The preset line, the fields it set with their values, then the whole resolved config."""
    config = resolution.config.to_json_dict()
    lines = [resolution.summary()]
    for path in resolution.fields:
        value: Any = config
        for part in path.split("."):
            value = value[part]
        lines.append(f"  {path} = {json.dumps(value)}")
    if resolution.config.num_gpus_per_learner > 0 and resolution.config.num_learners == 0:
        lines.append(
            f"learner on the GPU ({resolution.config.learner_precision}), policy inference "
            f"{resolution.config.inference_device}; --set num_gpus_per_learner=0 keeps both on "
            "the CPU"
        )
    lines.append(f"resolved config (saved to {saved_to}):")
    lines.append(json.dumps(config, indent=2))
    return "\n".join(lines)


def _check_env(config: PPOConfig) -> None:
    from trainer.envs import env_spaces

    try:
        env_spaces(config.env_id, config.env_config)
    except Exception as exc:  # unknown id, bad kwargs, unsupported spaces
        raise CliError(f"environment {config.env_id!r}: {exc}") from None


# --- train -----------------------------------------------------------------------------------
def _train(args: argparse.Namespace) -> int:
    out: Path = args.out
    resume = args.resume is not None
    # The config, the env and --out are checked before the seconds of torch imports and
    # building a run take: a refused command answers at once.
    if resume:
        if args.config is not None or args.env:
            raise CliError("--resume takes the checkpoint's config; use --set to change it")
        from trainer.checkpoint import load

        try:
            saved, _ = load(args.resume)
        except (FileNotFoundError, ValueError) as exc:
            raise CliError(str(exc)) from None
        resolution = build_config(saved.to_json_dict(), args)
    else:
        base = read_config(args.config) if args.config else {}
        resolution = build_config(base, args)
    config = resolution.config
    _check_env(config)
    _check_out(out, resume=resume, overwrite=args.overwrite)
    from trainer.algorithm import PPO
    from trainer.checkpoint_manager import CheckpointManager
    from trainer.loop import ConsoleSink, DirectoryCheckpoints, JsonlSink, run_loop

    _prepare_out(out, overwrite=args.overwrite)
    (out / "config.json").write_text(json.dumps(config.to_json_dict(), indent=2))
    print(describe_resolution(resolution, out / "config.json"), flush=True)
    if args.resume is not None:
        algo = PPO.from_checkpoint(args.resume, config, start_time=PROCESS_START)
    else:
        algo = PPO(config, start_time=PROCESS_START)
    manager = CheckpointManager(out / "checkpoints", config.keep_checkpoints)
    interrupted = _InterruptFlag()
    progress = _Progress(config)
    try:
        with (out / "metrics.jsonl").open("a") as metrics_file:
            outcome = run_loop(
                algo,
                sinks=(JsonlSink(metrics_file), ConsoleSink(progress.line)),
                checkpoints=DirectoryCheckpoints(manager),
                checkpoint_every=config.checkpoint_every,
                stop_requested=lambda: interrupted.set,
            )
    finally:
        interrupted.restore()
        algo.stop()
    if outcome.stop_requested:
        print(f"interrupted; checkpoint {outcome.checkpoint}", flush=True)
        return EXIT_INTERRUPTED
    print(f"stopped: {outcome.reason} reached; checkpoint {outcome.checkpoint}", flush=True)
    return EXIT_OK


RUN_FILES = ("config.json", "metrics.jsonl", "checkpoints")


def _check_out(out: Path, *, resume: bool, overwrite: bool) -> None:
    """A fresh run in a used directory would append to its metrics.jsonl (iterations 157 then
    1, 2, ...) and its new checkpoints would lose to the old, later ones under keep-latest; so
    a non-empty --out needs --resume (continue it: iterations go on from the checkpoint) or
    --overwrite (its run files are removed first)."""
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {out} is a file, not a directory")
    if overwrite and resume:
        raise CliError("--overwrite and --resume exclude each other")
    used = out.is_dir() and any(out.iterdir())
    if used and not overwrite and not resume:
        held = sorted(p.name for p in out.iterdir())
        listed = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
        raise CliError(
            f"--out {out} is not empty (it holds {listed}); "
            "choose a new directory, continue its run with --resume CHECKPOINT, "
            "or replace it with --overwrite"
        )


def _prepare_out(out: Path, *, overwrite: bool) -> None:
    """Create --out; with --overwrite remove the run files it holds (after _check_out and once
    the config is valid, so a refused run removes nothing)."""
    if overwrite and out.is_dir():
        import shutil

        for name in RUN_FILES:
            path = out / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    out.mkdir(parents=True, exist_ok=True)


class _InterruptFlag:
    """First Ctrl-C: finish the iteration, save, exit 130. Second Ctrl-C: stop at once."""

    def __init__(self) -> None:
        self.set = False
        self._previous = signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        if self.set:
            raise KeyboardInterrupt
        self.set = True
        print("\nCtrl-C: saving a checkpoint after this iteration", file=sys.stderr, flush=True)

    def restore(self) -> None:
        signal.signal(signal.SIGINT, self._previous)


class _Progress:
    """One line per iteration, with an ETA toward the nearest stop criterion."""

    def __init__(self, config: PPOConfig) -> None:
        self.stop = config.stop
        self._history: deque[tuple[float, float]] = deque(maxlen=20)  # (time_s, return)

    def line(self, m: dict[str, float], reason: str | None) -> str:
        ret = m["episode_return_mean"]
        self._history.append((m["time_s"], ret))
        ret_text = "n/a" if math.isnan(ret) else f"{ret:.1f}"
        eta = "done" if reason else self._eta(m)
        return (
            f"iter {int(m['iteration'])} | steps {int(m['env_steps']):,} | return {ret_text} "
            f"| {m['env_steps_per_s']:,.0f} steps/s | ETA {eta}"
        )

    def _eta(self, m: dict[str, float]) -> str:
        etas: list[tuple[float, str]] = []
        now = m["time_s"]
        rate = m["env_steps"] / max(now, 1e-9)
        if self.stop.env_steps is not None and rate > 0:
            etas.append(((self.stop.env_steps - m["env_steps"]) / rate, "env_steps"))
        if self.stop.wall_seconds is not None:
            etas.append((self.stop.wall_seconds - now, "wall_seconds"))
        target = self.stop.episode_return_mean
        if target is not None and len(self._history) >= 2:
            (t0, r0), (t1, r1) = self._history[0], self._history[-1]
            if not (math.isnan(r0) or math.isnan(r1)) and r1 > r0 and t1 > t0:
                etas.append(((target - r1) / ((r1 - r0) / (t1 - t0)), "episode_return_mean"))
        if not etas:
            return "?"
        seconds, name = min(etas)
        return f"{max(seconds, 0):.0f}s ({name})"


# --- evaluate --------------------------------------------------------------------------------
def _evaluate(args: argparse.Namespace) -> int:
    from trainer.evaluation import evaluate
    from trainer.video import video_format

    if args.episodes < 1:
        raise CliError("--episodes must be at least 1")
    if args.video is not None:
        try:
            video_format(args.video)
        except ValueError as exc:
            raise CliError(str(exc)) from None
    try:
        result = evaluate(
            args.checkpoint,
            args.episodes,
            seed=args.seed,
            deterministic=not args.stochastic,
            video=args.video,
        )
    except (FileNotFoundError, ValueError) as exc:
        raise CliError(str(exc)) from None
    report: dict[str, Any] = {
        "episodes": args.episodes,
        "return_mean": result.mean,
        "return_std": result.std,
        "returns": result.returns,
        "lengths": result.lengths,
    }
    if args.video is not None:
        report["video"] = result.video.to_dict() if result.video else None
        if result.video_message:
            report["video_message"] = result.video_message
            print(f"warning: no video: {result.video_message}", file=sys.stderr)
        else:
            print(f"video: {args.video}", file=sys.stderr)
    print(json.dumps(report))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
