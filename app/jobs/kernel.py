"""What every kind of Ray job the service runs shares: experiments and evaluations alike.

A kind of job is a small adapter on top of this: its rows carry `status`, `ray_job_id` and
`updated_at`; it is claimed with one compare-and-set (`claim`) before its submission, its
missing Ray job is given `MISSING_GRACE_S` before it counts as lost (`age_s`), and every
database step runs in a worker thread in one transaction (`in_db`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sqlalchemy import update
from sqlalchemy.orm import Session

from app.core.db import SessionMaker, run_in_transaction, utcnow

# How long a claimed job may be unknown to Ray (submission in flight, a slow head) before the
# row is treated as lost.
MISSING_GRACE_S = 30.0

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
