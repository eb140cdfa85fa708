"""HTTP endpoints of the studies domain."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response, status
from sqlalchemy.orm import Session

from app.core.auth import require_api_token
from app.core.db import run_in_transaction
from app.core.deps import JobsDep, SessionDep, SessionMakerDep, SettingsDep
from app.core.params import ExperimentId, StudyId
from app.experiments.groups import delete_runs, stop_runs
from app.studies import service
from app.studies.schemas import StudyBest, StudyCreate, StudyDetail, StudyList, TrialOf

router = APIRouter(prefix="/studies", tags=["studies"], dependencies=[Depends(require_api_token)])
# Routes about an experiment that only the studies domain can answer.
experiments_router = APIRouter(
    prefix="/experiments", tags=["studies"], dependencies=[Depends(require_api_token)]
)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=StudyDetail)
async def create_study(
    body: StudyCreate, sessionmaker: SessionMakerDep, jobs: JobsDep
) -> StudyDetail:
    """Store the study (a 422 names every bad range, choice, config field or objective, and
    nothing is stored); the reconciler then suggests its first `max_parallel` trials, each an
    experiment queued like any other."""

    def work(session: Session) -> StudyDetail:
        return service.detail(session, service.create(session, body))

    detail = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    if jobs is not None:
        jobs.wake()
    return detail


@router.get("", response_model=StudyList)
def list_studies(
    session: SessionDep, limit: Annotated[int, Query(ge=1, le=500)] = 100
) -> StudyList:
    """Newest first, with trial counts per state and the best value so far."""
    return StudyList(items=service.list_studies(session, limit))


@router.get("/{study_id}", response_model=StudyDetail)
def get_study(study_id: StudyId, session: SessionDep) -> StudyDetail:
    """Every trial (params, state, intermediate values, value) and the parameters'
    importances."""
    return service.detail(session, service.get(session, study_id))


@router.get("/{study_id}/best", response_model=StudyBest)
def get_best_trial(study_id: StudyId, session: SessionDep) -> StudyBest:
    """The best complete trial and its resolved config (404 while none is complete)."""
    return service.best(session, study_id)


@router.post("/{study_id}/stop", response_model=StudyDetail)
async def stop_study(
    study_id: StudyId, sessionmaker: SessionMakerDep, jobs: JobsDep
) -> StudyDetail:
    """Suggest nothing more; waiting trials end at once, running ones go `stopping` until
    their jobs have saved a final checkpoint. Ended trials are left alone."""
    return await stop_runs(sessionmaker, jobs, service, study_id)


@router.delete("/{study_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_study(study_id: StudyId, session: SessionDep, settings: SettingsDep) -> Response:
    """Only once every trial has ended (409 otherwise): deletes the study, its trials and
    their runs as deleting each run would (metrics, checkpoints, files)."""
    return delete_runs(session, settings, service.delete(session, study_id))


@experiments_router.get("/{experiment_id}/trial", response_model=TrialOf | None)
def get_trial_of(experiment_id: ExperimentId, session: SessionDep) -> TrialOf | None:
    """The study trial this experiment runs (study, trial number, state and note), or null
    when it is no study's trial; 404 when the experiment does not exist."""
    return service.trial_of(session, experiment_id)
