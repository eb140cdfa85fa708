"""The reconciler's decisions (queue, Ray job outcomes, stops, restarts) on a real migrated
database (SQLite and PostgreSQL), against a scripted stand-in for the Ray Jobs API."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from app.core.config import Settings
from app.core.db import SessionMaker, transaction
from app.core.errors import Forbidden
from app.experiments import service
from app.experiments.schemas import ExperimentCreate
from app.jobs.launcher import JobRequest, RayJob, RayJobState, RayUnavailable
from app.jobs.reconciler import MISSING_GRACE_S, Budgets, Reconciler, snapshots
from app.jobs.resources import ClusterResources, JobResources
from tests.service.conftest import store_raw_config
from trainer.config import PPOConfig

SMALL = {"env_id": "CartPole-v1", "stop": {"env_steps": 1000}}  # 1 CPU (in-process driver)
THREE_CPU = {**SMALL, "num_env_runners": 1, "num_cpus_per_env_runner": 2.0}


class ScriptedRay:
    """Records submissions and stops; job states and cluster usage are set by each test."""

    def __init__(self, total_cpus: float = 4.0, used_cpus: float = 0.0) -> None:
        self.stop_grace_s = 5.0
        self.cluster = ClusterResources(total_cpus=total_cpus, used_cpus=used_cpus)
        self.jobs: dict[str, RayJob] = {}
        self.submitted: list[tuple[str, JobRequest]] = []
        self.stopped: list[str] = []
        self.logs = "line 1\nline 2\nboom"
        self.fail_submit = False

    async def ensure_connected(self) -> None:
        return None

    async def submit(self, submission_id: str, request: JobRequest) -> str:
        if self.fail_submit:
            raise RayUnavailable("dashboard down")
        self.submitted.append((submission_id, request))
        self.jobs[submission_id] = RayJob(RayJobState.RUNNING)
        return submission_id

    async def stop(self, submission_id: str) -> bool:
        self.stopped.append(submission_id)
        return submission_id in self.jobs

    async def job(self, submission_id: str) -> RayJob:
        return self.jobs.get(submission_id, RayJob(RayJobState.MISSING, "Ray job is gone"))

    async def log_tail(self, submission_id: str, lines: int = 100) -> str:
        return self.logs

    async def cluster_resources(self) -> ClusterResources | None:
        return self.cluster


@pytest.fixture
def ray() -> ScriptedRay:
    return ScriptedRay()


class FixedLoad:
    """This machine's idle cores as a test sets them (the real figure would make it flaky)."""

    def __init__(self, idle: bool = True) -> None:
        self.idle = idle

    def record(self) -> None:
        pass

    def allows_background_work(self) -> bool:
        return self.idle


def make_reconciler(
    sessionmaker: SessionMaker,
    ray: ScriptedRay,
    tmp_path: Path,
    max_concurrent: int = 4,
    load: FixedLoad | None = None,
) -> Reconciler:
    settings = Settings(
        data_dir=tmp_path, port=8123, max_concurrent_experiments=max_concurrent, jobs_enabled=True
    )
    idle = load or FixedLoad()
    return Reconciler(settings, sessionmaker, ray, idle_cores=idle)  # type: ignore[arg-type]


def create(
    sessionmaker: SessionMaker, config: dict[str, Any] = SMALL, evaluation_every: int = 0
) -> int:
    body = ExperimentCreate(name="x", config=config, evaluation_every=evaluation_every)
    with transaction(sessionmaker) as session:
        return service.create(session, body).id


def status(sessionmaker: SessionMaker, exp_id: int) -> str:
    with sessionmaker() as session:
        return service.get(session, exp_id).status.value


def detail(sessionmaker: SessionMaker, exp_id: int) -> tuple[Any, list[Any]]:
    with sessionmaker() as session:
        return service.get(session, exp_id), service.events(session, exp_id)


def tick(reconciler: Reconciler) -> None:
    asyncio.run(reconciler.tick())


def job_id(sessionmaker: SessionMaker, exp_id: int) -> str:
    with sessionmaker() as session:
        rid = service.get(session, exp_id).ray_job_id
    assert rid is not None
    return rid


