"""Wire models of the evaluations API (kept apart from the ORM rows)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.evaluations.lifecycle import EvaluationStatus

MAX_EPISODES = 1000
MAX_SEED = 2**31 - 1


class EvaluationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checkpoint: str | int = Field(
        default="best", description='"best", "latest" or a checkpoint id of the experiment.'
    )
    episodes: int = Field(default=10, ge=1, le=MAX_EPISODES)
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="Episode k resets with seed + k.")
    deterministic: bool = Field(default=True, description="The policy's mode, not a sample.")
    record_video: bool = Field(default=True, description="Record the first episode.")

    @field_validator("checkpoint", mode="before")
    @classmethod
    def _checkpoint_ref(cls, value: Any) -> str:
        if isinstance(value, bool):
            raise ValueError('expected "best", "latest" or a checkpoint id')
        if isinstance(value, int) and value >= 0:
            return str(value)
        if isinstance(value, str) and (value in ("best", "latest") or value.isdigit()):
            return value
        raise ValueError('expected "best", "latest" or a checkpoint id')


class VideoPublic(BaseModel):
    url: str = Field(description="GET it for the file (supports Range requests).")
    codec: str
    media_type: str
    size_bytes: int
    frames: int
    fps: float
    width: int
    height: int
    duration_s: float
    source_frames: int = Field(description="Frames the episode rendered (reset + each step).")
    frame_step: int = Field(description="Every frame_step-th rendered frame is in the video.")
    subsampled: bool = Field(description="frame_step > 1: frames were dropped to fit the cap.")
    cut: bool = Field(description="The video ends before the episode did (size cap).")


class EvaluationPublic(BaseModel):
    """An evaluation without its per-episode values (lists and live messages)."""

    id: int
    experiment_id: int
    checkpoint: str = Field(description="What was asked for: best, latest or an id.")
    checkpoint_id: int
    checkpoint_iteration: int
    checkpoint_env_steps: int
    episodes: int
    seed: int
    deterministic: bool
    record_video: bool
    scheduled: bool = Field(
        description="Created by the experiment's evaluation_every as it trained (a filmstrip "
        "frame), not asked for by a user."
    )
    status: EvaluationStatus
    reason: str
    error: str | None
    created_at: dt.datetime
    started_at: dt.datetime | None
    job_started_at: dt.datetime | None
    finished_at: dt.datetime | None
    ray_job_id: str | None
    episodes_done: int
    return_mean: float | None
    return_std: float | None
    return_min: float | None
    return_max: float | None
    video: VideoPublic | None
    video_message: str | None = Field(description="Why there is no video, when one was asked.")


class EvaluationDetail(EvaluationPublic):
    returns: list[float] = Field(description="Per episode, by episode index.")
    lengths: list[int]
    log_tail: str | None
