"""Bring experiment states in line with Ray, every second or so (and at once when woken).

One tick:
0. every unfinished study advances (app/studies/driver.py): trials whose runs ended are
   settled, running ones the pruner condemns are stopped, and new trials are created as
   `pending` experiments, which this same tick queues;
1. new experiments (`pending`) join the queue (`queued`);
2. every experiment that owns a Ray job (`running`, `stopping`) is compared with its job: a job
   Ray reports ended while the experiment still runs means the job could not report itself
   (crash, OOM kill, cluster restart): the experiment ends accordingly, with Ray's message and
   the tail of the job log, after the metric rows the dead job wrote to its local JSONL copy
   but never sent are stored (app/jobs/salvage.py); a `stopping` experiment whose job
   outlives the grace period is marked stopped anyway;
3. queued experiments start in order while their whole resource budget (driver + actors) fits
   the cluster's free CPUs/GPUs and the concurrency cap allows. Evaluations (app/evaluations/
   scheduling.py, checked in the same tick) wait in the same FIFO queue, oldest first across
   both kinds; they take CPUs but no experiment slot. A sweep member also waits while
   `max_parallel` members of its sweep run; it then keeps its place without holding up the
   work behind it (it waits for its sweep, not for the cluster).

An experiment whose stored config no longer validates (stored by an older version with looser
bounds, or edited in the database) cannot be launched: while waiting it fails with the fields
that are wrong; while running it is still watched, its budget estimated from the raw values.
A process works each budget out once (`Budgets`: a stored config never changes); a job whose
config was edited into an invalid one after that is refused its spec (409) and fails saying so.
One experiment never stops the tick for the others: each is checked on its own.

The database is the only state that matters (several API processes, restarts): the in-memory
bits here (when a stop was sent) only throttle repeated calls. Every change goes through the
experiments service's `transition`, which records the event and publishes it live.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import layout
from app.core.config import Settings
from app.core.db import SessionMaker
from app.core.from_row import from_row
from app.core.stored_config import StoredConfig
from app.evaluations.scheduling import (
    EvaluationQueue,
    EvaluationScheduler,
    EvaluationSnapshot,
    oldest_first,
)
from app.experiments import service
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.jobs import kernel
from app.jobs.launcher import (
    RayJob,
    RayJobLauncher,
    RayJobState,
    RayUnavailable,
)
from app.jobs.node_load import IdleCores
from app.jobs.resources import ClusterResources, JobResources, fits
from app.jobs.salvage import Salvaged, Settlement, salvage_job_dir
from app.studies.driver import StudyDriver
from app.sweeps.models import Sweep
from trainer.config import PPOConfig

log = logging.getLogger(__name__)
S = ExperimentStatus
ACTIVE = (S.running, S.stopping)
# A job submitted by another API process may not exist yet for a moment after its claim.
MISSING_GRACE_S = kernel.MISSING_GRACE_S
STOP_RESEND_S = 5.0


@dataclass(frozen=True)
class Snapshot:
    """What one tick needs to know about an unfinished experiment."""

    id: int
    status: ExperimentStatus
    resources: JobResources
    ray_job_id: str | None
    started_at: dt.datetime | None
    created_at: dt.datetime
    sweep_id: int | None = None
    sweep_max_parallel: int | None = None
    invalid_config: str | None = None  # why the stored config no longer validates


# The fields JobResources.of reads: enough to estimate the budget of an invalid config.
RESOURCE_FIELDS = (
    "num_env_runners",
    "num_learners",
    "num_cpus_per_env_runner",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
)


def resources_of(config: StoredConfig | None) -> tuple[JobResources, str | None]:
    """The experiment's budget, and None, or an estimate and why its config is invalid."""
    if isinstance(config, PPOConfig):
        return JobResources.of(config), None
    if config is None:  # deleted meanwhile
        return JobResources.of(PPOConfig()), None
    raw = config.to_json_dict()
    values = {k: raw[k] for k in RESOURCE_FIELDS if k in raw}
    try:
        return JobResources.of(PPOConfig.model_construct(**values)), config.reason
    except Exception:
        return JobResources.of(PPOConfig()), config.reason


