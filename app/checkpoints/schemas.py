"""Wire models of the checkpoints API."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel


class CheckpointPublic(BaseModel):
    id: int
    experiment_id: int
    iteration: int
    env_steps: int
    episode_return_mean: float | None
    size_bytes: int
    sha256: str
    created_at: dt.datetime
    is_best: bool
    is_latest: bool
