"""Evaluation jobs on Ray, driven by the reconciler's tick.

The reconciler calls `EvaluationScheduler.tick()` once per tick: new evaluations join the
queue, and every running one is compared with its Ray job (a job that ended without reporting,
or that Ray no longer knows, fails its evaluation with Ray's message and the log tail). The
queued ones come back to the reconciler, which launches experiments and evaluations from ONE
FIFO queue (oldest first, `oldest_first`) under the same fit rules: an evaluation needs
`EVALUATION_RESOURCES` (a 1-CPU driver, no actors) and is never overtaken by, nor overtakes,
an experiment that does not fit yet.

Each evaluation runs as `python -m trainer.evaluation_job` with its own job token (exchanged for
the one-time claim in its runtime_env, as experiments do).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import layout
from app.core.config import Settings
from app.core.db import SessionMaker
from app.core.from_row import from_row
from app.evaluations import service
from app.evaluations.models import Evaluation, EvaluationStatus
from app.jobs import kernel
from app.jobs.launcher import RayJob, RayJobLauncher, RayJobState, RayUnavailable
from app.jobs.resources import ClusterResources, JobResources
from trainer.wire import ENV_EVALUATION_ID

log = logging.getLogger(__name__)
E = EvaluationStatus
WAITING = (E.pending, E.queued)
ENTRYPOINT_MODULE = "trainer.evaluation_job"
# The job runs its episodes in its driver process: one whole CPU, nothing else.
EVALUATION_RESOURCES = JobResources(
    driver_cpus=1.0, driver_gpus=0.0, actor_cpus=0.0, actor_gpus=0.0
)
# A scheduled evaluation (evaluation_every) reserves nothing and runs at the lowest priority:
# it takes the CPU its experiment leaves idle, so watching a run learn does not slow it; the
# queue runs one at a time per experiment, newest first (`held` in app/jobs/reconciler.py).
SCHEDULED_RESOURCES = JobResources(driver_cpus=0.0, driver_gpus=0.0, actor_cpus=0.0, actor_gpus=0.0)
SCHEDULED_NICENESS = 19
# A job submitted by another API process may not exist yet for a moment after its claim.
MISSING_GRACE_S = kernel.MISSING_GRACE_S


@dataclass(frozen=True)
class EvaluationSnapshot:
    """What one tick needs to know about an unfinished evaluation."""

    id: int
    experiment_id: int
    status: EvaluationStatus
    ray_job_id: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    scheduled: bool = False
    run_ended: bool = True  # its experiment has finished (succeeded, failed or stopped)

    @property
    def while_training(self) -> bool:
        """A scheduled evaluation of a run still training: it takes only what the run leaves
        idle. Once the run has ended it is an evaluation like any other."""
        return self.scheduled and not self.run_ended

    @property
    def resources(self) -> JobResources:
        return SCHEDULED_RESOURCES if self.while_training else EVALUATION_RESOURCES

    @property
    def waiting_for(self) -> str:
        """The queued status's reason, as the evaluation's page shows it."""
        if self.while_training:
            return (
                "waiting for an idle core: while its run trains, a scheduled evaluation takes "
                "only the CPU the run leaves idle"
            )
        return "waiting for cluster resources"


@dataclass(frozen=True)
class EvaluationQueue:
    active: list[EvaluationSnapshot]
    queued: list[EvaluationSnapshot]

    @property
    def watched(self) -> set[int]:
        """Experiments with a scheduled evaluation running (the next one waits for it)."""
        return {s.experiment_id for s in self.active if s.while_training}

    @property
    def newest_scheduled(self) -> dict[int, int]:
        """Experiment id -> its newest waiting scheduled evaluation (filmed first)."""
        newest: dict[int, int] = {}
        for s in self.queued:
            if s.while_training:
                newest[s.experiment_id] = max(s.id, newest.get(s.experiment_id, s.id))
        return newest

    @property
    def reserved_cpus(self) -> float:
        return sum(s.resources.cpus for s in self.active)

    @property
    def reserved_gpus(self) -> float:
        return sum(s.resources.gpus for s in self.active)


def oldest_first(*queues: Iterable[Any]) -> list[Any]:
    """One FIFO over several kinds of queued work: by creation time, then kind, then id."""
    entries = [
        (item.created_at, kind, item.id, item) for kind, q in enumerate(queues) for item in q
    ]
    return [item for *_, item in sorted(entries, key=lambda e: e[:3])]


def snapshots(session: Session) -> list[EvaluationSnapshot]:
    from app.experiments.lifecycle import FINISHED
    from app.experiments.models import Experiment

    rows = session.execute(
        select(Evaluation, Experiment.status)
        .join(Experiment, Experiment.id == Evaluation.experiment_id)
        .where(Evaluation.status.in_((E.pending, E.queued, E.running)))
        .order_by(Evaluation.id)
    )
    return [
        from_row(EvaluationSnapshot, e, run_ended=run_status in FINISHED) for e, run_status in rows
    ]


class EvaluationScheduler:
    """The evaluation side of the reconciler (one per API process)."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: SessionMaker,
        launcher: RayJobLauncher,
        wake: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.launcher = launcher
        self.wake = wake

    async def tick(self) -> EvaluationQueue:
        """Queue new evaluations, settle ended jobs; returns what runs and what waits."""
        snaps = await self._db(snapshots)
        for snap in snaps:
            if snap.status == E.pending:
                await self._db(_settle, snap.id, (E.pending,), E.queued, snap.waiting_for)
        active = [s for s in snaps if s.status == E.running]
        if active:
            jobs = await kernel.jobs_of(
                self.launcher, EVALUATION_JOBS, [s.ray_job_id for s in active]
            )
            for snap, job in zip(active, jobs, strict=True):
                await self._check(snap, job)
        return EvaluationQueue(active=active, queued=[s for s in snaps if s.status in WAITING])

    async def _check(self, snap: EvaluationSnapshot, job: RayJob) -> None:
        if job.state == RayJobState.MISSING:
            if kernel.age_s(snap.started_at) >= MISSING_GRACE_S:
                await self._db(_settle, snap.id, (E.running,), E.failed, job.message, job.message)
            return
        if not job.state.is_terminal:
            return
        assert snap.ray_job_id is not None
        tail = await self.launcher.log_tail(snap.ray_job_id)
        if job.state == RayJobState.SUCCEEDED:
            reason = f"Ray job {snap.ray_job_id} ended without reporting a final status"
        elif job.state == RayJobState.STOPPED:
            reason = f"Ray job {snap.ray_job_id} was stopped"
        else:
            reason = f"Ray job {snap.ray_job_id} failed"
        error = job.message or reason
        await self._db(_settle, snap.id, (E.running,), E.failed, reason, error, tail or None)

    async def launch(self, snap: EvaluationSnapshot) -> bool:
        """Claim, issue the job token, mark running and submit; False if not launched."""
        niceness = SCHEDULED_NICENESS if snap.while_training else 0
        job = kernel.Launch(snap.id, snap.experiment_id, snap.resources, niceness)
        return await kernel.launch(
            self.sessionmaker, self.launcher, self.settings, EVALUATION_JOBS, job
        )

    async def fail_unfit(self, snap: EvaluationSnapshot, cluster: ClusterResources) -> None:
        error = (
            f"the evaluation needs {snap.resources.describe()} but the whole Ray cluster has "
            f"{cluster.total_cpus:g} CPU and {cluster.total_gpus:g} GPU"
        )
        await self._db(_settle, snap.id, WAITING, E.failed, "does not fit", error)

    async def stop(self, ray_job_id: str) -> None:
        """Stop a deleted evaluation's job (best effort: without its row, it fails anyway)."""
        try:
            await self.launcher.stop(ray_job_id)
        except RayUnavailable as exc:
            log.warning("stop of %s failed: %s", ray_job_id, exc)

    async def _db(self, fn, *args):  # type: ignore[no-untyped-def]
        return await kernel.in_db(self.sessionmaker, fn, *args)


# The move the scheduler makes: only from the statuses it saw (a job's own report wins).
_settle = service.LIFECYCLE.settle

EVALUATION_JOBS = kernel.JobKind(
    name="evaluation",
    id_prefix="eval",
    model=Evaluation,
    waiting=WAITING,
    issue_claim=service.issue_job_claim,
    lifecycle=service.LIFECYCLE,
    launched=(E.running,),
    job_dir=layout.evaluation_job_dir,
    entrypoint_module=ENTRYPOINT_MODULE,
    env_var=ENV_EVALUATION_ID,
)


def scheduler_of(jobs: Any) -> EvaluationScheduler | None:
    """The evaluation scheduler of the jobs runtime (None when jobs are disabled)."""
    reconciler = getattr(jobs, "reconciler", None) if jobs is not None else None
    return getattr(reconciler, "evaluations", None)