class Budgets:
    """Each unfinished experiment's budget, worked out from its stored config once per process.

    A stored config never changes, and the tick needs every unfinished experiment's budget every
    second: reading, parsing and validating each config again (~0.13 ms each; a queued sweep
    holds up to 256) would cost every tick tens of milliseconds for an answer that cannot
    change."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[JobResources, str | None]] = {}

    def of(
        self, session: Session, experiment_ids: list[int]
    ) -> list[tuple[JobResources, str | None]]:
        """Each experiment's (budget, why its config is invalid or None); the configs of those
        not known yet are read in one query."""
        new = [i for i in experiment_ids if i not in self._known]
        if new:
            rows = session.execute(
                select(Experiment.id, Experiment.config).where(Experiment.id.in_(new))
            )
            for experiment_id, config in rows:
                self._known[experiment_id] = resources_of(config)
        # One deleted between the two queries has no config left: an estimate, not remembered.
        return [self._known.get(i) or resources_of(None) for i in experiment_ids]

    def keep_only(self, experiment_ids: set[int]) -> None:
        """Forget the experiments that have finished (or were deleted)."""
        for gone in self._known.keys() - experiment_ids:
            del self._known[gone]


def snapshots(session: Session, budgets: Budgets | None = None) -> list[Snapshot]:
    """Every unfinished experiment; `budgets` remembers their budgets across calls (the
    reconciler's ticks), without it each config is read now (the /cluster view)."""
    budgets = Budgets() if budgets is None else budgets
    unfinished = (S.pending, S.queued, S.running, S.stopping)
    rows = session.execute(
        select(
            Experiment.id,
            Experiment.status,
            Experiment.ray_job_id,
            Experiment.started_at,
            Experiment.created_at,
            Experiment.sweep_id,
            Sweep.max_parallel,
        )
        .outerjoin(Sweep, Sweep.id == Experiment.sweep_id)
        .where(Experiment.status.in_(unfinished))
        .order_by(Experiment.id)
    ).all()
    out = []
    for row, (resources, invalid) in zip(
        rows, budgets.of(session, [r.id for r in rows]), strict=True
    ):
        out.append(
            from_row(
                Snapshot,
                row,
                resources=resources,
                sweep_max_parallel=row.max_parallel,
                invalid_config=invalid,
            )
        )
    budgets.keep_only({row.id for row in rows})
    return out


def sweep_running(active: list[Snapshot]) -> Counter[int]:
    """Running (or stopping) members per sweep."""
    return Counter(s.sweep_id for s in active if s.sweep_id is not None)


def held_by_sweep(snap: Snapshot, running: Counter[int]) -> bool:
    """Its sweep already runs `max_parallel` members."""
    if snap.sweep_id is None or snap.sweep_max_parallel is None:
        return False
    return running[snap.sweep_id] >= snap.sweep_max_parallel


@dataclass(frozen=True)
class QueueEntry:
    """One waiting job of any kind, as the FIFO resource queue sees it: what it needs, whether
    it counts against max_concurrent_experiments or waits for its sweep, and how it is failed
    (it can never fit) or launched. A new kind of job is one more adapter (`_*_entry`)."""

    id: int
    created_at: dt.datetime
    resources: JobResources
    takes_slot: bool
    held: Callable[[], bool]
    fail_unfit: Callable[[ClusterResources], Awaitable[None]]
    launch: Callable[[], Awaitable[bool]]


# The move the scheduler makes: only from the statuses it saw (a job's own report wins).
_settle = service.LIFECYCLE.settle

EXPERIMENT_JOBS = kernel.JobKind(
    name="experiment",
    id_prefix="exp",
    model=Experiment,
    waiting=(S.pending, S.queued),
    issue_claim=service.issue_job_claim,
    lifecycle=service.LIFECYCLE,
    launched=ACTIVE,
    job_dir=layout.experiment_job_dir,
)


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        sessionmaker: SessionMaker,
        launcher: RayJobLauncher,
        *,
        interval_s: float = 1.0,
        idle_cores: IdleCores | None = None,
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.launcher = launcher
        self.interval_s = interval_s
        self.idle_cores = idle_cores or IdleCores(
            min_idle=settings.scheduled_evaluation_min_idle_cores
        )
        self._wake = asyncio.Event()
        self._stops_sent: dict[int, tuple[float, float]] = {}  # id -> (first, last) monotonic
        self._last_error = ""
        self.evaluations = EvaluationScheduler(settings, sessionmaker, launcher, self.wake)
        self.studies = StudyDriver(sessionmaker, self.request_stop)
        self._budgets = Budgets()

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Tick forever (cancel the task to end it); errors are logged, never fatal."""
        while True:
            self._wake.clear()
            try:
                await self.tick()
                self._last_error = ""
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                message = f"{type(exc).__name__}: {exc}"
                if message != self._last_error:  # say it once, not every second
                    log.warning(
                        "reconciler: %s", message, exc_info=not isinstance(exc, RayUnavailable)
                    )
                self._last_error = message
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def tick(self) -> None:
        await self.launcher.ensure_connected()
        await self.studies.tick()  # settles, prunes and suggests trials before the queue runs
        snaps = await self._db(snapshots, self._budgets)
        waiting = (S.pending, S.queued)
        for snap in snaps:
            if snap.status in waiting and snap.invalid_config is not None:
                await self._db(
                    _settle, snap.id, waiting, S.failed, "invalid config", snap.invalid_config
                )
            elif snap.status == S.pending:
                await self._db(
                    _settle, snap.id, (S.pending,), S.queued, "waiting for cluster resources"
                )
        active = [s for s in snaps if s.status in ACTIVE]
        if active:
            jobs = await kernel.jobs_of(
                self.launcher, EXPERIMENT_JOBS, [s.ray_job_id for s in active]
            )
            for snap, job in zip(active, jobs, strict=True):
                await self._isolated(snap, self._check(snap, job))
        evaluations = await self.evaluations.tick()
        self.idle_cores.record()
        queued = [s for s in snaps if s.status in waiting and s.invalid_config is None]
        if queued or evaluations.queued:
            await self._launch_fitting(queued, active, evaluations)

    async def _isolated(self, snap: Snapshot, work: Awaitable[None]) -> None:
        """Run one experiment's step of the tick; its failure is logged, the others go on."""
        try:
            await work
        except RayUnavailable:
            raise  # the cluster, not this experiment: the whole tick waits
        except Exception as exc:
            log.warning("reconciler: experiment %s: %s: %s", snap.id, type(exc).__name__, exc)

    # --- running jobs ---------------------------------------------------------------------------
    async def _check(self, snap: Snapshot, job: RayJob) -> None:
        if job.state == RayJobState.MISSING:
            if kernel.age_s(snap.started_at) < MISSING_GRACE_S:
                return
            fallback = (
                Settlement(S.stopped, job.message)
                if snap.status == S.stopping
                else Settlement(S.failed, job.message, job.message)
            )
            await self._settle_salvaged(snap, fallback)
        elif job.state.is_terminal:
            await self._ended(snap, job)
        elif snap.status == S.stopping:
            await self._drive_stop(snap)

    async def _ended(self, snap: Snapshot, job: RayJob) -> None:
        """The Ray job ended but the experiment was not told by the job itself."""
        assert snap.ray_job_id is not None
        tail = await self.launcher.log_tail(snap.ray_job_id)
        self._stops_sent.pop(snap.id, None)
        if job.state == RayJobState.FAILED:
            reason = f"Ray job {snap.ray_job_id} failed"
            fallback = Settlement(S.failed, reason, job.message or reason, tail or None)
        elif job.state == RayJobState.STOPPED or snap.status == S.stopping:
            reason = f"Ray job {snap.ray_job_id} was stopped before it reported"
            fallback = Settlement(S.stopped, reason, None, tail or None)
        else:
            reason = f"Ray job {snap.ray_job_id} ended without reporting a final status"
            fallback = Settlement(S.succeeded, reason, None, tail or None)
        await self._settle_salvaged(snap, fallback)

    async def _settle_salvaged(self, snap: Snapshot, fallback: Settlement) -> None:
        """Store what the ended job left in its job dir but never sent (app/jobs/salvage.py),
        then end the experiment as the job reported it there, else as `fallback` says."""
        salvaged: Salvaged = await self._db(salvage_job_dir, self.settings, snap.id)
        end = salvaged.outcome(fallback)
        log_tail = end.log_tail or fallback.log_tail
        await self._db(_settle, snap.id, ACTIVE, end.status, end.reason, end.error, log_tail)

    async def _drive_stop(self, snap: Snapshot) -> None:
        """(Re)send stop_job; after the grace period give up waiting and mark it stopped."""
        assert snap.ray_job_id is not None
        now = time.monotonic()
        first, last = self._stops_sent.get(snap.id, (now, 0.0))
        if now - first > self.launcher.stop_grace_s + 10:
            reason = (
                f"Ray job {snap.ray_job_id} did not end within "
                f"{self.launcher.stop_grace_s:.0f}s of the stop request; marked stopped"
            )
            await self._db(_settle, snap.id, (S.stopping,), S.stopped, reason)
            self._stops_sent.pop(snap.id, None)
            await self.launcher.stop(snap.ray_job_id)
            return
        if now - last >= STOP_RESEND_S:
            self._stops_sent[snap.id] = (first, now)
            await self.launcher.stop(snap.ray_job_id)

    async def request_stop(self, experiment_id: int) -> None:
        """The experiment is now `stopping`: SIGTERM its job right away."""

        def job_id(session: Session) -> str | None:
            return service.get(session, experiment_id).ray_job_id

        ray_job_id = await self._db(job_id)
        now = time.monotonic()
        self._stops_sent[experiment_id] = (now, now)
        if ray_job_id is not None:
            try:
                await self.launcher.stop(ray_job_id)
            except RayUnavailable as exc:
                log.warning("stop of %s failed (%s); the reconciler retries", ray_job_id, exc)
        self.wake()

    # --- the queue ------------------------------------------------------------------------------
    async def _launch_fitting(
        self, queued: list[Snapshot], active: list[Snapshot], evaluations: EvaluationQueue
    ) -> None:
        cluster = await self.launcher.cluster_resources()
        if cluster is None:
            return  # Ray has not reported its resources yet
        free_cpus, free_gpus = cluster.free(
            sum(s.resources.cpus for s in active) + evaluations.reserved_cpus,
            sum(s.resources.gpus for s in active) + evaluations.reserved_gpus,
        )
        slots = self.settings.max_concurrent_experiments - len(active)
        in_sweep = sweep_running(active)
        watched = evaluations.watched
        background_ok = self.idle_cores.allows_background_work()
        newest = evaluations.newest_scheduled
        # Oldest first across experiments and evaluations; big work is not overtaken by small.
        entries = oldest_first(
            [self._experiment_entry(snap, in_sweep) for snap in queued],
            [
                self._evaluation_entry(snap, watched, background_ok, newest)
                for snap in evaluations.queued
            ],
        )
        for entry in entries:
            need = entry.resources
            if not cluster.can_ever_fit(need):
                await entry.fail_unfit(cluster)
                continue
            if entry.held():
                continue
            if (entry.takes_slot and slots <= 0) or not fits(need, free_cpus, free_gpus):
                return
            if await entry.launch():
                slots -= int(entry.takes_slot)
                free_cpus -= need.cpus
                free_gpus -= need.gpus

    def _experiment_entry(self, snap: Snapshot, in_sweep: Counter[int]) -> QueueEntry:
        async def fail_unfit(cluster: ClusterResources) -> None:
            need = snap.resources
            error = (
                f"the experiment needs {need.describe()} but the whole Ray cluster has "
                f"{cluster.total_cpus:g} CPU and {cluster.total_gpus:g} GPU"
            )
            await self._db(_settle, snap.id, (S.pending, S.queued), S.failed, "does not fit", error)

        async def launch() -> bool:
            launched = await self._launch(snap)
            if launched and snap.sweep_id is not None:
                in_sweep[snap.sweep_id] += 1
            return launched

        return QueueEntry(
            id=snap.id,
            created_at=snap.created_at,
            resources=snap.resources,
            takes_slot=True,  # max_concurrent_experiments counts experiments only
            held=lambda: held_by_sweep(snap, in_sweep),
            fail_unfit=fail_unfit,
            launch=launch,
        )

    def _evaluation_entry(
        self,
        snap: EvaluationSnapshot,
        watched: set[int],
        background_ok: bool,
        newest: dict[int, int],
    ) -> QueueEntry:
        """While its run trains, a scheduled evaluation waits while its experiment's previous
        one runs (`watched`), while this machine has no idle core (`background_ok`,
        app/jobs/node_load.py), and while a newer one of its experiment waits (`newest`: the
        latest policy is filmed first, the backlog after). Once the run has ended it queues
        like any evaluation."""

        def held() -> bool:
            if not snap.while_training:
                return False
            if not background_ok or snap.experiment_id in watched:
                return True
            return newest.get(snap.experiment_id, snap.id) != snap.id

        async def fail_unfit(cluster: ClusterResources) -> None:
            await self.evaluations.fail_unfit(snap, cluster)

        async def launch() -> bool:
            launched = await self.evaluations.launch(snap)
            if launched and snap.while_training:
                watched.add(snap.experiment_id)
            return launched

        return QueueEntry(
            id=snap.id,
            created_at=snap.created_at,
            resources=snap.resources,
            takes_slot=False,
            held=held,
            fail_unfit=fail_unfit,
            launch=launch,
        )

    async def _launch(self, snap: Snapshot) -> bool:
        job = kernel.Launch(snap.id, snap.id, snap.resources, self.settings.job_niceness)
        return await kernel.launch(
            self.sessionmaker, self.launcher, self.settings, EXPERIMENT_JOBS, job
        )

    async def _db(self, fn, *args):  # type: ignore[no-untyped-def]
        return await kernel.in_db(self.sessionmaker, fn, *args)
