"""Evaluations: create, query, lifecycle, job tokens, episode results, videos, delete.

Every function takes a session (its caller owns the transaction) and raises domain errors.
Each change is published to the experiment's live topic as an `evaluation` message (the
summary, without per-episode values, so it fits a PostgreSQL NOTIFY) once the transaction
commits.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.checkpoints import service as checkpoints
from app.core.auth import JobTokens
from app.core.db import get_row, publish_after_commit, rows_where, utcnow
from app.core.errors import Conflict, InvalidInput, NotFound
from app.core.from_row import from_row
from app.core.lifecycle import Lifecycle
from app.evaluations import files
from app.evaluations.models import ALLOWED, Evaluation, EvaluationEpisode, EvaluationStatus
from app.evaluations.schemas import (
    EvaluationCreate,
    EvaluationDetail,
    EvaluationPublic,
    VideoPublic,
)
from app.experiments import service as experiments
from app.live.messages import EvaluationMessage
from app.live.topics import experiment_topic
from trainer.wire import API_PREFIX, EpisodeResult, EvaluationSpec, VideoMeta

E = EvaluationStatus


# --- queries ----------------------------------------------------------------------------------


def get(session: Session, evaluation_id: int, *, lock: bool = False) -> Evaluation:
    return get_row(session, Evaluation, evaluation_id, "evaluation", lock=lock)


def list_for_experiment(session: Session, experiment_id: int) -> list[Evaluation]:
    """Newest first."""
    experiments.require(session, experiment_id)
    where = Evaluation.experiment_id == experiment_id
    return rows_where(session, Evaluation, where, Evaluation.id.desc())


def episode_rows(session: Session, evaluation_id: int) -> list[EvaluationEpisode]:
    where = EvaluationEpisode.evaluation_id == evaluation_id
    return rows_where(session, EvaluationEpisode, where, EvaluationEpisode.index)


# --- create / lifecycle -----------------------------------------------------------------------


def create(session: Session, experiment_id: int, data: EvaluationCreate) -> Evaluation:
    """A pending evaluation of one checkpoint of the experiment.

    404: no such experiment; 409: it has no checkpoint yet; 422 (field `checkpoint`): it has
    no checkpoint with that id.
    """
    experiments.get(session, experiment_id)
    ref = str(data.checkpoint)
    if not checkpoints.all_checkpoints(session, experiment_id):
        raise Conflict(f"experiment {experiment_id} has no checkpoint to evaluate yet")
    try:
        checkpoint = checkpoints.resolve(session, experiment_id, ref)
    except NotFound:
        message = f"experiment {experiment_id} has no checkpoint {ref}"
        raise InvalidInput(
            "unknown checkpoint", fields=[{"field": "checkpoint", "message": message}]
        ) from None
    return add(session, checkpoint, data, ref=ref)


def add(
    session: Session,
    checkpoint: checkpoints.Checkpoint,
    data: EvaluationCreate,
    *,
    ref: str,
    scheduled: bool = False,
    reason: str = "created",
) -> Evaluation:
    """A pending evaluation of `checkpoint` (already resolved), announced after commit."""
    evaluation = Evaluation(
        **data.model_dump(exclude={"checkpoint"}),  # episodes, seed, deterministic, video
        experiment_id=checkpoint.experiment_id,
        checkpoint_id=checkpoint.id,
        checkpoint_ref=ref,
        checkpoint_iteration=checkpoint.iteration,
        checkpoint_env_steps=checkpoint.env_steps,
        scheduled=scheduled,
        status=E.pending,
        reason=reason,
        episodes_done=0,
    )
    session.add(evaluation)
    session.flush()
    announce(session, evaluation)
    return evaluation


def _record(session: Session, evaluation: Evaluation, previous: Any, reason: str) -> None:
    evaluation.reason = reason
    announce(session, evaluation)


LIFECYCLE = Lifecycle[Evaluation](
    "evaluation", EvaluationStatus, ALLOWED, lambda s, i: get(s, i, lock=True), _record
)
# Move an evaluation to a status and publish it after commit (see Lifecycle).
transition = LIFECYCLE.transition


def announce(session: Session, evaluation: Evaluation, *, deleted: bool = False) -> None:
    """Tell the experiment page about the evaluation (after commit)."""
    publish_after_commit(
        session,
        experiment_topic(evaluation.experiment_id),
        EvaluationMessage(
            experiment_id=evaluation.experiment_id,
            evaluation_id=evaluation.id,
            evaluation=None if deleted else to_public(evaluation),
        ),
    )


# --- job tokens (one place, so the delivery mechanism can change without touching callers) ----


JOB_TOKENS = JobTokens("evaluation", get, lambda e: e.status == EvaluationStatus.running)
issue_job_token = JOB_TOKENS.issue
issue_job_claim = JOB_TOKENS.claim
redeem_job_claim = JOB_TOKENS.redeem
authorize_job = JOB_TOKENS.authorize


def job_spec(evaluation: Evaluation) -> EvaluationSpec:
    """What the evaluation's job runs."""
    return from_row(
        EvaluationSpec,
        evaluation,
        evaluation_id=evaluation.id,
        video_max_bytes=files.VIDEO_MAX_BYTES,
        video_max_frames=files.VIDEO_MAX_FRAMES,
    )


