"""HTTP endpoints of the evaluations domain (user side and job side)."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from app.checkpoints import service as checkpoints
from app.core import layout
from app.core.auth import JobTokenDep, require_api_token
from app.core.db import SessionMaker, run_in_transaction
from app.core.deps import JobsDep, SessionDep, SessionMakerDep, SettingsDep
from app.core.errors import NotFound
from app.core.job_routes import add_claim_route, add_spec_route
from app.core.params import EvaluationId, ExperimentId, streamed_body
from app.evaluations import files, service
from app.evaluations.scheduling import scheduler_of
from app.evaluations.schemas import (
    EvaluationCreate,
    EvaluationDetail,
    EvaluationPublic,
    VideoPublic,
)
from trainer.wire import (
    EpisodeResults,
    EvaluationSpec,
    EvaluationStatusReport,
    VideoMeta,
)

log = logging.getLogger(__name__)

router = APIRouter(tags=["evaluations"], dependencies=[Depends(require_api_token)])
job_router = APIRouter(prefix="/jobs/evaluations", tags=["jobs"])


@router.post(
    "/experiments/{experiment_id}/evaluations",
    status_code=status.HTTP_201_CREATED,
    response_model=EvaluationDetail,
)
async def create_evaluation(
    experiment_id: ExperimentId,
    body: EvaluationCreate,
    sessionmaker: SessionMakerDep,
    jobs: JobsDep,
) -> EvaluationDetail:
    """Evaluate a checkpoint (`best`, `latest` or an id) as a small Ray job, queued with
    experiments. 404: no such experiment; 409: no checkpoint yet; 422: bad fields or an
    unknown checkpoint id."""

    def work(session: Session) -> EvaluationDetail:
        return service.to_detail(session, service.create(session, experiment_id, body))

    detail = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    scheduler = scheduler_of(jobs)
    if scheduler is not None:
        scheduler.wake()
    return detail


@router.get("/experiments/{experiment_id}/evaluations", response_model=list[EvaluationPublic])
def list_evaluations(experiment_id: ExperimentId, session: SessionDep) -> list[EvaluationPublic]:
    """Newest first, without per-episode values."""
    return [service.to_public(e) for e in service.list_for_experiment(session, experiment_id)]


@router.get("/evaluations/{evaluation_id}", response_model=EvaluationDetail)
def get_evaluation(evaluation_id: EvaluationId, session: SessionDep) -> EvaluationDetail:
    return service.to_detail(session, service.get(session, evaluation_id))


@router.get("/evaluations/{evaluation_id}/video", response_class=FileResponse)
def get_video(
    evaluation_id: EvaluationId, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The first episode's video (WebM/VP9 from the service); supports Range requests."""
    evaluation = service.get(session, evaluation_id)
    video = service.video_public(evaluation)
    if video is None or evaluation.video_path is None:
        why = f": {evaluation.video_message}" if evaluation.video_message else ""
        raise NotFound(f"evaluation {evaluation_id} has no video{why}")
    path = settings.data_dir / evaluation.video_path
    if not path.is_file():
        raise NotFound(f"the video of evaluation {evaluation_id} is missing on disk")
    suffix = path.suffix
    filename = f"experiment-{evaluation.experiment_id}-evaluation-{evaluation_id}{suffix}"
    return FileResponse(
        path, media_type=video.media_type, filename=filename, content_disposition_type="inline"
    )


