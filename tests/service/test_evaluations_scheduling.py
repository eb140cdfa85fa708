"""Evaluation jobs in the reconciler's queue (SQLite and PostgreSQL, scripted Ray): launched
with their own token and entrypoint, one FIFO with experiments, reserved CPUs counted, and
every way a job can end without reporting shown on the evaluation."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from app.checkpoints.models import Checkpoint
from app.core.db import SessionMaker, transaction
from app.core.errors import Forbidden
from app.evaluations import service as evaluations
from app.evaluations.scheduling import EVALUATION_RESOURCES, MISSING_GRACE_S, oldest_first
from app.evaluations.schemas import EvaluationCreate
from app.experiments import service as experiments
from app.jobs.launcher import RayJob, RayJobState
from app.jobs.resources import ClusterResources
from tests.service.test_jobs_reconciler import (
    SMALL,
    THREE_CPU,
    ScriptedRay,
    create,
    make_reconciler,
    status,
    tick,
)
from trainer.wire import ENV_EVALUATION_ID


@pytest.fixture
def ray() -> ScriptedRay:
    return ScriptedRay()


def evaluate(sessionmaker: SessionMaker, experiment_id: int, **fields: object) -> int:
    """An evaluation of the experiment's checkpoint (one is recorded if it has none)."""
    with transaction(sessionmaker) as session:
        if session.query(Checkpoint).filter_by(experiment_id=experiment_id).count() == 0:
            session.add(
                Checkpoint(
                    experiment_id=experiment_id,
                    iteration=1,
                    env_steps=100,
                    size_bytes=1,
                    sha256="0" * 64,
                    path=f"{experiment_id}/iteration-00000001.tar.gz",
                )
            )
            session.flush()
        return evaluations.create(session, experiment_id, EvaluationCreate(**fields)).id


def eval_status(sessionmaker: SessionMaker, evaluation_id: int) -> str:
    with sessionmaker() as session:
        return evaluations.get(session, evaluation_id).status.value


def evaluation_row(sessionmaker: SessionMaker, evaluation_id: int):
    with sessionmaker() as session:
        return evaluations.get(session, evaluation_id)