def report_status(
    session: Session,
    evaluation: Evaluation,
    status: str,
    reason: str,
    *,
    error: str | None = None,
    log_tail: str | None = None,
    video_message: str | None = None,
) -> Evaluation:
    """The job's own report: `running` records when it started; a final status ends it."""
    if video_message is not None:
        evaluation.video_message = video_message
    if status == E.running and evaluation.job_started_at is None:
        evaluation.job_started_at = utcnow()
        if evaluation.status == E.running:
            announce(session, evaluation)
    if status == E.succeeded and evaluation.episodes_done < evaluation.episodes:
        raise Conflict(
            f"evaluation {evaluation.id} has {evaluation.episodes_done} of "
            f"{evaluation.episodes} episodes; it cannot succeed yet"
        )
    return transition(session, evaluation.id, status, reason, error=error, log_tail=log_tail)


# --- results ------------------------------------------------------------------------------------


def record_episodes(session: Session, evaluation: Evaluation, results: list[EpisodeResult]) -> int:
    """Store finished episodes (idempotent per index) and refresh the summary statistics."""
    indices = sorted({r.index for r in results})
    if indices[-1] >= evaluation.episodes:
        raise InvalidInput(
            "episode index out of range",
            fields=[
                {
                    "field": "episodes.index",
                    "message": f"must be below the evaluation's {evaluation.episodes} episodes",
                }
            ],
        )
    session.execute(
        delete(EvaluationEpisode).where(
            EvaluationEpisode.evaluation_id == evaluation.id,
            EvaluationEpisode.index.in_(indices),
        )
    )
    latest = {r.index: r for r in results}  # a repeated index in one batch: the last wins
    session.add_all(
        EvaluationEpisode(
            evaluation_id=evaluation.id,
            index=r.index,
            episode_return=r.episode_return,
            length=r.length,
        )
        for r in latest.values()
    )
    session.flush()
    returns = [row.episode_return for row in episode_rows(session, evaluation.id)]
    evaluation.episodes_done = len(returns)
    evaluation.return_mean = statistics.fmean(returns)
    evaluation.return_std = statistics.pstdev(returns)  # numpy's default, as `rollout evaluate`
    evaluation.return_min = min(returns)
    evaluation.return_max = max(returns)
    evaluation.updated_at = utcnow()
    announce(session, evaluation)
    return len(latest)


def set_video(
    session: Session, evaluation: Evaluation, meta: VideoMeta, relative_path: Path, size: int
) -> Evaluation:
    evaluation.video = {**meta.model_dump(mode="json"), "size_bytes": size}
    evaluation.video_path = str(relative_path)
    evaluation.video_message = None
    evaluation.updated_at = utcnow()
    announce(session, evaluation)
    return evaluation


def delete_evaluation(session: Session, evaluation_id: int) -> Evaluation:
    """Delete the rows; the caller stops the job (if it runs) and removes files after commit."""
    evaluation = get(session, evaluation_id, lock=True)
    session.execute(
        delete(EvaluationEpisode).where(EvaluationEpisode.evaluation_id == evaluation_id)
    )
    session.delete(evaluation)
    announce(session, evaluation, deleted=True)
    return evaluation


# --- wire -----------------------------------------------------------------------------------------


def video_public(evaluation: Evaluation) -> VideoPublic | None:
    info: dict[str, Any] | None = evaluation.video
    if not info or not evaluation.video_path:
        return None
    frames, fps = int(info["frames"]), float(info["fps"])
    return VideoPublic(
        url=f"{API_PREFIX}/evaluations/{evaluation.id}/video",
        codec=info["codec"],
        media_type=info["media_type"],
        size_bytes=int(info["size_bytes"]),
        frames=frames,
        fps=fps,
        width=int(info["width"]),
        height=int(info["height"]),
        duration_s=frames / fps if fps > 0 else 0.0,
        source_frames=int(info["source_frames"]),
        frame_step=int(info["frame_step"]),
        subsampled=int(info["frame_step"]) > 1,
        cut=bool(info["cut"]),
    )


def to_public(evaluation: Evaluation) -> EvaluationPublic:
    return from_row(
        EvaluationPublic,
        evaluation,
        checkpoint=evaluation.checkpoint_ref,
        return_mean=_finite(evaluation.return_mean),
        return_std=_finite(evaluation.return_std),
        return_min=_finite(evaluation.return_min),
        return_max=_finite(evaluation.return_max),
        video=video_public(evaluation),
    )


def to_detail(session: Session, evaluation: Evaluation) -> EvaluationDetail:
    rows = episode_rows(session, evaluation.id)
    return EvaluationDetail(
        **to_public(evaluation).model_dump(),
        returns=[r.episode_return for r in rows],
        lengths=[r.length for r in rows],
        log_tail=evaluation.log_tail,
    )


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