@router.delete("/evaluations/{evaluation_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_evaluation(
    evaluation_id: EvaluationId,
    sessionmaker: SessionMakerDep,
    settings: SettingsDep,
    jobs: JobsDep,
) -> Response:
    """Any status: a running evaluation's Ray job is stopped; its video is removed."""

    def work(session: Session) -> tuple[str | None, bool, str | None]:
        evaluation = service.delete_evaluation(session, evaluation_id)
        active = not evaluation.status.is_finished
        return evaluation.ray_job_id, active, evaluation.video_path

    ray_job_id, active, video_path = await asyncio.to_thread(run_in_transaction, sessionmaker, work)
    files.remove_evaluation_files(settings, evaluation_id, video_path)
    scheduler = scheduler_of(jobs)
    if scheduler is not None and active and ray_job_id is not None:
        await scheduler.stop(ray_job_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


# --- job side ------------------------------------------------------------------------------------


add_claim_route(job_router, service.JOB_TOKENS, "evaluation_id", "scheduler")


add_spec_route(
    job_router,
    service.JOB_TOKENS,
    "evaluation_id",
    EvaluationSpec,
    service.job_spec,
    "The checkpoint, episodes and video limits an evaluation job runs.",
)


@job_router.get("/{evaluation_id}/checkpoint", response_class=FileResponse)
def job_download_checkpoint(
    evaluation_id: EvaluationId, token: JobTokenDep, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The archive of the checkpoint under evaluation."""
    evaluation = service.authorize_job(session, evaluation_id, token)
    checkpoint = session.get(checkpoints.Checkpoint, evaluation.checkpoint_id)
    if checkpoint is None:
        raise NotFound(
            f"checkpoint {evaluation.checkpoint_id} (iteration "
            f"{evaluation.checkpoint_iteration}) no longer exists: retention removed it"
        )
    path = settings.checkpoints_dir / checkpoint.path
    if not path.is_file():
        raise NotFound(f"the archive of checkpoint {checkpoint.id} is missing on disk")
    return FileResponse(path, media_type="application/gzip")


@job_router.post("/{evaluation_id}/status", response_model=EvaluationPublic)
def job_report_status(
    evaluation_id: EvaluationId,
    body: EvaluationStatusReport,
    token: JobTokenDep,
    session: SessionDep,
) -> EvaluationPublic:
    """Idempotent: the status the evaluation already has changes nothing (even once ended)."""
    evaluation = service.get(session, evaluation_id)
    repeat = evaluation.status.is_finished and evaluation.status == body.status
    evaluation = service.authorize_job(session, evaluation_id, token, finished_ok=repeat, lock=True)
    if not repeat:
        evaluation = service.report_status(
            session,
            evaluation,
            body.status,
            body.reason or f"reported by job: {body.status}",
            error=body.error,
            log_tail=body.log_tail,
            video_message=body.video_message,
        )
        session.commit()
    return service.to_public(evaluation)


@job_router.post("/{evaluation_id}/episodes")
def job_post_episodes(
    evaluation_id: EvaluationId, body: EpisodeResults, token: JobTokenDep, session: SessionDep
) -> dict[str, int]:
    evaluation = service.authorize_job(session, evaluation_id, token, lock=True)
    count = service.record_episodes(session, evaluation, body.episodes)
    session.commit()
    return {"episodes": count}


def _authorize(sessionmaker: SessionMaker, evaluation_id: int, token: str) -> int:
    with sessionmaker() as session:
        return service.authorize_job(session, evaluation_id, token).experiment_id


@job_router.put(
    "/{evaluation_id}/video",
    response_model=VideoPublic,
    openapi_extra=streamed_body("The video file.", "video/webm", "video/mp4"),
)
async def job_upload_video(
    evaluation_id: EvaluationId,
    request: Request,
    token: JobTokenDep,
    meta: Annotated[VideoMeta, Query()],
    sessionmaker: SessionMakerDep,
    settings: SettingsDep,
) -> VideoPublic:
    """The body is the video file (at most VIDEO_MAX_BYTES); a re-upload replaces it."""
    experiment_id = await asyncio.to_thread(_authorize, sessionmaker, evaluation_id, token)
    relative = layout.video_relative_path(experiment_id, evaluation_id, meta.media_type)
    size = await files.receive_video(request.stream(), settings.data_dir / relative)

    def record(session: Session) -> VideoPublic:
        evaluation = service.authorize_job(session, evaluation_id, token, lock=True)
        service.set_video(session, evaluation, meta, relative, size)
        video = service.video_public(evaluation)
        assert video is not None
        return video

    return await asyncio.to_thread(run_in_transaction, sessionmaker, record)
