"""The one outer training loop (trainer/loop.py): sinks, checkpoint timing, stop requests, and a
full disk that skips a checkpoint without ending the run. Serial CartPole, tiny batches."""

from __future__ import annotations

import errno
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.tmpfs import tmpfs
from trainer.algorithm import PPO, IterationResult
from trainer.config import PPOConfig
from trainer.loop import ArchiveCheckpoints, JsonlSink, ReporterSink, run_loop

BATCH = 64


def _algo(iterations: int, checkpoint_every: int = 0) -> PPO:
    return PPO(
        PPOConfig.model_validate(
            {
                "num_envs_per_env_runner": 2,
                "train_batch_size_per_learner": BATCH,
                "minibatch_size": BATCH,
                "num_epochs": 1,
                "stop": {"env_steps": iterations * BATCH},
                "checkpoint_every": checkpoint_every,
            }
        )
    )


class Recorder:
    def __init__(self) -> None:
        self.iterations: list[tuple[int, str | None]] = []
        self.checkpoints: list[tuple[int, bool]] = []

    def on_iteration(self, result: IterationResult, stop_reason: str | None) -> None:
        self.iterations.append((result.iteration, stop_reason))

    def on_checkpoint(self, path: Path, result: IterationResult, *, final: bool) -> None:
        self.checkpoints.append((result.iteration, final))


class Saver:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.saved: list[int] = []

    def save(self, algo: PPO, result: IterationResult, *, final: bool) -> Path | None:
        self.saved.append(result.iteration)
        return self.tmp / f"ckpt_{result.iteration}"


def test_the_loop_runs_to_the_stop_criterion_and_saves_when_due(tmp_path: Path) -> None:
    algo = _algo(iterations=5, checkpoint_every=2)
    recorder, saver, out = Recorder(), Saver(tmp_path), io.StringIO()
    try:
        outcome = run_loop(
            algo,
            sinks=[recorder, JsonlSink(out)],
            checkpoints=saver,
            checkpoint_every=algo.config.checkpoint_every,
        )
    finally:
        algo.stop()
    assert recorder.iterations == [(1, None), (2, None), (3, None), (4, None), (5, "env_steps")]
    assert saver.saved == [2, 4, 5]
    assert recorder.checkpoints == [(2, False), (4, False), (5, True)]
    assert outcome.reason == "env_steps" and not outcome.stop_requested
    assert outcome.checkpoint == tmp_path / "ckpt_5"
    assert outcome.last is algo.last_result and outcome.last.metrics is algo.last_metrics
    # The typed result is flattened once, into the row every sink writes (values not measured
    # yet, NaN, left out).
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    assert rows[-1]["env_steps"] == outcome.last.env_steps >= 5 * BATCH
    last = outcome.last.metrics
    assert set(rows[-1]) == {k for k, v in last.items() if math.isfinite(v)}
    assert all(isinstance(v, float) for v in last.values())
    assert last["policy_lag"] == float(outcome.last.policy_lag)


@pytest.mark.parametrize("stop_after", [None, 4])
def test_a_periodic_checkpoint_that_ends_the_run_is_the_final_one(
    tmp_path: Path, stop_after: int | None
) -> None:
    """The stop criterion (or a stop request) met on a checkpoint iteration: that checkpoint
    is the run's last and says so (the service evaluates a run's final checkpoint)."""
    algo = _algo(iterations=4 if stop_after is None else 100, checkpoint_every=2)
    recorder, saver = Recorder(), Saver(tmp_path)
    try:
        run_loop(
            algo,
            sinks=[recorder],
            checkpoints=saver,
            checkpoint_every=2,
            stop_requested=lambda: stop_after is not None and len(recorder.iterations) >= 4,
        )
    finally:
        algo.stop()
    assert saver.saved == [2, 4]
    assert recorder.checkpoints == [(2, False), (4, True)]


def test_a_stop_request_ends_after_the_iteration_with_a_final_checkpoint(tmp_path: Path) -> None:
    algo = _algo(iterations=100, checkpoint_every=2)
    recorder, saver = Recorder(), Saver(tmp_path)
    try:
        outcome = run_loop(
            algo,
            sinks=[recorder],
            checkpoints=saver,
            checkpoint_every=2,
            stop_requested=lambda: len(recorder.iterations) >= 3,
        )
    finally:
        algo.stop()
    assert [i for i, _ in recorder.iterations] == [1, 2, 3]
    assert saver.saved == [2, 3] and recorder.checkpoints == [(2, False), (3, True)]
    assert outcome.stop_requested and outcome.reason is None


