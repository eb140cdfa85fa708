"""Evaluation jobs in the reconciler's queue (SQLite and PostgreSQL, scripted Ray): launched
with their own token and entrypoint, one FIFO with experiments, reserved CPUs counted, and
every way a job can end without reporting shown on the evaluation."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from app.checkpoints.models import Checkpoint
from app.core.config import JOB_NICENESS
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
    FixedLoad,
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


# --- scheduled evaluations (evaluation_every) ------------------------------------------------


def checkpoint_at(sessionmaker: SessionMaker, experiment_id: int, iteration: int) -> int | None:
    """Record a checkpoint as an upload does and return the scheduled evaluation it got."""
    from app.evaluations import periodic

    with transaction(sessionmaker) as session:
        checkpoint = Checkpoint(
            experiment_id=experiment_id,
            iteration=iteration,
            env_steps=100 * iteration,
            size_bytes=1,
            sha256="0" * 64,
            path=f"{experiment_id}/iteration-{iteration:08d}.tar.gz",
        )
        session.add(checkpoint)
        session.flush()
        exp = experiments.get(session, experiment_id)
        scheduled = periodic.on_checkpoint(session, exp, checkpoint, final=False)
        return scheduled.id if scheduled is not None else None


def test_scheduled_evaluations_take_idle_cpu_one_at_a_time_per_experiment(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    # The experiment reserves all 4 CPUs: a user's 1-CPU evaluation waits, scheduled ones not.
    full = {**SMALL, "num_env_runners": 1, "num_cpus_per_env_runner": 3.0}
    exp_id = create(sessionmaker, {**full, "checkpoint_every": 1}, evaluation_every=1)
    tick(reconciler)
    assert status(sessionmaker, exp_id) == "running"
    first, second = checkpoint_at(sessionmaker, exp_id, 1), checkpoint_at(sessionmaker, exp_id, 2)
    assert first is not None and second is not None
    users = evaluate(sessionmaker, exp_id)
    tick(reconciler)
    assert [eval_status(sessionmaker, i) for i in (first, second, users)] == [
        "queued",  # the newest checkpoint is filmed first; then one at a time
        "running",
        "queued",  # needs a CPU the experiment holds
    ]
    [(_, experiment_request), (_, request)] = ray.submitted
    assert request.resources.cpus == 0.0 and request.niceness == 19
    assert experiment_request.niceness == JOB_NICENESS < 19  # training yields to the API only
    row = evaluation_row(sessionmaker, second)
    assert row.scheduled and (row.episodes, row.record_video, row.deterministic) == (1, True, True)

    with transaction(sessionmaker) as session:
        evaluations.transition(session, second, "succeeded", "done")
    tick(reconciler)
    assert [eval_status(sessionmaker, i) for i in (first, users)] == ["running", "queued"]
    assert len(ray.submitted) == 3 and ray.submitted[-1][1].niceness == 19


def test_which_checkpoints_are_scheduled(sessionmaker: SessionMaker) -> None:
    from app.evaluations.periodic import is_due

    due = [i for i in range(1, 100) if is_due(3, 10, i, final=False)]
    assert due == [30, 60, 90]
    assert is_due(3, 10, 97, final=True)
    assert not is_due(0, 10, 30, final=True)
    assert is_due(2, 0, 7, final=True)  # checkpoints only at the end: the final one
    assert not is_due(2, 0, 7, final=False)

    exp_id = create(sessionmaker, {**SMALL, "checkpoint_every": 10}, evaluation_every=3)
    assert checkpoint_at(sessionmaker, exp_id, 10) is None
    assert checkpoint_at(sessionmaker, exp_id, 30) is not None


def test_scheduled_evaluations_wait_while_the_machine_has_no_idle_core(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    load = FixedLoad(idle=False)
    reconciler = make_reconciler(sessionmaker, ray, tmp_path, load=load)
    exp_id = create(sessionmaker, {**SMALL, "checkpoint_every": 1}, evaluation_every=1)
    tick(reconciler)
    scheduled = checkpoint_at(sessionmaker, exp_id, 1)
    users = evaluate(sessionmaker, exp_id)
    assert scheduled is not None
    tick(reconciler)  # busy: the user's evaluation starts, the scheduled one waits
    assert [eval_status(sessionmaker, i) for i in (scheduled, users)] == ["queued", "running"]
    load.idle = True
    tick(reconciler)
    assert eval_status(sessionmaker, scheduled) == "running"


def test_idle_cores_are_read_from_proc_stat() -> None:
    from app.jobs.node_load import IdleCores

    gate = IdleCores(min_idle=1.0)
    assert gate.known
    time.sleep(0.6)
    idle = gate.sample()
    assert idle is not None and 0.0 <= idle <= gate.cores
    assert IdleCores(min_idle=0).allows_background_work()


def test_idle_cores_average_over_a_window_and_forget_stale_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two cores, 100 ticks per core-second: busy (0.2 cores idle) holds background work, a
    window of idleness lets it start, and after a gap without samples it waits again."""
    from app.jobs import node_load

    clock = {"t": 0.0, "idle": 0, "total": 0}
    monkeypatch.setattr(node_load.time, "monotonic", lambda: clock["t"])
    monkeypatch.setattr(node_load, "_ticks", lambda: (clock["idle"], clock["total"]))

    def advance(seconds: int, idle_cores: float) -> None:
        for _ in range(seconds):
            clock["t"] += 1.0
            clock["idle"] += int(100 * idle_cores)
            clock["total"] += 200
            gate.record()

    gate = node_load.IdleCores(min_idle=1.0, cores=2)
    assert not gate.allows_background_work()  # no history yet
    advance(5, idle_cores=0.2)
    assert gate.sample() == pytest.approx(0.2) and not gate.allows_background_work()
    advance(1, idle_cores=2.0)  # one idle second inside a busy window is not enough
    assert not gate.allows_background_work()
    advance(3, idle_cores=1.5)
    assert gate.sample() == pytest.approx(1.5) and gate.allows_background_work()
    clock["t"] += 30  # no tick for a while: the window says nothing of the last seconds
    clock["idle"] += 3000
    clock["total"] += 6000
    assert not gate.allows_background_work()


