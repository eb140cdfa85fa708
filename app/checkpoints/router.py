"""HTTP endpoints of the checkpoints domain: streamed upload (job side), list, download."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from app.checkpoints import service, storage
from app.checkpoints.schemas import CheckpointPublic
from app.core.auth import JobTokenDep, require_api_token
from app.core.db import SessionMaker, run_in_transaction
from app.core.deps import SessionDep, SessionMakerDep, SettingsDep
from app.core.errors import NotFound
from app.experiments import service as experiments
from trainer.wire import CheckpointMeta

router = APIRouter(
    prefix="/experiments", tags=["checkpoints"], dependencies=[Depends(require_api_token)]
)
job_router = APIRouter(prefix="/jobs/experiments", tags=["jobs"])


@router.get("/{experiment_id}/checkpoints", response_model=list[CheckpointPublic])
def list_checkpoints(experiment_id: int, session: SessionDep) -> list[CheckpointPublic]:
    experiments.get(session, experiment_id)
    return service.to_public(service.all_checkpoints(session, experiment_id))


def _archive_response(session: Session, root: Path, experiment_id: int, ref: str) -> FileResponse:
    experiments.get(session, experiment_id)
    checkpoint = service.resolve(session, experiment_id, ref)
    path = root / checkpoint.path
    if not path.is_file():
        raise NotFound(f"the archive of checkpoint {checkpoint.id} is missing on disk")
    filename = f"experiment-{experiment_id}-iteration-{checkpoint.iteration}.tar.gz"
    return FileResponse(path, media_type="application/gzip", filename=filename)


@router.get("/{experiment_id}/checkpoints/{ref}/download", response_class=FileResponse)
def download_checkpoint(
    experiment_id: int, ref: str, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The .tar.gz exactly as uploaded; `ref` is a checkpoint id, `best` or `latest`."""
    return _archive_response(session, settings.checkpoints_dir, experiment_id, ref)


@job_router.get("/{experiment_id}/resume_checkpoint", response_class=FileResponse)
def job_download_resume_checkpoint(
    experiment_id: int, token: JobTokenDep, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The checkpoint (of another experiment) this experiment resumes from."""
    exp = experiments.authorize_job(session, experiment_id, token)
    if exp.resume_from_checkpoint_id is None:
        raise NotFound(f"experiment {experiment_id} does not resume from a checkpoint")
    source = session.get(service.Checkpoint, exp.resume_from_checkpoint_id)
    if source is None:
        raise NotFound(f"checkpoint {exp.resume_from_checkpoint_id} no longer exists")
    return _archive_response(
        session, settings.checkpoints_dir, source.experiment_id, str(source.id)
    )


def _authorize(sessionmaker: SessionMaker, experiment_id: int, token: str) -> None:
    with sessionmaker() as session:
        experiments.authorize_job(session, experiment_id, token)


@job_router.put("/{experiment_id}/checkpoints", response_model=CheckpointPublic)
async def upload_checkpoint(
    experiment_id: int,
    request: Request,
    token: JobTokenDep,
    sessionmaker: SessionMakerDep,
    settings: SettingsDep,
    iteration: Annotated[int, Query(ge=0)],
    env_steps: Annotated[int, Query(ge=0)],
    episode_return_mean: float | None = None,
) -> CheckpointPublic:
    """The body is the .tar.gz, streamed to disk; idempotent per iteration; applies retention."""
    meta = CheckpointMeta(
        iteration=iteration, env_steps=env_steps, episode_return_mean=episode_return_mean
    )
    await asyncio.to_thread(_authorize, sessionmaker, experiment_id, token)
    root = settings.checkpoints_dir
    stored = await storage.receive(
        request.stream(), storage.archive_path(root, experiment_id, iteration)
    )

    def record(session: Session) -> tuple[CheckpointPublic, list[Path]]:
        exp = experiments.get(session, experiment_id)
        checkpoint, removed = service.register(session, exp, meta, stored, root)
        public = service.to_public([*service.all_checkpoints(session, experiment_id)])
        found = next((c for c in public if c.id == checkpoint.id), None)
        # An out-of-order upload that is neither recent nor best is dropped by retention at
        # once; the job still gets a success (retrying would not change that).
        return found or service.to_public([checkpoint])[0].model_copy(
            update={"is_best": False, "is_latest": False}
        ), removed

    public, removed = await asyncio.to_thread(run_in_transaction, sessionmaker, record)
    storage.remove_files(removed)
    return public