def test_a_stop_request_before_the_first_iteration_trains_and_saves_nothing(
    tmp_path: Path,
) -> None:
    algo = _algo(iterations=100)
    saver = Saver(tmp_path)
    try:
        outcome = run_loop(algo, checkpoints=saver, stop_requested=lambda: True)
    finally:
        algo.stop()
    assert (outcome.last, outcome.checkpoint, saver.saved) == (None, None, [])


class FakeReporter:
    def __init__(self) -> None:
        self.rows: list[tuple[int, dict[str, float]]] = []
        self.logs: list[str] = []
        self.checkpoints: list[tuple[Path, Any]] = []

    def add_metrics(self, step: int, time_s: float, values: dict[str, float]) -> None:
        self.rows.append((step, values))

    def add_log(self, line: str) -> None:
        self.logs.append(line)

    def add_checkpoint(self, archive: Path, meta: Any) -> None:
        self.checkpoints.append((archive, meta))


def test_a_full_disk_skips_a_checkpoint_and_training_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC while packing iteration 2's archive: that checkpoint is skipped with a log line,
    its partial files removed; iterations 3 and 4 train and their checkpoints are queued."""
    import trainer.checkpoint

    real_pack = trainer.checkpoint.pack

    def pack(directory: Path, archive: Path | None = None) -> Path:
        if directory.name == "iter_000002":
            assert archive is not None
            archive.write_bytes(b"partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pack(directory, archive)

    monkeypatch.setattr(trainer.checkpoint, "pack", pack)
    algo = _algo(iterations=4, checkpoint_every=1)
    reporter = FakeReporter()
    try:
        outcome = run_loop(
            algo,
            sinks=[ReporterSink(reporter)],  # type: ignore[arg-type]
            checkpoints=ArchiveCheckpoints(tmp_path, reporter),  # type: ignore[arg-type]
            checkpoint_every=1,
        )
    finally:
        algo.stop()
    assert outcome.reason == "env_steps"
    assert [meta.iteration for _, meta in reporter.checkpoints] == [1, 3, 4]
    assert [meta.final for _, meta in reporter.checkpoints] == [False, False, True]
    # Each packed checkpoint has its CheckpointMeta beside it (for the API's salvage); the
    # skipped one left nothing.
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "iter_000001.json",
        "iter_000001.tar.gz",
        "iter_000003.json",
        "iter_000003.tar.gz",
        "iter_000004.json",
        "iter_000004.tar.gz",
    ]
    steps = [step for step, _ in reporter.rows]
    assert len(steps) == 4 and steps == sorted(steps) and steps[-1] == outcome.last.env_steps
    assert [row["env_steps"] for _, row in reporter.rows] == steps
    skipped = [line for line in reporter.logs if "skipped" in line]
    assert len(skipped) == 1 and "iteration 2" in skipped[0] and "No space" in skipped[0]
    assert reporter.logs[-1] == "final checkpoint saved at iteration 4"


def test_a_really_full_disk_skips_checkpoints_and_training_goes_on(tmp_path: Path) -> None:
    """The job dir on a 1 MB tmpfs, too small for one checkpoint of a 512-512 network (~3 MB
    with Adam's moments): torch.save's ENOSPC is an OSError, so every checkpoint is skipped
    with a log line and the run trains to its stop criterion."""
    with tmpfs(tmp_path / "disk", "1m") as disk:
        algo = PPO(
            PPOConfig.model_validate(
                {
                    "num_envs_per_env_runner": 2,
                    "train_batch_size_per_learner": BATCH,
                    "minibatch_size": BATCH,
                    "num_epochs": 1,
                    "model": {"hidden_sizes": [512, 512]},
                    "stop": {"env_steps": 3 * BATCH},
                }
            )
        )
        reporter = FakeReporter()
        try:
            outcome = run_loop(
                algo,
                sinks=[ReporterSink(reporter)],  # type: ignore[arg-type]
                checkpoints=ArchiveCheckpoints(disk, reporter),  # type: ignore[arg-type]
                checkpoint_every=1,
            )
        finally:
            algo.stop()
        assert outcome.reason == "env_steps" and len(reporter.rows) == 3
        assert reporter.checkpoints == []
        skipped = [line for line in reporter.logs if "skipped" in line]
        # The last iteration's checkpoint is tried once more as the final one.
        assert [line.split(" skipped")[0] for line in skipped] == [
            f"checkpoint of iteration {i}" for i in (1, 2, 3, 3)
        ]
        assert all("No space left" in line for line in skipped)
        assert list((disk / "checkpoints").iterdir()) == []  # no partial files left
