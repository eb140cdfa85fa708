"""The one outer training loop, with sinks: the service's job and `rollout train` both run it.

    while not stop requested:
        result = algo.train_iteration()          # typed IterationResult, flattened once
        reason = algo.stop_reason()
        every sink: on_iteration(result, reason)  # metric rows, JSONL, console, progress log
        checkpoint when due (every `checkpoint_every` iterations)
        if reason: break
    final checkpoint (unless this iteration was just saved)

As SB3 keeps `learn()` one loop and puts side jobs in callbacks and outputs in writers, the
loop knows nothing of HTTP, files or the console: a `Sink` reports an iteration somewhere
(`ReporterSink`: the service's reporter; `JsonlSink`: a local metrics.jsonl; `ConsoleSink`:
one printed line), a `CheckpointSink` saves one (`ArchiveCheckpoints`: packed for upload by
the job; `DirectoryCheckpoints`: `rollout train`'s keep-latest directory). A checkpoint sink may
skip a save (it returns None: e.g. the disk is full); training goes on.

The stop request is checked before each iteration; an iteration in progress always finishes
and the final checkpoint is then saved (SIGTERM of a job, Ctrl-C of `rollout train`).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from trainer.wire import finite_values

if TYPE_CHECKING:
    from trainer.algorithm import PPO, IterationResult
    from trainer.checkpoint_manager import CheckpointManager
    from trainer.reporter import Reporter

log = logging.getLogger(__name__)


class Sink(Protocol):
    """Where an iteration's results go. Both methods are called from the training thread."""

    def on_iteration(self, result: IterationResult, stop_reason: str | None) -> None:
        """After each iteration; `stop_reason` is the stop criterion it met, if any."""

    def on_checkpoint(self, path: Path, result: IterationResult, *, final: bool) -> None:
        """After a checkpoint of `result.iteration` was saved to `path`."""


class CheckpointSink(Protocol):
    def save(self, algo: PPO, result: IterationResult, *, final: bool) -> Path | None:
        """Save `algo` after `result`'s iteration; None when the save was skipped. `final`:
        the run ends with this checkpoint (its stop criterion was met, or it was asked to)."""


@dataclass(frozen=True)
class LoopOutcome:
    """How the loop ended. `reason` is the stop criterion met ("env_steps", ...), None when a
    stop was requested first; `checkpoint` the latest checkpoint saved (None if none)."""

    reason: str | None
    last: IterationResult | None
    checkpoint: Path | None

    @property
    def stop_requested(self) -> bool:
        return self.reason is None


def run_loop(
    algo: PPO,
    *,
    sinks: Sequence[Sink] = (),
    checkpoints: CheckpointSink | None = None,
    checkpoint_every: int = 0,
    stop_requested: Callable[[], bool] = lambda: False,
) -> LoopOutcome:
    """Train until a stop criterion is met or `stop_requested()`; returns how it ended.

    Exceptions from training or a sink propagate (the caller reports the failure); nothing
    is saved then."""
    last: IterationResult | None = None
    saved: tuple[int, Path] | None = None  # (iteration, path) of the latest checkpoint
    reason: str | None = None
    while not stop_requested():
        last = algo.train_iteration()
        reason = algo.stop_reason()
        for sink in sinks:
            sink.on_iteration(last, reason)
        if checkpoint_every and last.iteration % checkpoint_every == 0:
            ends = bool(reason) or stop_requested()
            saved = _checkpoint(algo, last, checkpoints, sinks, final=ends) or saved
        if reason:
            break
    if last is not None and (saved is None or saved[0] != last.iteration):
        saved = _checkpoint(algo, last, checkpoints, sinks, final=True) or saved
    return LoopOutcome(reason=reason, last=last, checkpoint=saved[1] if saved else None)


def _checkpoint(
    algo: PPO,
    result: IterationResult,
    checkpoints: CheckpointSink | None,
    sinks: Sequence[Sink],
    *,
    final: bool,
) -> tuple[int, Path] | None:
    if checkpoints is None:
        return None
    path = checkpoints.save(algo, result, final=final)
    if path is None:
        return None
    for sink in sinks:
        sink.on_checkpoint(path, result, final=final)
    return result.iteration, path


