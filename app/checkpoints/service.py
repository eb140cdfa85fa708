"""Checkpoint records: register uploads (idempotent per iteration), list, resolve, retention.

A checkpoint an unfinished experiment will resume from is pinned: retention keeps it (beyond
`keep_checkpoints`) and deleting its experiment is refused until that experiment has finished.
A finished experiment's reference is released (set to NULL) when its checkpoint goes; the
database's foreign key (ON DELETE RESTRICT) refuses any other removal.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.checkpoints.models import Checkpoint
from app.checkpoints.schemas import CheckpointPublic
from app.checkpoints.storage import StoredFile
from app.core.db import publish_after_commit, rows_where, utcnow
from app.core.errors import NotFound
from app.core.from_row import from_row
from app.core.stored_config import top_level_int
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.live.messages import CheckpointMessage
from app.live.topics import experiment_topic
from trainer.wire import CheckpointMeta


def all_checkpoints(session: Session, experiment_id: int) -> list[Checkpoint]:
    where = Checkpoint.experiment_id == experiment_id
    return rows_where(session, Checkpoint, where, Checkpoint.iteration)


def best_and_latest(checkpoints: list[Checkpoint]) -> tuple[Checkpoint | None, Checkpoint | None]:
    """Best: highest mean return (later wins ties); latest: highest iteration."""
    latest = max(checkpoints, key=lambda c: c.iteration, default=None)
    scored = [c for c in checkpoints if c.episode_return_mean is not None]
    best = max(scored, key=lambda c: (c.episode_return_mean, c.iteration), default=None)
    return best, latest


def latest_checkpoint(session: Session, experiment_id: int) -> Checkpoint | None:
    return best_and_latest(all_checkpoints(session, experiment_id))[1]


def to_public(checkpoints: list[Checkpoint]) -> list[CheckpointPublic]:
    best, latest = best_and_latest(checkpoints)
    return [
        from_row(
            CheckpointPublic,
            c,
            is_best=best is not None and c.id == best.id,
            is_latest=latest is not None and c.id == latest.id,
        )
        for c in checkpoints
    ]


def resolve(session: Session, experiment_id: int, ref: str) -> Checkpoint:
    """A checkpoint by id, or `best` / `latest` (best falls back to latest without returns)."""
    checkpoints = all_checkpoints(session, experiment_id)
    best, latest = best_and_latest(checkpoints)
    if ref == "latest":
        found = latest
    elif ref == "best":
        found = best or latest
    else:
        found = next((c for c in checkpoints if str(c.id) == ref), None)
    if found is None:
        raise NotFound(f"experiment {experiment_id} has no checkpoint {ref!r}")
    return found


def pinned(session: Session, checkpoint_ids: Collection[int]) -> dict[int, Experiment]:
    """Checkpoint id -> an unfinished experiment that will resume from it."""
    if not checkpoint_ids:
        return {}
    unfinished = [s for s in ExperimentStatus if not s.is_finished]
    rows = session.scalars(
        select(Experiment).where(
            Experiment.resume_from_checkpoint_id.in_(list(checkpoint_ids)),
            Experiment.status.in_(unfinished),
        )
    )
    return {exp.resume_from_checkpoint_id: exp for exp in rows}  # type: ignore[misc]


def under_evaluation(session: Session, checkpoint_ids: Collection[int]) -> set[int]:
    """Those of `checkpoint_ids` an unfinished evaluation has yet to load (a scheduled one may
    wait for CPU while the run saves several more)."""
    if not checkpoint_ids:
        return set()
    # Local import: evaluations build on checkpoints (docs/architecture.md).
    from app.evaluations.models import Evaluation, EvaluationStatus

    unfinished = [s for s in EvaluationStatus if not s.is_finished]
    rows = session.scalars(
        select(Evaluation.checkpoint_id).where(
            Evaluation.checkpoint_id.in_(list(checkpoint_ids)),
            Evaluation.status.in_(unfinished),
        )
    )
    return set(rows)


def release(session: Session, checkpoint_ids: Collection[int]) -> None:
    """Clear finished experiments' references to checkpoints about to be deleted."""
    if checkpoint_ids:
        session.execute(
            update(Experiment)
            .where(Experiment.resume_from_checkpoint_id.in_(list(checkpoint_ids)))
            .values(resume_from_checkpoint_id=None)
            .execution_options(synchronize_session=False)
        )


def register(
    session: Session, exp: Experiment, meta: CheckpointMeta, stored: StoredFile, root: Path
) -> tuple[Checkpoint, list[Path]]:
    """Record an archive already at its final path, then apply retention; returns the files
    the caller removes after the commit (an archive this one replaces, retention's)."""
    existing = session.scalars(
        select(Checkpoint).where(
            Checkpoint.experiment_id == exp.id, Checkpoint.iteration == meta.iteration
        )
    ).one_or_none()
    replaced = [root / existing.path] if existing is not None else []
    checkpoint = existing or Checkpoint(experiment_id=exp.id, iteration=meta.iteration)
    checkpoint.env_steps = meta.env_steps
    checkpoint.episode_return_mean = meta.episode_return_mean
    checkpoint.size_bytes = stored.size_bytes
    checkpoint.sha256 = stored.sha256
    checkpoint.path = str(stored.path.relative_to(root))
    checkpoint.created_at = utcnow()
    session.add(checkpoint)
    session.flush()
    removed = apply_retention(session, exp)
    if checkpoint.id not in {c.id for c in removed}:
        public = {c.id: c for c in to_public(all_checkpoints(session, exp.id))}[checkpoint.id]
        publish_after_commit(
            session,
            experiment_topic(exp.id),
            CheckpointMessage(experiment_id=exp.id, checkpoint=public),
        )
    stale = [p for p in replaced if p != stored.path]
    return checkpoint, stale + [root / c.path for c in removed]


def apply_retention(session: Session, exp: Experiment) -> list[Checkpoint]:
    """Keep the `keep_checkpoints` most recent, the best, those an unfinished experiment will
    resume from and those an unfinished evaluation evaluates; delete the rest's rows."""
    keep_count = max(1, top_level_int(exp.config, "keep_checkpoints"))
    checkpoints = all_checkpoints(session, exp.id)
    best, _ = best_and_latest(checkpoints)
    keep = {c.id for c in checkpoints[-keep_count:]}
    if best is not None:
        keep.add(best.id)
    candidates = [c.id for c in checkpoints if c.id not in keep]
    keep.update(pinned(session, candidates))
    keep.update(under_evaluation(session, candidates))
    removed = [c for c in checkpoints if c.id not in keep]
    if removed:
        ids = [c.id for c in removed]
        release(session, ids)
        session.execute(delete(Checkpoint).where(Checkpoint.id.in_(ids)))
    return removed
