"""HTTP endpoints of the experiments domain (user side and job side)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response, status
from sqlalchemy.orm import Session

from app.core.auth import JobTokenDep, require_api_token
from app.core.config import Settings
from app.core.db import SessionMaker, run_in_transaction
from app.core.deps import JobsDep, SessionDep, SessionMakerDep, SettingsDep
from app.core.job_routes import add_claim_route, add_spec_route
from app.core.params import ExperimentId
from app.core.system import require_disk_room
from app.core.text import NoNulStr
from app.experiments import service
from app.experiments.files import remove_experiment_files
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.experiments.progress import to_public
from app.experiments.schemas import (
    EventPublic,
    ExperimentChild,
    ExperimentCreate,
    ExperimentDetail,
    ExperimentFork,
    ExperimentPage,
    ExperimentPublic,
    ExperimentResume,
    ExperimentUpdate,
    LogsPublic,
)
from app.experiments.service import JobsControl
from trainer.wire import ExperimentSpec, LogLines, StatusReport

router = APIRouter(
    prefix="/experiments", tags=["experiments"], dependencies=[Depends(require_api_token)]
)
job_router = APIRouter(prefix="/jobs/experiments", tags=["jobs"])


def get_experiment(experiment_id: ExperimentId, session: SessionDep) -> Experiment:
    return service.get(session, experiment_id)


ExperimentDep = Annotated[Experiment, Depends(get_experiment)]


def _detail(session: Session, exp: Experiment) -> ExperimentDetail:
    events = [
        EventPublic(from_status=e.from_status, to_status=e.to_status, reason=e.reason, at=e.at)
        for e in service.events(session, exp.id)
    ]
    children = [
        ExperimentChild(
            id=c.id, name=c.name, status=c.status, kind="resumed" if resumed else "forked"
        )
        for c, resumed in service.children(session, exp.id)
    ]
    return ExperimentDetail(**to_public(exp).model_dump(), events=events, children=children)


async def _create_then_launch(
    settings: Settings,
    sessionmaker: SessionMaker,
    jobs: JobsControl | None,
    fn: Callable[..., Experiment],
    *args: Any,
) -> ExperimentDetail:
    """Store the new experiment (one transaction), then hand it to the jobs runtime; 507 when
    the data dir's disk is below its floor (the run could store nothing)."""
    await asyncio.to_thread(require_disk_room, settings, "a new experiment")

    def work(session: Session) -> ExperimentDetail:
        return _detail(session, fn(session, *args))

    detail = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    if jobs is not None:
        await jobs.on_created(detail.id)
    return detail


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ExperimentDetail)
async def create_experiment(
    body: ExperimentCreate, sessionmaker: SessionMakerDep, jobs: JobsDep, settings: SettingsDep
) -> ExperimentDetail:
    """Validate and store an experiment, then hand it to the jobs runtime (if enabled)."""
    return await _create_then_launch(settings, sessionmaker, jobs, service.create, body)


