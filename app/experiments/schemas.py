"""Wire models of the experiments API (kept apart from the ORM rows)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.core.json_bounds import JsonObject
from app.core.params import MAX_ID
from app.core.text import NoNulStr, reject_nul_in_all
from app.experiments.lifecycle import ExperimentStatus

MAX_TAGS = 32
MAX_TAG_CHARS = 64


def _clean_tags(tags: list[str]) -> list[str]:
    """Stripped, deduplicated, sorted; each 1-64 characters after stripping."""
    cleaned = sorted({t.strip() for t in tags})
    for tag in cleaned:
        if not tag or len(tag) > MAX_TAG_CHARS:
            raise ValueError(f"tags must be 1-{MAX_TAG_CHARS} characters long")
    return reject_nul_in_all(cleaned)


# Watch it learn, a setting of the run (and of sweeps and studies, for their runs), not of the
# trainer's config: app/evaluations/periodic.py reads it as checkpoints arrive.
EvaluationEvery = Annotated[
    int,
    Field(
        ge=0,
        le=100_000,
        description=(
            "Record a one-episode evaluation video of every N-th periodic checkpoint and of the "
            "final one, each in its own low-priority job, shown as the experiment page's "
            "filmstrip (0: never)."
        ),
    ),
]

# One definition for create and fork: a fork's tags become an ExperimentCreate's, so they
# must be validated the same way before the request is accepted.
Tags = Annotated[list[str], Field(max_length=MAX_TAGS), AfterValidator(_clean_tags)]


class ExperimentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NoNulStr = Field(min_length=1, max_length=200)
    config: JsonObject = Field(
        default_factory=dict, description="A PPOConfig as JSON; omitted fields take defaults."
    )
    tags: Tags = Field(default_factory=list)
    evaluation_every: EvaluationEvery = 0
    parent_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description=(
            "The experiment this one was forked from (the dashboard's fork, after editing its "
            "config in the form); it must exist."
        ),
    )


class ExperimentFork(BaseModel):
    """A new experiment from another's config, with some fields changed."""

    model_config = ConfigDict(extra="forbid")

    name: NoNulStr | None = Field(default=None, min_length=1, max_length=200)
    overrides: JsonObject = Field(
        default_factory=dict, description="Merged into the source config (nested dicts merge)."
    )
    tags: Tags | None = Field(default=None, description="Replace the source's tags; null: keep.")
    evaluation_every: EvaluationEvery | None = Field(
        default=None, description="Replace the source's evaluation_every; null: keep."
    )


MAX_NOTES_CHARS = 20_000


class ExperimentUpdate(BaseModel):
    """What a user may change on an experiment at any time: its name, tags and notes. Omitted
    fields stay as they are; `notes: null` (or "") clears the notes."""

    model_config = ConfigDict(extra="forbid")

    name: NoNulStr | None = Field(default=None, min_length=1, max_length=200)
    tags: Tags | None = Field(default=None, description="Replace the tags.")
    notes: NoNulStr | None = Field(
        default=None, max_length=MAX_NOTES_CHARS, description="Markdown; shown on its page."
    )


class ExperimentResume(BaseModel):
    """What a resumed run may change: its stop criteria (a run that met its env-step budget
    trains on only under a larger one)."""

    model_config = ConfigDict(extra="forbid")

    stop: JsonObject | None = Field(
        default=None,
        description="Replaces these fields of the source's `stop` (env_steps counts on from "
        "the checkpoint; wall_seconds is this run's); null: keep them.",
    )


class EventPublic(BaseModel):
    from_status: ExperimentStatus | None
    to_status: ExperimentStatus
    reason: str
    at: dt.datetime


class ExperimentPublic(BaseModel):
    id: int
    name: str
    tags: list[str]
    config: dict[str, Any]
    evaluation_every: EvaluationEvery
    status: ExperimentStatus
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    progress: float = Field(ge=0.0, le=1.0, description="Fraction of the stop criterion reached.")
    env_steps: int | None
    episode_return_mean: float | None
    best_return: float | None
    error: str | None
    log_tail: str | None
    ray_job_id: str | None
    parent_id: int | None
    resume_from_checkpoint_id: int | None
    sweep_id: int | None = Field(default=None, description="The sweep it is a member of.")
    sweep_group: int | None = Field(
        default=None, description="Its seed group in the sweep (same config but the seed)."
    )
    notes: str | None = Field(default=None, description="The user's notes (markdown).")


class ExperimentChild(BaseModel):
    """A run made from this one: resumed from one of its checkpoints, or forked from it."""

    id: int
    name: str
    status: ExperimentStatus
    kind: Literal["resumed", "forked"]


class ExperimentDetail(ExperimentPublic):
    events: list[EventPublic]
    children: list[ExperimentChild] = Field(
        default_factory=list, description="Runs resumed or forked from this one, oldest first."
    )


class ExperimentPage(BaseModel):
    items: list[ExperimentPublic]
    next_cursor: str | None = Field(description="Pass as ?cursor= for the next (older) page.")


class LogsPublic(BaseModel):
    lines: list[str]