def test_an_evaluation_runs_as_its_own_one_cpu_job_with_its_own_token(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    exp_id = create(sessionmaker)
    with transaction(sessionmaker) as session:  # the experiment itself has ended
        experiments.transition(session, exp_id, "stopped", "test")
    eid = evaluate(sessionmaker, exp_id, episodes=3)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    row = evaluation_row(sessionmaker, eid)
    assert row.status.value == "running" and "submitted as Ray job" in row.reason
    [(submission_id, request)] = ray.submitted
    assert submission_id == row.ray_job_id and submission_id.startswith(f"rollout-eval{eid}-")
    assert request.entrypoint_module == "trainer.evaluation_job"
    assert request.extra_env == {ENV_EVALUATION_ID: str(eid)}
    assert request.resources == EVALUATION_RESOURCES and request.resources.cpus == 1.0
    assert request.job_dir == (tmp_path / "jobs" / "evaluations" / str(eid)).resolve()
    with sessionmaker() as session:
        with pytest.raises(Forbidden):
            evaluations.authorize_job(session, eid, request.claim)
        token = evaluations.redeem_job_claim(session, eid, request.claim)
        session.commit()
        assert evaluations.authorize_job(session, eid, token).id == eid
        with pytest.raises(Forbidden):
            evaluations.redeem_job_claim(session, eid, request.claim)


def test_one_fifo_queue_for_experiments_and_evaluations(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    big = create(sessionmaker, THREE_CPU)
    tick(reconciler)
    waiting = create(sessionmaker, THREE_CPU)  # 1 of 4 CPUs free: it waits
    eid = evaluate(sessionmaker, big)  # 1 CPU would fit, but it may not overtake
    tick(reconciler)
    assert (status(sessionmaker, waiting), eval_status(sessionmaker, eid)) == ("queued", "queued")

    with transaction(sessionmaker) as session:
        experiments.transition(session, big, "succeeded", "done")
    tick(reconciler)  # 4 free: the waiting experiment (3) and then the evaluation (1)
    assert (status(sessionmaker, waiting), eval_status(sessionmaker, eid)) == ("running", "running")

    # Both hold their reservations while Ray's usage lags: a 1-CPU experiment waits.
    small = create(sessionmaker, SMALL)
    tick(reconciler)
    assert status(sessionmaker, small) == "queued"
    with transaction(sessionmaker) as session:
        evaluations.transition(session, eid, "succeeded", "done")
    tick(reconciler)
    assert status(sessionmaker, small) == "running"


def test_evaluations_take_no_experiment_slot(sessionmaker: SessionMaker, tmp_path: Path) -> None:
    ray = ScriptedRay(total_cpus=64)
    reconciler = make_reconciler(sessionmaker, ray, tmp_path, max_concurrent=1)
    exp_id = create(sessionmaker)
    tick(reconciler)
    ids = [evaluate(sessionmaker, exp_id) for _ in range(3)]
    tick(reconciler)
    assert [eval_status(sessionmaker, i) for i in ids] == ["running"] * 3


def test_oldest_first_orders_by_creation_then_kind() -> None:
    from types import SimpleNamespace as NS

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    exps = [NS(id=1, created_at=t0), NS(id=2, created_at=t0 + dt.timedelta(seconds=2))]
    evals = [NS(id=1, created_at=t0 + dt.timedelta(seconds=1)), NS(id=9, created_at=t0)]
    order = oldest_first(exps, evals)
    assert [(o in exps, o.id) for o in order] == [(True, 1), (False, 9), (False, 1), (True, 2)]


@pytest.mark.parametrize(
    ("ray_state", "reason"),
    [
        (RayJobState.FAILED, "failed"),
        (RayJobState.STOPPED, "was stopped"),
        (RayJobState.SUCCEEDED, "without reporting a final status"),
    ],
)
def test_a_job_that_ended_without_reporting_fails_its_evaluation(
    sessionmaker: SessionMaker,
    ray: ScriptedRay,
    tmp_path: Path,
    ray_state: RayJobState,
    reason: str,
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    eid = evaluate(sessionmaker, create(sessionmaker, SMALL))
    tick(reconciler)
    ray.jobs[evaluation_row(sessionmaker, eid).ray_job_id] = RayJob(ray_state, "exit code 137")
    tick(reconciler)
    row = evaluation_row(sessionmaker, eid)
    assert row.status.value == "failed" and reason in row.reason
    assert row.error == "exit code 137" and row.log_tail.endswith("boom")


def test_a_job_that_reported_itself_is_left_alone(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    eid = evaluate(sessionmaker, create(sessionmaker, SMALL), episodes=1)
    tick(reconciler)
    with transaction(sessionmaker) as session:
        evaluations.transition(session, eid, "failed", "job raised", error="ValueError: x")
    ray.jobs[evaluation_row(sessionmaker, eid).ray_job_id] = RayJob(RayJobState.FAILED, "code 1")
    tick(reconciler)
    row = evaluation_row(sessionmaker, eid)
    assert (row.error, row.reason) == ("ValueError: x", "job raised")


def test_vanished_jobs_fail_after_the_grace_period(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    eid = evaluate(sessionmaker, create(sessionmaker, SMALL))
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    del ray.jobs[evaluation_row(sessionmaker, eid).ray_job_id]
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    assert eval_status(sessionmaker, eid) == "running"  # it may still be appearing
    with transaction(sessionmaker) as session:
        evaluations.get(session, eid).started_at = dt.datetime.now(dt.UTC) - dt.timedelta(
            seconds=MISSING_GRACE_S + 5
        )
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    row = evaluation_row(sessionmaker, eid)
    assert row.status.value == "failed" and "gone" in row.error


def test_a_failed_submit_or_a_cluster_too_small_fails_the_evaluation(
    sessionmaker: SessionMaker, tmp_path: Path
) -> None:
    ray = ScriptedRay()
    ray.fail_submit = True
    eid = evaluate(sessionmaker, create(sessionmaker, SMALL))
    with transaction(sessionmaker) as session:  # the experiment is not in the way
        for exp in experiments.list_experiments(session)[0]:
            experiments.transition(session, exp.id, "stopped", "test")
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    row = evaluation_row(sessionmaker, eid)
    assert row.status.value == "failed" and "dashboard down" in row.error

    tiny = ScriptedRay()
    tiny.cluster = ClusterResources(total_cpus=0.5, used_cpus=0.0)
    other = evaluate(sessionmaker, create(sessionmaker, SMALL))
    with transaction(sessionmaker) as session:
        for exp in experiments.list_experiments(session, status=[experiments.S.pending])[0]:
            experiments.transition(session, exp.id, "stopped", "test")
    tick(make_reconciler(sessionmaker, tiny, tmp_path))
    row = evaluation_row(sessionmaker, other)
    assert row.status.value == "failed" and "needs 1 CPU" in row.error
