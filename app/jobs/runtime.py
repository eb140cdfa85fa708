"""The jobs runtime the API's lifespan starts: a Ray cluster handle, the launcher, the reconciler.

With `ROLLOUT_RAY_ADDRESS` / `RAY_ADDRESS` set the service uses that cluster and starts nothing.
Otherwise it starts a private local Ray head (free ports, never 6379, a private temp dir) and
stops it again by its own process id on shutdown, so Ctrl-C of `rollout serve` leaves no Ray
process behind. Experiments still running on that local head end with it: they are marked
stopped (their periodic checkpoints stay available for a resume).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import Publisher, SessionMaker, run_in_transaction
from app.experiments import service
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.jobs.launcher import RayJobLauncher, RayUnavailable
from app.jobs.ray_head import LocalRayHead, apply_ray_env
from app.jobs.reconciler import ACTIVE, Reconciler, snapshots

log = logging.getLogger(__name__)
S = ExperimentStatus

# AF_UNIX socket paths are limited to 107 bytes; Ray appends ~70 (session dir, socket name).
MAX_RAY_TEMP_DIR_LEN = 35
DEFAULT_STOP_GRACE_S = 60.0


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
        self._temp_dir: Path | None = None  # a /tmp dir we made for the head, removed at stop
        self.address = ""

    # --- lifecycle --------------------------------------------------------------------------
    async def start(self) -> None:
        """Start (or find) the Ray cluster and the reconciler.

        A local head that fails to start fails the service; an external cluster that cannot be
        reached does not: the reconciler keeps trying and /health reports `ray: false`.
        """
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

    async def _start_local_head(self) -> str:
        apply_ray_env()
        temp_dir = ray_temp_dir(self.settings.data_dir)
        if not temp_dir.is_relative_to(self.settings.data_dir.resolve()):
            self._temp_dir = temp_dir
        prune_sessions(temp_dir)
        self.head = LocalRayHead(temp_dir=temp_dir)
        await asyncio.to_thread(self.head.start)
        log.info("started a local Ray head at %s (%s)", self.head.address, self.head.dashboard_url)
        # The dashboard URL: no need to ask the cluster where its Jobs API is.
        return self.head.dashboard_url

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.head is not None:
            await self._end_local_experiments()
            await asyncio.to_thread(self.head.stop)
            self.head = None
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None
        if self.launcher is not None:
            await self.launcher.close()
            self.launcher = None

    async def _end_local_experiments(self) -> None:
        """The local head (and every job on it) goes away with the service: say so."""

        def end_all(session: Session) -> list[int]:
            rows = session.scalars(select(Experiment.id).where(Experiment.status.in_(ACTIVE)))
            ids = list(rows)
            for exp_id in ids:
                service.transition(
                    session,
                    exp_id,
                    S.stopped,
                    "the service shut down and its local Ray cluster with it",
                )
            return ids

        try:
            ids = await asyncio.to_thread(run_in_transaction, self.sessionmaker, end_all)
        except Exception:
            log.exception("could not mark the experiments of the local Ray head stopped")
            return
        if ids:
            log.warning("stopped experiments %s with the local Ray head", ids)

    # --- what the API asks ----------------------------------------------------------------------
    async def on_created(self, experiment_id: int) -> None:
        """A pending experiment exists: the reconciler queues and launches it right away."""
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
    preferred = (data_dir / "ray").resolve()
    if len(str(preferred)) <= MAX_RAY_TEMP_DIR_LEN:
        preferred.mkdir(parents=True, exist_ok=True)
        return preferred
    return Path(tempfile.mkdtemp(prefix="rollout-ray-", dir="/tmp"))


def prune_sessions(temp_dir: Path, keep: int = 3) -> None:
    """Remove all but the newest `keep` Ray session dirs (their logs) left by earlier starts."""
    sessions = sorted(p for p in temp_dir.glob("session_2*") if p.is_dir())
    for old in sessions[:-keep] if keep else sessions:
        shutil.rmtree(old, ignore_errors=True)
