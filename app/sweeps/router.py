"""HTTP endpoints of the sweeps domain."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status
from sqlalchemy.orm import Session

from app.core.auth import require_api_token
from app.core.db import run_in_transaction
from app.core.deps import JobsDep, SessionDep, SessionMakerDep, SettingsDep
from app.core.params import SweepId
from app.experiments.groups import delete_runs, stop_runs
from app.sweeps import service
from app.sweeps.metrics import DEFAULT_POINTS, MAX_POINTS
from app.sweeps.schemas import SweepCreate, SweepDetail, SweepList, SweepMetrics

router = APIRouter(prefix="/sweeps", tags=["sweeps"], dependencies=[Depends(require_api_token)])


@router.post("", status_code=status.HTTP_201_CREATED, response_model=SweepDetail)
async def create_sweep(
    body: SweepCreate, sessionmaker: SessionMakerDep, jobs: JobsDep
) -> SweepDetail:
    """Store the sweep and one experiment per grid point x seed (all or nothing: a bad grid
    key, value or seed is a 422 naming it), then queue the members like any experiment."""

    def work(session: Session) -> SweepDetail:
        return service.detail(session, service.create(session, body))

    detail = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    if jobs is not None and detail.members:
        await jobs.on_created(detail.members[0].id)  # wakes the reconciler for all of them
    return detail


@router.get("", response_model=SweepList)
def list_sweeps(session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 100) -> SweepList:
    """Newest first, with member counts per status."""
    rows = service.list_sweeps(session, limit)
    return SweepList(items=[service.to_public(s, c) for s, c in rows])


@router.get("/{sweep_id}", response_model=SweepDetail)
def get_sweep(sweep_id: SweepId, session: SessionDep) -> SweepDetail:
    return service.detail(session, service.get(session, sweep_id))


@router.post("/{sweep_id}/stop", response_model=SweepDetail)
async def stop_sweep(
    sweep_id: SweepId, sessionmaker: SessionMakerDep, jobs: JobsDep
) -> SweepDetail:
    """Waiting members are stopped at once (they never start); running ones go `stopping`
    until their jobs have saved a final checkpoint. Finished members are left alone."""
    return await stop_runs(sessionmaker, jobs, service, sweep_id)


@router.delete("/{sweep_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_sweep(sweep_id: SweepId, session: SessionDep, settings: SettingsDep) -> Response:
    """Only once every member has ended (409 otherwise): deletes the sweep and its members as
    deleting each experiment would (metrics, checkpoints, files)."""
    return delete_runs(session, settings, service.delete(session, sweep_id))


@router.get("/{sweep_id}/metrics", response_model=SweepMetrics)
def get_sweep_metrics(
    sweep_id: SweepId,
    session: SessionDep,
    names: Annotated[
        str | None, Query(description="Comma-separated; default episode_return_mean.")
    ] = None,
    points: Annotated[
        int, Query(ge=2, le=MAX_POINTS, description="Steps of the common grid.")
    ] = DEFAULT_POINTS,
) -> SweepMetrics:
    """Per seed group: mean, min/max and a 95 % bootstrap interval of the mean on one env-steps
    grid (`n`: members that have reached each step), and the group's final values."""
    sweep = service.get(session, sweep_id)
    return service.metrics(session, sweep, service.parse_names(names), points)
