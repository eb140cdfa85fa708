"""What every kind of Ray job the service runs shares: experiments and evaluations alike.

A kind of job is a small adapter on top of this: its rows carry `status`, `ray_job_id` and
`updated_at`; it is launched by one sequence (`launch`: claim the row with a compare-and-set,
issue its job claim, mark it running, submit, or settle it failed when Ray refuses) in which
the kind states only what differs (`JobKind`, and `Launch` per row); its missing Ray job is given
`MISSING_GRACE_S` before it counts as lost (`age_s`), and every database step runs in a worker
thread in one transaction (`in_db`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionMaker, run_in_transaction, utcnow
from app.core.lifecycle import Lifecycle
from app.jobs.launcher import JobRequest, RayJob, RayJobLauncher, RayJobState
from app.jobs.resources import JobResources

log = logging.getLogger(__name__)

# How long a claimed job may be unknown to Ray (submission in flight, a slow head) before the
# row is treated as lost.
MISSING_GRACE_S = 30.0
# Every kind's statuses for a launched job and for one Ray refused.
RUNNING, FAILED = "running", "failed"

T = TypeVar("T")


def claim(
    session: Session, model: Any, row_id: int, waiting: Iterable[Any], submission_id: str
) -> bool:
    """Record our Ray job id on a waiting row unless another process got there first.

    One conditional UPDATE (compare-and-set), so it is atomic on every backend: PostgreSQL
    re-checks the condition after waiting for a concurrent claim's row lock, and SQLite runs
    writers one at a time (a SELECT ... FOR UPDATE would lock nothing there).
    """
    result = session.execute(
        update(model)
        .where(model.id == row_id, model.status.in_(tuple(waiting)), model.ray_job_id.is_(None))
        .values(ray_job_id=submission_id, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return result.rowcount == 1


def age_s(since: dt.datetime | None) -> float:
    """Seconds since `since` (infinite when it never happened)."""
    if since is None:
        return float("inf")
    return (utcnow() - since).total_seconds()


async def in_db(sessionmaker: SessionMaker, fn: Callable[..., T], *args: Any) -> T:
    """`fn(session, *args)` in one transaction, in a worker thread (never the event loop)."""
    return await asyncio.to_thread(run_in_transaction, sessionmaker, fn, *args)


@dataclass(frozen=True)
class JobKind:
    """What a kind of job states about its launch; the sequence is `launch`'s."""

    name: str  # "experiment", "evaluation": in log lines
    id_prefix: str  # Ray submission ids: rollout-<prefix><row id>-<random>
    model: Any  # its table
    waiting: tuple[Any, ...]  # the states a row is launched from
    issue_claim: Callable[[Session, int], str]  # the one-time claim its job redeems
    lifecycle: Lifecycle[Any]  # its rows' state machine
    launched: tuple[Any, ...]  # the statuses in which a row Ray refused still fails
    job_dir: Callable[[Path, int], Path]  # (data dir, row id): the job's own folder
    entrypoint_module: str = "trainer.job"  # what the job runs: `python -m <module>`
    env_var: str | None = None  # where the job finds its row id, when not an experiment's

    def submission_id(self, row_id: int) -> str:
        return f"rollout-{self.id_prefix}{row_id}-{secrets.token_hex(4)}"


async def jobs_of(
    launcher: RayJobLauncher, kind: JobKind, ray_job_ids: list[str | None]
) -> list[RayJob]:
    """Each row's Ray job, asked for all at once (a row with no job recorded: missing)."""

    async def job_of(ray_job_id: str | None) -> RayJob:
        if ray_job_id is None:
            return RayJob(RayJobState.MISSING, f"no Ray job was recorded for this {kind.name}")
        return await launcher.job(ray_job_id)

    return list(await asyncio.gather(*(job_of(i) for i in ray_job_ids)))


@dataclass(frozen=True)
class Launch:
    """One row's job as its kind sees it: the rest of its JobRequest is the kind's and the
    service's (settings)."""

    row_id: int
    experiment_id: int  # the experiment it trains or evaluates
    resources: JobResources
    niceness: int = 0


async def launch(
    sessionmaker: SessionMaker,
    launcher: RayJobLauncher,
    settings: Settings,
    kind: JobKind,
    job: Launch,
) -> bool:
    """Claim the row, issue its job claim, mark it running (one transaction), then submit its
    JobRequest; False if another process claimed it first or Ray refused it (the row then
    fails with Ray's error)."""
    row_id, resources = job.row_id, job.resources
    submission_id = kind.submission_id(row_id)
    reason = f"submitted as Ray job {submission_id} ({resources.describe()})"

    def claim_row(session: Session) -> str | None:
        if not claim(session, kind.model, row_id, kind.waiting, submission_id):
            return None  # stopped or deleted meanwhile, or claimed by another API process
        job_claim = kind.issue_claim(session, row_id)
        kind.lifecycle.transition(session, row_id, RUNNING, reason)
        return job_claim

    job_claim = await in_db(sessionmaker, claim_row)
    if job_claim is None:
        return False
    try:
        request = JobRequest(
            experiment_id=job.experiment_id,
            resources=resources,
            claim=job_claim,
            api_url=settings.api_url,
            job_dir=kind.job_dir(settings.data_dir, row_id),
            entrypoint_module=kind.entrypoint_module,
            extra_env={kind.env_var: str(row_id)} if kind.env_var else {},
            niceness=job.niceness,
        )
        await launcher.submit(submission_id, request)
    except Exception as exc:
        log.warning("submit of %s %s failed: %s", kind.name, row_id, exc)
        error = f"could not submit the Ray job: {type(exc).__name__}: {exc}"
        settle = kind.lifecycle.settle
        await in_db(sessionmaker, settle, row_id, kind.launched, FAILED, "launch failed", error)
        return False
    log.info("%s %s: %s", kind.name, row_id, reason)
    return True