# --- sinks -----------------------------------------------------------------------------------
class JsonlSink:
    """Appends each iteration's flat metrics as one JSON line, flushed; values not measured yet
    (NaN) are left out (trainer/wire.py `finite_values`)."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file

    def on_iteration(self, result: IterationResult, stop_reason: str | None) -> None:
        self.file.write(json.dumps(finite_values(result.metrics)) + "\n")
        self.file.flush()

    def on_checkpoint(self, path: Path, result: IterationResult, *, final: bool) -> None:
        pass


class ConsoleSink:
    """Prints one line per iteration, formatted by `line(metrics, stop_reason)`."""

    def __init__(self, line: Callable[[dict[str, float], str | None], str]) -> None:
        self.line = line

    def on_iteration(self, result: IterationResult, stop_reason: str | None) -> None:
        print(self.line(result.metrics, stop_reason), flush=True)

    def on_checkpoint(self, path: Path, result: IterationResult, *, final: bool) -> None:
        pass


class ReporterSink:
    """The service job's sink: a metric row and a progress log line per iteration, a log line
    per checkpoint. A row's time_s is the iteration's own (`PPO`'s clock, which the job starts
    at its own start)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.best_return = -math.inf

    def on_iteration(self, result: IterationResult, stop_reason: str | None) -> None:
        self.reporter.add_metrics(result.env_steps, result.time_s, result.metrics)
        if math.isfinite(result.episode_return_mean):
            self.best_return = max(self.best_return, result.episode_return_mean)
        self.reporter.add_log(progress_line(result.metrics, self.best_return))

    def on_checkpoint(self, path: Path, result: IterationResult, *, final: bool) -> None:
        kind = "final checkpoint" if final else "checkpoint"
        self.reporter.add_log(f"{kind} saved at iteration {result.iteration}")


def progress_line(metrics: dict[str, float], best_return: float) -> str:
    """One human-readable line per iteration for the dashboard's log tail."""
    ret = metrics.get("episode_return_mean", math.nan)
    sps = metrics.get("env_steps_per_s", math.nan)
    head = f"iter {int(metrics['iteration'])} steps {int(metrics['env_steps'])}"
    if not math.isfinite(best_return):  # long episodes (Atari): minutes before the first ends
        return f"{head} return - (0 episodes finished yet) {sps:.0f} steps/s"
    return f"{head} return {ret:.1f} (best {best_return:.1f}) {sps:.0f} steps/s"


# --- checkpoint sinks ------------------------------------------------------------------------
class DirectoryCheckpoints:
    """`rollout train`: root/checkpoint_<iteration>, keep-latest (+ best) retention."""

    def __init__(self, manager: CheckpointManager) -> None:
        self.manager = manager

    def save(self, algo: PPO, result: IterationResult, *, final: bool) -> Path | None:
        return self.manager.save(algo)


class ArchiveCheckpoints:
    """The service job: save into the job dir, pack to a .tar.gz, queue it for upload (the
    reporter deletes it once stored). A full disk (ENOSPC, EDQUOT) skips this checkpoint with
    a log line and removes its partial files: training goes on, the next one is tried."""

    def __init__(self, job_dir: Path, reporter: Reporter) -> None:
        from trainer.wire import CHECKPOINTS_SUBDIR

        self.root = job_dir / CHECKPOINTS_SUBDIR
        self.reporter = reporter

    def save(self, algo: PPO, result: IterationResult, *, final: bool) -> Path | None:
        from trainer.checkpoint import pack
        from trainer.wire import CheckpointMeta, checkpoint_meta_path

        directory = self.root / f"iter_{result.iteration:06d}"
        archive = directory.with_name(directory.name + ".tar.gz")
        ret = result.episode_return_mean
        meta = CheckpointMeta(
            iteration=result.iteration,
            env_steps=result.env_steps,
            episode_return_mean=ret if math.isfinite(ret) else None,
            final=final,
        )
        sidecar = checkpoint_meta_path(archive)
        try:
            algo.save_checkpoint(directory)
            pack(directory, archive)
            # Beside the archive until it is uploaded: the API can store it from here if the
            # job cannot deliver it (app/jobs/salvage.py).
            sidecar.write_text(meta.model_dump_json())
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            archive.unlink(missing_ok=True)
            sidecar.unlink(missing_ok=True)
            message = (
                f"checkpoint of iteration {result.iteration} skipped: no space left in "
                f"{self.root} ({exc.strerror}); training goes on"
            )
            log.warning(message)
            self.reporter.add_log(message)
            return None
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        self.reporter.add_checkpoint(archive, meta)
        return archive
