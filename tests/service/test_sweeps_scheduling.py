"""Sweep members go through the reconciler's one FIFO queue, at most `max_parallel` of a sweep
at once, without holding up the work queued behind them (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.db import SessionMaker, transaction
from app.sweeps import service as sweeps
from app.sweeps.schemas import SweepCreate
from tests.service.test_jobs_reconciler import (
    SMALL,
    ScriptedRay,
    create,
    make_reconciler,
    status,
    tick,
)


@pytest.fixture
def ray() -> ScriptedRay:
    return ScriptedRay()


def _sweep(sessionmaker: SessionMaker, seeds: list[int], max_parallel: int) -> list[int]:
    body = SweepCreate(name="s", config=SMALL, seeds=seeds, max_parallel=max_parallel)
    with transaction(sessionmaker) as session:
        sweep = sweeps.create(session, body)
        return [e.id for e in sweeps.members(session, sweep.id)]


def _finish(sessionmaker: SessionMaker, exp_id: int) -> None:
    from app.experiments import service

    with transaction(sessionmaker) as session:
        service.transition(session, exp_id, "succeeded", "test: done")


def test_max_parallel_caps_a_sweep_and_later_work_still_starts(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    ray.cluster = type(ray.cluster)(total_cpus=8.0, used_cpus=0.0)
    members = _sweep(sessionmaker, [0, 1, 2, 3], max_parallel=2)
    later = create(sessionmaker)  # a plain experiment queued after the sweep
    reconciler = make_reconciler(sessionmaker, ray, tmp_path, max_concurrent=8)
    tick(reconciler)
    tick(reconciler)
    assert [status(sessionmaker, m) for m in members] == ["running", "running", "queued", "queued"]
    assert status(sessionmaker, later) == "running"  # not held up by the capped members
    _finish(sessionmaker, members[0])
    tick(reconciler)
    assert [status(sessionmaker, m) for m in members] == [
        "succeeded", "running", "running", "queued"
    ]  # fmt: skip
    launched = [request.experiment_id for _, request in ray.submitted]
    assert launched == [members[0], members[1], later, members[2]]


def test_members_wait_for_resources_in_fifo_order(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    """A member that does not fit holds the queue like any experiment would."""
    ray.cluster = type(ray.cluster)(total_cpus=2.0, used_cpus=0.0)  # 1-CPU members: two fit
    members = _sweep(sessionmaker, [0, 1, 2], max_parallel=3)
    later = create(sessionmaker)
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    tick(reconciler)
    assert [status(sessionmaker, m) for m in members] == ["running", "running", "queued"]
    assert status(sessionmaker, later) == "queued"
