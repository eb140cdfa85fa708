"""HTTP endpoints of the checkpoints domain: streamed upload (job side), list, download."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse
from sqlalchemy.orm import Session

from app.checkpoints import service, storage
from app.checkpoints.schemas import CheckpointPublic
from app.core.auth import JobTokenDep, require_api_token
from app.core.db import SessionMaker, read_only, run_in_transaction
from app.core.deps import SessionDep, SessionMakerDep, SettingsDep
from app.core.errors import NotFound
from app.core.params import ExperimentId, streamed_body
from app.experiments import service as experiments
from trainer.wire import CheckpointMeta

router = APIRouter(
    prefix="/experiments", tags=["checkpoints"], dependencies=[Depends(require_api_token)]
)
job_router = APIRouter(prefix="/jobs/experiments", tags=["jobs"])
log = logging.getLogger(__name__)


@router.get("/{experiment_id}/checkpoints", response_model=list[CheckpointPublic])
def list_checkpoints(experiment_id: ExperimentId, session: SessionDep) -> list[CheckpointPublic]:
    experiments.require(session, experiment_id)
    return service.to_public(service.all_checkpoints(session, experiment_id))


def _archive_response(session: Session, root: Path, experiment_id: int, ref: str) -> FileResponse:
    experiments.require(session, experiment_id)
    checkpoint = service.resolve(session, experiment_id, ref)
    path = root / checkpoint.path
    if not path.is_file():
        raise NotFound(f"the archive of checkpoint {checkpoint.id} is missing on disk")
    filename = f"experiment-{experiment_id}-iteration-{checkpoint.iteration}.tar.gz"
    return FileResponse(path, media_type="application/gzip", filename=filename)


@router.get("/{experiment_id}/checkpoints/{ref}/download", response_class=FileResponse)
def download_checkpoint(
    experiment_id: ExperimentId, ref: str, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The .tar.gz exactly as uploaded; `ref` is a checkpoint id, `best` or `latest`."""
    return _archive_response(session, settings.checkpoints_dir, experiment_id, ref)


@job_router.get("/{experiment_id}/resume_checkpoint", response_class=FileResponse)
def job_download_resume_checkpoint(
    experiment_id: ExperimentId, token: JobTokenDep, session: SessionDep, settings: SettingsDep
) -> FileResponse:
    """The checkpoint (of another experiment) this experiment resumes from."""
    exp = experiments.authorize_job(session, experiment_id, token)
    if exp.resume_from_checkpoint_id is None:
        raise NotFound(f"experiment {experiment_id} does not resume from a checkpoint")
    source = session.get(service.Checkpoint, exp.resume_from_checkpoint_id)
    if source is None or source.experiment_id != exp.parent_id:
        raise NotFound(
            f"checkpoint {exp.resume_from_checkpoint_id} of experiment {exp.parent_id} "
            "no longer exists"
        )
    return _archive_response(
        session, settings.checkpoints_dir, source.experiment_id, str(source.id)
    )


def _authorize(sessionmaker: SessionMaker, experiment_id: int, token: str) -> None:
    with read_only(sessionmaker)() as session:
        experiments.authorize_job(session, experiment_id, token)


def _declared_size(request: Request) -> int:
    try:
        return max(0, int(request.headers.get("content-length", "0")))
    except ValueError:
        return 0


def _note_refusal(
    sessionmaker: SessionMaker, experiment_id: int, meta: CheckpointMeta, reason: str
) -> None:
    """Tell the experiment's log why its checkpoint is not stored (the job keeps the archive)."""
    line = (
        f"checkpoint of iteration {meta.iteration} not stored: {reason}; the job keeps the "
        "archive in its job dir"
    )
    try:
        run_in_transaction(sessionmaker, experiments.append_logs, experiment_id, [line])
    except Exception:
        log.exception("could not log the refused checkpoint of experiment %s", experiment_id)


@job_router.put(
    "/{experiment_id}/checkpoints",
    response_model=CheckpointPublic,
    openapi_extra=streamed_body("The checkpoint archive (.tar.gz).", "application/gzip"),
)
async def upload_checkpoint(
    experiment_id: ExperimentId,
    request: Request,
    token: JobTokenDep,
    sessionmaker: SessionMakerDep,
    settings: SettingsDep,
    meta: Annotated[CheckpointMeta, Query()],
) -> CheckpointPublic:
    """The body is the .tar.gz, streamed to a temp file (507 when storage is short), renamed
    into place in the transaction that records it; idempotent per iteration; applies retention.
    Query: `iteration`, `env_steps`, `episode_return_mean` (optional).
    """
    await asyncio.to_thread(_authorize, sessionmaker, experiment_id, token)
    root = settings.checkpoints_dir
    directory = storage.experiment_dir(root, experiment_id)
    limits = storage.StorageLimits.from_settings(settings)
    try:
        await asyncio.to_thread(limits.check, root, _declared_size(request))
        stored = await storage.receive(request.stream(), directory, root, limits)
    except storage.InsufficientStorage as exc:
        await asyncio.to_thread(_note_refusal, sessionmaker, experiment_id, meta, exc.message)
        raise
    final = storage.new_archive_path(root, experiment_id, meta.iteration)

    def record(session: Session) -> tuple[CheckpointPublic, list[Path]]:
        # Again, locked: the experiment may have been deleted or ended while the body streamed.
        exp = experiments.authorize_job(session, experiment_id, token, lock=True)
        os.replace(stored.path, final)
        placed = storage.StoredFile(final, stored.size_bytes, stored.sha256)
        checkpoint, removed = service.register(session, exp, meta, placed, root)
        # Local import: evaluations build on checkpoints (docs/architecture.md).
        from app.evaluations import periodic

        periodic.on_checkpoint(session, exp, checkpoint, final=meta.final)
        public = service.to_public([*service.all_checkpoints(session, experiment_id)])
        found = next((c for c in public if c.id == checkpoint.id), None)
        # An out-of-order upload that is neither recent nor best is dropped by retention at
        # once; the job still gets a success (retrying would not change that).
        return found or service.to_public([checkpoint])[0].model_copy(
            update={"is_best": False, "is_latest": False}
        ), removed

    try:
        public, removed = await asyncio.to_thread(run_in_transaction, sessionmaker, record)
    except BaseException:
        # Not committed: neither the temp file nor the renamed archive may stay behind.
        storage.discard([stored.path, final], directory)
        raise
    storage.remove_files(removed)
    return public