def test_idle_cores_read_proc_stat_once_per_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconciler records a sample each tick and then asks whether background work may
    start: the question in the same tick reuses that sample."""
    from app.jobs import node_load

    clock = {"t": 0.0, "reads": 0}
    monkeypatch.setattr(node_load.time, "monotonic", lambda: clock["t"])

    def ticks() -> tuple[int, int]:
        clock["reads"] += 1
        return clock["reads"] * 100, clock["reads"] * 200

    monkeypatch.setattr(node_load, "_ticks", ticks)
    gate = node_load.IdleCores(min_idle=1.0, cores=2)
    assert clock["reads"] == 1
    for _ in range(3):
        clock["t"] += 1.0
        gate.record()
        gate.allows_background_work()
    assert clock["reads"] == 4
    assert gate.sample() == pytest.approx(1.0)


def test_once_the_run_ended_its_scheduled_evaluations_run_like_any_other(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    """No idle core (the machine is busy) holds a scheduled evaluation only while its run
    trains; its queued reason says so. After the run, it reserves a CPU and starts."""
    load = FixedLoad(idle=False)
    reconciler = make_reconciler(sessionmaker, ray, tmp_path, load=load)
    exp_id = create(sessionmaker, {**SMALL, "checkpoint_every": 1}, evaluation_every=1)
    tick(reconciler)
    scheduled = checkpoint_at(sessionmaker, exp_id, 1)
    assert scheduled is not None
    tick(reconciler)
    row = evaluation_row(sessionmaker, scheduled)
    assert row.status.value == "queued" and "idle core" in row.reason
    with transaction(sessionmaker) as session:
        experiments.transition(session, exp_id, "succeeded", "done")
    tick(reconciler)
    assert eval_status(sessionmaker, scheduled) == "running"
    request = ray.submitted[-1][1]
    assert request.resources.cpus == 1.0 and request.niceness == 0
