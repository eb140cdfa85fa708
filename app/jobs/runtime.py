"""The jobs runtime the API's lifespan starts: a Ray cluster handle, the launcher, the reconciler.

With `ROLLOUT_RAY_ADDRESS` / `RAY_ADDRESS` set the service uses that cluster and starts nothing.
Otherwise it starts a private local Ray head (free ports, never 6379, a private temp dir) and
stops it again by its own process id on shutdown, so Ctrl-C of `rollout serve` leaves no Ray
process behind. Experiments still running on that local head end with it: they are marked
stopped (their periodic checkpoints stay available for a resume).

An API process that dies without shutting down (SIGKILL, OOM) leaves its head and jobs running.
The head is recorded in the data dir (app/jobs/head_state.py), so the next start adopts it and
its jobs carry on, or, when it cannot be adopted, stops it with its jobs before their
experiments are marked failed: no job keeps writing behind a terminal status. The record lists
every process below the head, job drivers included (refreshed every RECORD_EVERY_S while the
service runs): a driver outlives a killed head (Ray starts it in a session of its own), and
only its recorded pid (with its start time, so never a reused pid) finds it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core import layout
from app.core.config import Settings
from app.core.db import Publisher, SessionMaker, run_in_transaction
from app.experiments import service
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.jobs import head_state
from app.jobs.head_state import HeadRecord
from app.jobs.job_clusters import JobClustersLauncher, cluster_per_job_users_ok
from app.jobs.launcher import RayJobLauncher, RayUnavailable
from app.jobs.ray_head import (
    LocalRayHead,
    alive,
    apply_ray_env,
    descendants,
    kill_if_alive,
    proc_start_time,
)
from app.jobs.reconciler import ACTIVE, Reconciler, snapshots
from app.jobs.salvage import Settlement, salvage_job_dir
from app.jobs.warmup import HeadWarmup

log = logging.getLogger(__name__)
S = ExperimentStatus

# AF_UNIX socket paths are limited to 107 bytes; Ray appends ~70 (session dir, socket name).
MAX_RAY_TEMP_DIR_LEN = 35
DEFAULT_STOP_GRACE_S = 60.0
# `rollout serve` shutting down waits at most this long for its jobs' drivers to end.
SHUTDOWN_WAIT_S = 15.0
# How long a head left by an earlier API process gets to answer before it is stopped instead.
ADOPT_TIMEOUT_S = 15.0
# How often the head record is brought up to date with the processes below the head.
RECORD_EVERY_S = 1.0
# How long the drivers of a lost head get to exit after their SIGKILL.
LOST_DRIVERS_TIMEOUT_S = 10.0


class JobsRuntime:
    """Owns the Ray side of the service for the lifetime of one app."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: SessionMaker,
        hub: Publisher | None = None,
        *,
        stop_grace_s: float = DEFAULT_STOP_GRACE_S,
        interval_s: float = 1.0,
    ) -> None:
        self.settings = settings
        self.sessionmaker = sessionmaker
        self.hub = hub
        self.stop_grace_s = stop_grace_s
        self.interval_s = interval_s
        self.head: LocalRayHead | None = None
        self.launcher: RayJobLauncher | None = None
        self.reconciler: Reconciler | None = None
        self._task: asyncio.Task[None] | None = None
        self._record_task: asyncio.Task[None] | None = None
        self._recorded: dict[int, int] = {}
        self._temp_dir: Path | None = None  # a /tmp dir we made for the head, removed at stop
        self._fresh_head = False  # started by us now (not adopted): worth warming up
        self.warmup: HeadWarmup | None = None
        self.address = ""

    # --- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Start (or find) the Ray cluster and the reconciler.

        A local head that fails to start fails the service; an external cluster that cannot be
        reached does not: the reconciler keeps trying and /health reports `ray: false`.
        """
        if self.settings.jobs_users:
            await self._start_job_clusters()
            return
        address = self.settings.ray_address or os.environ.get("RAY_ADDRESS")
        if not address:
            try:
                address = await self._start_local_head()
            except BaseException:
                await self.stop()
                raise
        self.address = address
        self.launcher = RayJobLauncher(address, stop_grace_s=self.stop_grace_s)
        try:
            await self.launcher.connect()
        except RayUnavailable as exc:
            if self.head is not None:
                await self.stop()
                raise
            log.warning("%s; experiments wait until it can be reached", exc)
        self.reconciler = Reconciler(
            self.settings, self.sessionmaker, self.launcher, interval_s=self.interval_s
        )
        self._task = asyncio.create_task(self.reconciler.run(), name="rollout-reconciler")
        if self.head is not None:
            self._record_task = asyncio.create_task(self._keep_record(), name="rollout-head")
        if self._fresh_head and self.settings.ray_warmup:
            self.warmup = HeadWarmup(self.launcher)
            self.warmup.start()

    async def _start_job_clusters(self) -> None:
        """ROLLOUT_JOBS_USERS: no shared head; each job gets a cluster of its own (those an
        earlier API process left running are adopted first)."""
        why_not = cluster_per_job_users_ok()
        if why_not is not None:
            raise RuntimeError(f"ROLLOUT_JOBS_USERS: {why_not}")
        apply_ray_env()
        launcher = JobClustersLauncher(
            self.settings.data_dir,
            self.settings.jobs_users,
            stop_grace_s=self.stop_grace_s,
        )
        await launcher.connect()
        self.launcher = launcher
        self.address = launcher.address
        self.reconciler = Reconciler(
            self.settings, self.sessionmaker, launcher, interval_s=self.interval_s
        )
        self._task = asyncio.create_task(self.reconciler.run(), name="rollout-reconciler")

    async def _start_local_head(self) -> str:
        apply_ray_env()
        record = head_state.load(self.settings.data_dir)
        if record is not None and (url := await self._take_over(record)):
            return url
        temp_dir = ray_temp_dir(self.settings.data_dir)
        if not temp_dir.is_relative_to(self.settings.data_dir.resolve()):
            self._temp_dir = temp_dir
        prune_sessions(temp_dir)
        self.head = LocalRayHead(
            temp_dir=temp_dir, user=self.settings.jobs_user, niceness=self.settings.job_niceness
        )
        await asyncio.to_thread(self.head.launch)
        self._record_head()  # before it is ready: a crash now must not lose track of it
        await asyncio.to_thread(self.head.wait_ready)
        self._record_head()  # now with its daemons
        self._fresh_head = True
        log.info("started a local Ray head at %s (%s)", self.head.address, self.head.dashboard_url)
        # The dashboard URL: no need to ask the cluster where its Jobs API is.
        return self.head.dashboard_url

    async def _take_over(self, record: HeadRecord) -> str | None:
        """Adopt the head an earlier API process left running (its URL), or stop it (None).

        Either way nothing of it keeps running unseen: an adopted head's jobs are reconciled
        as usual; a head that cannot be adopted is stopped with its jobs, and only then are
        its experiments marked failed.
        """
        data_dir = self.settings.data_dir
        if head_state.owner_alive(record):
            raise RuntimeError(
                f"another `rollout serve` (pid {record.owner_pid}) runs the local Ray head of "
                f"{data_dir}; stop it first, or give this one its own --data-dir"
            )
        if head_state.is_that_head(record):
            head = LocalRayHead.adopt(
                record.pid, record.started, record.address, record.dashboard_url
            )
            head.temp_dir = Path(record.temp_dir)
            try:
                await asyncio.to_thread(head.wait_ready, ADOPT_TIMEOUT_S)
            except (RuntimeError, TimeoutError) as exc:
                log.warning("cannot adopt the Ray head left running (pid %d): %s", head.pid, exc)
                reason = (
                    f"its job ran on the service's local Ray head (pid {record.pid}), which did "
                    "not answer after the service restarted; the head was stopped with its jobs"
                )
                await asyncio.to_thread(head.stop)
            else:
                self.head = head
                if record.owned_temp:
                    self._temp_dir = head.temp_dir
                self._record_head()
                log.warning(
                    "adopted the local Ray head an earlier service process left running "
                    "(pid %d, %s); its jobs carry on",
                    record.pid,
                    record.dashboard_url,
                )
                return head.dashboard_url
        else:
            # The leader is gone; daemons it left behind in its process group go too (a job
            # driver notices its supervisor is gone and stops by itself).
            reason = (
                "its job ran on the service's local Ray head, which ended while the service "
                "was down"
            )
        await self._end_lost_experiments(reason, record)
        if record.owned_temp:
            shutil.rmtree(record.temp_dir, ignore_errors=True)
        head_state.clear(data_dir)
        return None

    def _record_head(self, processes: dict[int, int] | None = None) -> None:
        """Write the head record; `processes` (pid -> start time of everything below the head,
        job drivers included) defaults to what is there now."""
        head = self.head
        assert head is not None and head.pid is not None
        if processes is None:
            processes = descendants(head.pid)
        self._recorded = processes
        me = os.getpid()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        head_state.save(
            self.settings.data_dir,
            HeadRecord(
                **head_state.whereabouts(head),
                temp_dir=str(head.temp_dir),
                owned_temp=self._temp_dir is not None,
                owner_pid=me,
                owner_started=proc_start_time(me) or 0,
                daemons={str(pid): started for pid, started in processes.items()},
            ),
        )

    async def _keep_record(self) -> None:
        """Keep the head record's process list current (drivers come and go with jobs), so a
        later start can stop the drivers of a head that died with this service."""
        while True:
            await asyncio.sleep(RECORD_EVERY_S)
            head = self.head
            if head is None or head.pid is None:
                return
            try:
                processes = await asyncio.to_thread(descendants, head.pid)
                if processes and processes != self._recorded:
                    await asyncio.to_thread(self._record_head, processes)
            except Exception:
                log.exception("could not update the Ray head record")

    async def _end_lost_experiments(self, reason: str, record: HeadRecord) -> None:
        """Experiments whose jobs went with a head that is now stopped or gone.

        Their drivers may still run (a driver outlives its head, in a session of its own):
        every process the record lists (or that is below one) is SIGKILLed and awaited FIRST,
        so the JSONL copies are complete when they are salvaged and nothing writes behind the
        final status."""
        processes = await asyncio.to_thread(head_state.leftovers, record)
        if processes:
            log.warning(
                "stopping %d processes left by the lost Ray head (pid %d): %s",
                len(processes),
                record.pid,
                sorted(processes),
            )
            await asyncio.to_thread(kill_if_alive, processes, LOST_DRIVERS_TIMEOUT_S)
            survivors = alive(processes)
            if survivors:
                log.error("processes %s of the lost Ray head did not exit", survivors)

        def end(exp: Experiment) -> Settlement:
            if exp.status == S.stopping:
                return Settlement(S.stopped, reason)
            return Settlement(S.failed, reason, reason)

        def end_all(session: Session) -> list[int]:
            return _end_active(session, self.settings, end)

        ids = await asyncio.to_thread(run_in_transaction, self.sessionmaker, end_all)
        if ids:
            log.warning("experiments %s ended: %s", ids, reason)

    async def stop(self) -> None:
        if self.warmup is not None:
            await self.warmup.stop()
        for task in (self._task, self._record_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._record_task = None
        if self.head is not None or isinstance(self.launcher, JobClustersLauncher):
            # Drivers first (they end their iteration and write it down), then the head (or the
            # jobs' own clusters), then what they wrote is salvaged and the status settled:
            # nothing is written behind it.
            running = await asyncio.to_thread(run_in_transaction, self.sessionmaker, _active_jobs)
            if self.launcher is not None and running:
                await self._stop_and_wait([job for _, job in running if job is not None])
            if isinstance(self.launcher, JobClustersLauncher):
                await self.launcher.stop_all()
            shared_head, self.head = self.head, None
            if shared_head is not None:
                await asyncio.to_thread(shared_head.stop)
            await self._end_local_experiments()
            if shared_head is not None:
                head_state.clear(self.settings.data_dir)
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        if self.launcher is not None:
            await self.launcher.close()
            self.launcher = None

    async def _end_local_experiments(self) -> None:
        """The local head (and every job on it) went away with the service: store what the
        stopped drivers wrote down but could not send (the API no longer answers them), then
        mark their experiments stopped."""

        shut_down = Settlement(S.stopped, "the service shut down and its local Ray cluster with it")

        def end_all(session: Session) -> list[int]:
            return _end_active(session, self.settings, lambda _: shut_down)

        try:
            ids = await asyncio.to_thread(run_in_transaction, self.sessionmaker, end_all)
        except Exception:
            log.exception("could not mark the experiments of the local Ray head stopped")
            return
        if ids:
            log.warning("stopped experiments %s with the local Ray head", ids)

    async def _stop_and_wait(self, ray_job_ids: list[str]) -> None:
        """stop_job for each (SIGTERM: the driver ends its iteration, writes its rows to its
        JSONL copy and saves a final checkpoint), then poll until all ended, at most
        SHUTDOWN_WAIT_S: a driver that cannot report to the stopped API would otherwise hold
        Ctrl-C for its whole retry time."""
        assert self.launcher is not None
        launcher = self.launcher
        for job_id in ray_job_ids:
            with contextlib.suppress(Exception):
                await launcher.stop(job_id)
        deadline = asyncio.get_running_loop().time() + min(self.stop_grace_s, SHUTDOWN_WAIT_S)
        waiting = list(ray_job_ids)
        while waiting and asyncio.get_running_loop().time() < deadline:
            states = []
            for job_id in waiting:
                try:
                    states.append((job_id, (await launcher.job(job_id)).state.is_terminal))
                except Exception:
                    states.append((job_id, True))  # Ray no longer answers: nothing to wait for
            waiting = [job_id for job_id, ended in states if not ended]
            if waiting:
                await asyncio.sleep(0.5)
        if waiting:
            log.warning("Ray jobs %s did not end within the stop grace", waiting)

    # --- what the API asks ----------------------------------------------------------------------
    async def on_created(self, experiment_id: int) -> None:
        """A pending experiment exists: the reconciler queues and launches it right away."""
        if self.reconciler is not None:
            self.reconciler.wake()

    def wake(self) -> None:
        """Something changed that the reconciler acts on (a study to suggest for)."""
        if self.reconciler is not None:
            self.reconciler.wake()

    async def request_stop(self, experiment_id: int) -> None:
        if self.reconciler is not None:
            await self.reconciler.request_stop(experiment_id)

    async def healthy(self) -> bool:
        return self.launcher is not None and await self.launcher.reachable()

    async def cluster_info(self) -> dict[str, Any]:
        """Ray resources (total, used, available) and the experiments holding or awaiting them."""
        launcher = self._require_launcher()
        snaps = await asyncio.to_thread(run_in_transaction, self.sessionmaker, snapshots)
        try:
            cluster = await launcher.cluster_resources()
        except RayUnavailable:
            cluster = None
        active = [s for s in snaps if s.status in ACTIVE]
        resources: dict[str, Any] | None = None
        if cluster is not None:
            resources = {
                "CPU": _usage(cluster.total_cpus, cluster.used_cpus),
                "GPU": _usage(cluster.total_gpus, cluster.used_gpus),
            }
        return {
            "address": self.head.address if self.head is not None else self.address,
            "dashboard_url": launcher.dashboard_url,
            "error": launcher.last_error or None,
            "local_head": self.head is not None,
            "warmup": self.warmup.as_dict() if self.warmup is not None else None,
            "reachable": await launcher.reachable(),
            "resources": resources,
            "reserved": {
                "CPU": sum(s.resources.cpus for s in active),
                "GPU": sum(s.resources.gpus for s in active),
            },
            "max_concurrent_experiments": self.settings.max_concurrent_experiments,
            "running": [
                {
                    "experiment_id": s.id,
                    "status": s.status.value,
                    "ray_job_id": s.ray_job_id,
                    "cpus": s.resources.cpus,
                    "gpus": s.resources.gpus,
                }
                for s in active
            ],
            "queued": [
                {"experiment_id": s.id, "cpus": s.resources.cpus, "gpus": s.resources.gpus}
                for s in snaps
                if s.status in (S.pending, S.queued)
            ],
        }

    def _require_launcher(self) -> RayJobLauncher:
        if self.launcher is None:
            from app.core.errors import Unavailable

            raise Unavailable("the jobs runtime is not started")
        return self.launcher


def _usage(total: float, used: float) -> dict[str, float]:
    return {"total": total, "used": used, "available": max(0.0, total - used)}


def ray_temp_dir(data_dir: Path) -> Path:
    """A private Ray temp dir under the data dir, or under /tmp when that path is too long."""
    preferred = layout.ray_dir(data_dir)
    if len(str(preferred)) <= MAX_RAY_TEMP_DIR_LEN:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    return Path(tempfile.mkdtemp(prefix="rollout-ray-", dir="/tmp"))


def prune_sessions(temp_dir: Path, keep: int = 3) -> None:
    """Remove all but the newest `keep` Ray session dirs (their logs) left by earlier starts."""
    sessions = sorted(p for p in temp_dir.glob("session_2*") if p.is_dir())
    for old in sessions[:-keep] if keep else sessions:
        shutil.rmtree(old, ignore_errors=True)


def _active_jobs(session: Session) -> list[tuple[int, str | None]]:
    """(experiment id, Ray job id) of every running or stopping experiment."""
    rows = session.execute(
        select(Experiment.id, Experiment.ray_job_id).where(Experiment.status.in_(ACTIVE))
    )
    return [(exp_id, job_id) for exp_id, job_id in rows]


def _end_active(
    session: Session, settings: Settings, end: Callable[[Experiment], Settlement]
) -> list[int]:
    """End every experiment that still runs, after storing what its job left in its job dir
    (rows, checkpoints, the final status it could not report: that status wins over `end`'s,
    and `end`'s reason, the cause the job could not see, leads its reason). The job dir's
    copies of what was stored are removed once the transaction committed."""
    rows = session.scalars(select(Experiment).where(Experiment.status.in_(ACTIVE)))
    ended = []
    for exp in list(rows):
        salvaged = salvage_job_dir(session, settings, exp.id)
        cause = end(exp)
        settled = salvaged.outcome(cause)
        if salvaged.record is not None:
            settled = replace(settled, reason=f"{cause.reason}: {settled.reason}")
        service.transition(
            session,
            exp.id,
            settled.status,
            settled.reason,
            error=settled.error,
            log_tail=settled.log_tail,
        )
        ended.append(exp.id)
    return ended
