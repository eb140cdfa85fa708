"""What the routes of a group of runs (a sweep's members, a study's trials) share: stopping
the runs' jobs once the stop has committed, removing the runs' files before a delete commits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from fastapi import Response, status
from sqlalchemy.orm import Session

from app.core.config import Settings
from app.core.db import SessionMaker, run_in_transaction
from app.experiments.files import remove_experiment_files


class GroupService(Protocol):
    """What a group's service module (app/sweeps/service.py, app/studies/service.py) offers
    its stop route."""

    get: Callable[[Session, int], Any]  # the group's row
    detail: Callable[[Session, Any], Any]  # its detail view, the stop route's answer
    stop: Callable[[Session, int], list[int]]  # ends its runs; the ids now `stopping`


async def stop_runs(
    sessionmaker: SessionMaker, jobs: Any, groups: GroupService, group_id: int
) -> Any:
    """In one transaction, mark the group's runs stopped or `stopping` and read its detail;
    then ask the jobs runtime to stop the `stopping` runs' jobs and to act on the group at once."""

    def work(session: Session) -> tuple[list[int], Any]:
        stopping = groups.stop(session, group_id)
        return stopping, groups.detail(session, groups.get(session, group_id))

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