def test_resources_budget_driver_and_actors_together() -> None:
    serial = JobResources.of(PPOConfig.model_validate(SMALL))
    assert (serial.cpus, serial.gpus) == (1.0, 0.0)
    three = JobResources.of(PPOConfig.model_validate(THREE_CPU))
    assert three.cpus == 3.0
    remote = PPOConfig.model_validate(
        {**SMALL, "num_env_runners": 4, "num_cpus_per_env_runner": 0.5, "num_learners": 2}
        | {"num_gpus_per_learner": 1.0}
    )
    need = JobResources.of(remote)
    assert need.driver_cpus < 1.0  # it only coordinates
    assert need.cpus == need.driver_cpus + 4 * 0.5 + 2 * 1.0
    assert need.gpus == 2.0


def test_new_experiments_are_queued_and_launched_with_a_fresh_token(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    exp_id = create(sessionmaker)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    exp, events = detail(sessionmaker, exp_id)
    assert [e.to_status for e in events] == ["pending", "queued", "running"]
    assert "submitted as Ray job" in events[-1].reason
    [(submission_id, request)] = ray.submitted
    assert exp.ray_job_id == submission_id
    assert request.api_url == "http://127.0.0.1:8123"
    assert request.job_dir == (tmp_path / "jobs" / str(exp_id)).resolve()
    # The job gets a one-time claim, not a token: it redeems it once for the experiment's own.
    with sessionmaker() as session:
        with pytest.raises(Forbidden):
            service.authorize_job(session, exp_id, request.claim)
        token = service.redeem_job_claim(session, exp_id, request.claim)
        session.commit()
        assert service.authorize_job(session, exp_id, token).id == exp_id
        with pytest.raises(Forbidden):
            service.redeem_job_claim(session, exp_id, request.claim)


def test_experiments_wait_while_they_do_not_fit_and_start_in_order(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    first, second, small = (
        create(sessionmaker, THREE_CPU),
        create(sessionmaker, THREE_CPU),
        create(sessionmaker, SMALL),
    )
    tick(reconciler)
    # 3 of 4 CPUs reserved: the second waits, and the small one may not overtake it.
    assert [status(sessionmaker, i) for i in (first, second, small)] == [
        "running",
        "queued",
        "queued",
    ]
    ray.cluster = ClusterResources(total_cpus=4, used_cpus=0.5)  # Ray lags our reservation
    tick(reconciler)
    assert status(sessionmaker, second) == "queued"

    with transaction(sessionmaker) as session:  # the first job reports its end
        service.transition(session, first, "succeeded", "stop criterion met")
    ray.jobs[job_id(sessionmaker, first)] = RayJob(RayJobState.SUCCEEDED)
    ray.cluster = ClusterResources(total_cpus=4, used_cpus=0.0)
    tick(reconciler)
    assert [status(sessionmaker, i) for i in (second, small)] == ["running", "running"]


def test_other_users_of_the_cluster_hold_experiments_back(
    sessionmaker: SessionMaker, tmp_path: Path
) -> None:
    ray = ScriptedRay(total_cpus=4, used_cpus=3.5)
    exp_id = create(sessionmaker)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    assert status(sessionmaker, exp_id) == "queued"


def test_concurrency_cap(sessionmaker: SessionMaker, tmp_path: Path) -> None:
    ray = ScriptedRay(total_cpus=64)
    ids = [create(sessionmaker) for _ in range(3)]
    tick(make_reconciler(sessionmaker, ray, tmp_path, max_concurrent=2))
    assert [status(sessionmaker, i) for i in ids] == ["running", "running", "queued"]


def test_an_experiment_bigger_than_the_cluster_fails_with_a_clear_error(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    exp_id = create(sessionmaker, {**SMALL, "num_env_runners": 8})
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    exp, _ = detail(sessionmaker, exp_id)
    assert exp.status.value == "failed"
    assert "needs 9 CPU" in exp.error and "4 CPU" in exp.error
    assert ray.submitted == []


def test_a_failed_submit_fails_the_experiment(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    ray.fail_submit = True
    exp_id = create(sessionmaker)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    exp, _ = detail(sessionmaker, exp_id)
    assert exp.status.value == "failed" and "dashboard down" in exp.error


@pytest.mark.parametrize(
    ("ray_state", "expected", "reason"),
    [
        (RayJobState.FAILED, "failed", "failed"),
        (RayJobState.STOPPED, "stopped", "was stopped before it reported"),
        (RayJobState.SUCCEEDED, "succeeded", "without reporting a final status"),
    ],
)
def test_a_job_that_ended_without_reporting_ends_its_experiment(
    sessionmaker: SessionMaker,
    ray: ScriptedRay,
    tmp_path: Path,
    ray_state: RayJobState,
    expected: str,
    reason: str,
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    exp_id = create(sessionmaker)
    tick(reconciler)
    ray.jobs[job_id(sessionmaker, exp_id)] = RayJob(ray_state, "exit code 137")
    tick(reconciler)
    exp, events = detail(sessionmaker, exp_id)
    assert exp.status.value == expected
    assert reason in events[-1].reason
    assert exp.log_tail.endswith("boom")
    if expected == "failed":
        assert exp.error == "exit code 137"


def test_a_job_that_reported_itself_is_left_alone(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    exp_id = create(sessionmaker)
    tick(reconciler)
    with transaction(sessionmaker) as session:
        service.transition(session, exp_id, "failed", "job raised", error="ValueError: x")
    ray.jobs[job_id(sessionmaker, exp_id)] = RayJob(RayJobState.FAILED, "exit code 1")
    tick(reconciler)
    exp, events = detail(sessionmaker, exp_id)
    assert exp.error == "ValueError: x" and events[-1].reason == "job raised"


def test_stop_is_sent_resent_and_given_up_after_the_grace_period(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    exp_id = create(sessionmaker)
    tick(reconciler)
    with transaction(sessionmaker) as session:
        service.request_stop(session, exp_id)
    asyncio.run(reconciler.request_stop(exp_id))
    rid = job_id(sessionmaker, exp_id)
    assert ray.stopped == [rid]
    tick(reconciler)
    assert status(sessionmaker, exp_id) == "stopping"  # the job is still saving
    ray.stop_grace_s = -11.0  # the grace period is over
    tick(reconciler)
    exp, events = detail(sessionmaker, exp_id)
    assert exp.status.value == "stopped"
    assert "did not end within" in events[-1].reason
    assert ray.stopped.count(rid) >= 2


def test_after_a_restart_running_jobs_stay_and_vanished_jobs_fail(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    alive, gone = create(sessionmaker), create(sessionmaker)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    del ray.jobs[job_id(sessionmaker, gone)]  # e.g. the Ray cluster was restarted
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=MISSING_GRACE_S + 5)
    with transaction(sessionmaker) as session:
        service.get(session, gone).started_at = long_ago

    tick(make_reconciler(sessionmaker, ray, tmp_path))  # a new API process
    assert status(sessionmaker, alive) == "running"
    exp, _ = detail(sessionmaker, gone)
    assert exp.status.value == "failed"
    assert "does not exist" in exp.error or "gone" in exp.error


def test_a_just_claimed_experiment_is_not_failed_while_its_job_appears(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    exp_id = create(sessionmaker)
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    del ray.jobs[job_id(sessionmaker, exp_id)]
    tick(make_reconciler(sessionmaker, ray, tmp_path))
    assert status(sessionmaker, exp_id) == "running"


def test_two_api_processes_never_launch_an_experiment_twice(
    sessionmaker: SessionMaker, tmp_path: Path
) -> None:
    ray = ScriptedRay(total_cpus=64)
    ids = [create(sessionmaker) for _ in range(4)]
    first, second = (make_reconciler(sessionmaker, ray, tmp_path) for _ in range(2))

    async def both() -> None:
        # SQLite may refuse one of two concurrent writers (the other process retries next tick).
        await asyncio.gather(first.tick(), second.tick(), return_exceptions=True)
        await asyncio.gather(first.tick(), second.tick(), return_exceptions=True)

    asyncio.run(both())
    launched = [request.experiment_id for _, request in ray.submitted]
    assert sorted(launched) == ids
    assert all(status(sessionmaker, i) == "running" for i in ids)


def corrupt_config(sessionmaker: SessionMaker, exp_id: int, config: Any) -> None:
    """What an older version with looser bounds (or a hand edit) may have stored."""
    store_raw_config(sessionmaker, exp_id, config)


def test_an_invalid_stored_config_fails_its_experiment_and_the_others_go_on(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    running = create(sessionmaker)
    tick(reconciler)
    assert status(sessionmaker, running) == "running"
    first, broken, garbage, last = (create(sessionmaker) for _ in range(4))
    huge = {**SMALL, "train_batch_size_per_learner": 2_000_000_000, "model": {"hidden_sizes": [0]}}
    corrupt_config(sessionmaker, broken, huge)
    corrupt_config(sessionmaker, garbage, {"env_id": 5, "stop": "soon", "seed": "x" * 10_000})
    # A running experiment's stored config went bad too: it is still watched.
    corrupt_config(sessionmaker, running, {**SMALL, "num_env_runners": "two", "lr": -1})
    tick(reconciler)
    exp, events = detail(sessionmaker, broken)
    assert exp.status.value == "failed" and events[-1].reason == "invalid config"
    assert "config.train_batch_size_per_learner" in exp.error
    assert "config.model.hidden_sizes" in exp.error
    assert status(sessionmaker, garbage) == "failed"
    assert len(detail(sessionmaker, garbage)[0].error) < 3000  # the problems, not the values
    assert (status(sessionmaker, first), status(sessionmaker, last)) == ("running", "running")
    assert len(ray.submitted) == 3
    ray.jobs[job_id(sessionmaker, running)] = RayJob(RayJobState.SUCCEEDED)
    tick(reconciler)
    assert status(sessionmaker, running) == "succeeded"


def test_each_budget_is_worked_out_from_its_config_once(sessionmaker: SessionMaker) -> None:
    """Ticks read the unfinished experiments' configs only when they are new to the process;
    a finished experiment's budget is forgotten."""
    ids = [create(sessionmaker) for _ in range(3)]
    big = create(sessionmaker, {**SMALL, "num_env_runners": 3})
    config_reads: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "experiments.config" in statement:
            config_reads.append(statement)

    budgets = Budgets()
    with sessionmaker() as session:
        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", count)
        try:
            first = snapshots(session, budgets)
            assert len(config_reads) == 1  # the four configs, in one query
            again = snapshots(session, budgets)
            assert len(config_reads) == 1  # nothing read again
        finally:
            event.remove(engine, "before_cursor_execute", count)
    assert [s.resources for s in again] == [s.resources for s in first]
    assert [s.id for s in first] == [*ids, big]
    assert first[-1].resources.cpus == first[0].resources.cpus + 3
    with transaction(sessionmaker) as session:
        for target in ("queued", "running", "succeeded"):
            service.transition(session, big, target, "test")
    with sessionmaker() as session:
        assert [s.id for s in snapshots(session, budgets)] == ids
    assert set(budgets._known) == set(ids)


def test_one_experiment_failing_its_check_does_not_stop_the_others(
    sessionmaker: SessionMaker, ray: ScriptedRay, tmp_path: Path
) -> None:
    reconciler = make_reconciler(sessionmaker, ray, tmp_path)
    a, b = create(sessionmaker), create(sessionmaker)
    tick(reconciler)
    ray.jobs[job_id(sessionmaker, a)] = RayJob(RayJobState.FAILED, "boom")
    ray.jobs[job_id(sessionmaker, b)] = RayJob(RayJobState.FAILED, "boom")

    async def broken_log_tail(submission_id: str, lines: int = 100) -> str:
        if submission_id == job_id(sessionmaker, a):
            raise RuntimeError("log tail of a is unreadable")
        return "tail"

    ray.log_tail = broken_log_tail  # type: ignore[method-assign]
    tick(reconciler)
    assert (status(sessionmaker, a), status(sessionmaker, b)) == ("running", "failed")
