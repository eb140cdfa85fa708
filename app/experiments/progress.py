"""How far an experiment is toward its stop criterion, and its public view."""

from __future__ import annotations

from typing import Any

from app.core.db import utcnow
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.experiments.schemas import ExperimentPublic


def progress(exp: Experiment) -> float:
    """Max over the configured criteria of the fraction reached, in [0, 1].

    The run stops at the first criterion reached, so the most advanced one is the honest
    estimate. Wall time counts from the job's own clock when it reported one.
    """
    if exp.status == ExperimentStatus.succeeded:
        return 1.0
    stop = exp.config.get("stop") if isinstance(exp.config, dict) else None
    env_steps, wall_seconds, target = (
        _positive(stop, key) for key in ("env_steps", "wall_seconds", "episode_return_mean")
    )
    fractions = [0.0]
    if env_steps and exp.env_steps:
        fractions.append(exp.env_steps / env_steps)
    if wall_seconds:
        elapsed = exp.elapsed_s
        if elapsed is None and exp.started_at is not None:
            elapsed = ((exp.finished_at or utcnow()) - exp.started_at).total_seconds()
        if elapsed:
            fractions.append(elapsed / wall_seconds)
    if target and exp.best_return is not None and exp.best_return > 0:
        fractions.append(exp.best_return / target)
    return min(1.0, max(fractions))


def _positive(stop: Any, key: str) -> float | None:
    """A positive number from the stored stop criteria; None for anything else (a config
    stored by an older version may not validate any more, and must still be listed)."""
    value = stop.get(key) if isinstance(stop, dict) else None
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def to_public(exp: Experiment) -> ExperimentPublic:
    return ExperimentPublic(
        id=exp.id,
        name=exp.name,
        tags=exp.tag_names,
        config=exp.config,
        status=exp.status,
        created_at=exp.created_at,
        started_at=exp.started_at,
        finished_at=exp.finished_at,
        progress=progress(exp),
        env_steps=exp.env_steps,
        episode_return_mean=exp.episode_return_mean,
        best_return=exp.best_return,
        error=exp.error,
        log_tail=exp.log_tail,
        ray_job_id=exp.ray_job_id,
        parent_id=exp.parent_id,
        resume_from_checkpoint_id=exp.resume_from_checkpoint_id,
        sweep_id=exp.sweep_id,
        sweep_group=exp.sweep_group,
        notes=exp.notes,
    )
