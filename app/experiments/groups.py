"""What the routes of a group of runs (a sweep's members, a study's trials) share: stopping
the runs' jobs once the stop has committed, removing the runs' files before a delete commits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import Response, status
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionMaker, run_in_transaction
from app.experiments.files import remove_experiment_files

T = TypeVar("T")


async def stop_runs(
    sessionmaker: SessionMaker, jobs: Any, work: Callable[[Session], tuple[list[int], T]]
) -> T:
    """Run `work` in one transaction (it marks the group's runs stopped or `stopping` and
    returns the ids of the `stopping` ones with the answer), then ask the jobs runtime to stop
    those runs' jobs and to act on the group at once."""
    stopping, answer = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    if jobs is not None:
        for experiment_id in stopping:
            await jobs.request_stop(experiment_id)
        jobs.wake()
    return answer


def delete_runs(session: Session, settings: Settings, run_ids: list[int]) -> Response:
    """Remove the deleted runs' files before the commit (as deleting one run does), commit,
    and answer 204."""
    for experiment_id in run_ids:
        remove_experiment_files(settings, experiment_id)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
