"""How far an experiment is toward its stop criterion, and its public view."""

from __future__ import annotations

from typing import Any

from app.core.db import utcnow
from app.core.from_row import from_row
from app.core.stored_config import StoredConfig
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.experiments.schemas import ExperimentPublic
from trainer.config import PPOConfig


def progress(exp: Experiment) -> float:
    """Max over the configured criteria of the fraction reached, in [0, 1].

    The run stops at the first criterion reached, so the most advanced one is the honest
    estimate. Wall time counts from the job's own clock when it reported one.
    """
    if exp.status == ExperimentStatus.succeeded:
        return 1.0
    env_steps, wall_seconds, target = _criteria(exp.config)
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


def _criteria(config: StoredConfig) -> tuple[float | None, float | None, float | None]:
    """The positive stop criteria (env steps, wall seconds, return target); None for the
    others. A stale config is still listed: its criteria are read as far as they make sense."""
    if isinstance(config, PPOConfig):
        stop = config.stop
        values: tuple[Any, ...] = (stop.env_steps, stop.wall_seconds, stop.episode_return_mean)
    else:
        raw = config.to_json_dict().get("stop")
        raw = raw if isinstance(raw, dict) else {}
        values = tuple(raw.get(k) for k in ("env_steps", "wall_seconds", "episode_return_mean"))
    env_steps, wall_seconds, target = (_positive(v) for v in values)
    return env_steps, wall_seconds, target


def _positive(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def to_public(exp: Experiment) -> ExperimentPublic:
    return from_row(
        ExperimentPublic,
        exp,
        tags=exp.tag_names,
        config=exp.config.to_json_dict(),
        progress=progress(exp),
    )