@router.get("", response_model=ExperimentPage)
def list_experiments(
    session: SessionDep,
    status_: Annotated[list[str] | None, Query(alias="status")] = None,
    tag: Annotated[NoNulStr | None, Query(max_length=200)] = None,
    tag_contains: Annotated[
        NoNulStr | None, Query(max_length=200, description="Part of a tag, ignoring case.")
    ] = None,
    name: Annotated[
        NoNulStr | None, Query(max_length=200, description="Substring of the name.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: str | None = None,
) -> ExperimentPage:
    """Newest first, filtered by status (repeatable or comma-separated), tag (exact) or part
    of a tag, part of the name."""
    statuses = service.parse_statuses(status_ or [])
    items, next_cursor = service.list_experiments(
        session,
        status=statuses,
        tag=tag,
        tag_contains=tag_contains,
        name=name,
        limit=limit,
        cursor=cursor,
    )
    return ExperimentPage(items=[to_public(e) for e in items], next_cursor=next_cursor)


@router.get("/{experiment_id}", response_model=ExperimentDetail)
def get_experiment_detail(exp: ExperimentDep, session: SessionDep) -> ExperimentDetail:
    return _detail(session, exp)


@router.get("/{experiment_id}/events", response_model=list[EventPublic])
def list_events(experiment_id: ExperimentId, session: SessionDep) -> list[EventPublic]:
    return [
        EventPublic(from_status=e.from_status, to_status=e.to_status, reason=e.reason, at=e.at)
        for e in service.events(session, experiment_id)
    ]


@router.post("/{experiment_id}/stop", response_model=ExperimentPublic)
async def stop_experiment(
    experiment_id: ExperimentId, sessionmaker: SessionMakerDep, jobs: JobsDep
) -> ExperimentPublic:
    """Pending / queued: stopped at once. Running: `stopping` until its job has stopped."""

    def work(session: Session) -> ExperimentPublic:
        return to_public(service.request_stop(session, experiment_id))

    exp = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    if jobs is not None and exp.status == ExperimentStatus.stopping:
        await jobs.request_stop(experiment_id)
    return exp


@router.patch("/{experiment_id}", response_model=ExperimentDetail)
def update_experiment(
    experiment_id: ExperimentId, body: ExperimentUpdate, session: SessionDep
) -> ExperimentDetail:
    """Rename, retag or annotate (notes, markdown) an experiment, whatever its status."""
    detail = _detail(session, service.update(session, experiment_id, body))
    session.commit()
    return detail


@router.delete("/{experiment_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_experiment(
    experiment_id: ExperimentId, session: SessionDep, settings: SettingsDep
) -> Response:
    """Finished experiments only: removes metrics, events, logs, evaluations and, before the
    commit, the files (checkpoints, the job's local files, videos) on this machine."""
    service.delete_experiment(session, experiment_id)  # refuses (409) before anything goes
    remove_experiment_files(settings, experiment_id)
    session.commit()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post(
    "/{experiment_id}/resume", status_code=status.HTTP_201_CREATED, response_model=ExperimentDetail
)
async def resume_experiment(
    experiment_id: ExperimentId,
    sessionmaker: SessionMakerDep,
    jobs: JobsDep,
    settings: SettingsDep,
    body: ExperimentResume | None = None,
) -> ExperimentDetail:
    """A new experiment that continues from this one's latest checkpoint; the body (optional)
    gives it new stop criteria."""
    return await _create_then_launch(
        settings, sessionmaker, jobs, service.resume, experiment_id, body
    )


@router.post(
    "/{experiment_id}/fork", status_code=status.HTTP_201_CREATED, response_model=ExperimentDetail
)
async def fork_experiment(
    experiment_id: ExperimentId,
    body: ExperimentFork,
    sessionmaker: SessionMakerDep,
    jobs: JobsDep,
    settings: SettingsDep,
) -> ExperimentDetail:
    """A new experiment with this one's config and the given overrides."""
    return await _create_then_launch(
        settings, sessionmaker, jobs, service.fork, experiment_id, body
    )


@router.get("/{experiment_id}/logs", response_model=LogsPublic)
def get_logs(
    experiment_id: ExperimentId,
    session: SessionDep,
    tail: Annotated[int, Query(ge=1, le=service.LOG_TAIL_MAX_LINES)] = 200,
) -> LogsPublic:
    return LogsPublic(lines=service.tail_logs(session, experiment_id, tail))


# --- job side ------------------------------------------------------------------------------------


add_claim_route(job_router, service.JOB_TOKENS, "experiment_id", "launcher")
add_spec_route(
    job_router,
    service.JOB_TOKENS,
    "experiment_id",
    ExperimentSpec,
    service.job_spec,
    "The config a job runs (and the checkpoint it resumes from, if any).",
)


@job_router.post("/{experiment_id}/status", response_model=ExperimentPublic)
def job_report_status(
    experiment_id: ExperimentId,
    body: StatusReport,
    token: JobTokenDep,
    session: SessionDep,
    settings: SettingsDep,
) -> ExperimentPublic:
    """Idempotent: reporting the status the experiment already has changes nothing (even once
    it ended: a retried final report). Any other report after the end is refused (403).

    `running` while a stop is in flight (`stopping`) is accepted and ignored: the stop wins.
    A final status first stores what the job wrote to its job dir (when that is on this
    machine) but could not deliver, metric rows and checkpoints (app/jobs/salvage.py): the end
    revokes the job's token, so nothing sent later could arrive.
    """
    from app.jobs.salvage import salvage_job_dir  # a later domain: see docs/architecture.md

    current = service.get(session, experiment_id).status
    repeat = current.is_finished and current.value == body.status
    exp = service.authorize_job(session, experiment_id, token, finished_ok=repeat, lock=True)
    found = ""
    if ExperimentStatus(body.status).is_finished and not repeat:
        found = salvage_job_dir(session, settings, experiment_id).describe()
    if not (body.status == "running" and exp.status == ExperimentStatus.stopping):
        reason = (body.reason or f"reported by job: {body.status}") + found
        exp = service.transition(
            session, experiment_id, body.status, reason, error=body.error, log_tail=body.log_tail
        )
    session.commit()
    return to_public(exp)


@job_router.post("/{experiment_id}/logs")
def job_append_logs(
    experiment_id: ExperimentId, body: LogLines, token: JobTokenDep, session: SessionDep
) -> dict[str, int]:
    service.authorize_job(session, experiment_id, token, lock=True)
    count = service.append_logs(session, experiment_id, body.lines)
    session.commit()
    return {"lines": count}
