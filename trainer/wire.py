"""Wire formats between a trainer job and the API (pure pydantic, shared by both sides).

A job reports to `{api_url}/api/v1/jobs/experiments/{experiment_id}/...` with its own bearer
token (from the environment, never the command line). Every call is idempotent so the job can
retry freely: metric points are keyed by (experiment, step, name), status reports by their
target status, checkpoints by iteration.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

API_PREFIX = "/api/v1"

# Environment variables the launcher sets for a job.
ENV_API_URL = "ROLLOUT_API_URL"
ENV_JOB_TOKEN = "ROLLOUT_JOB_TOKEN"
ENV_EXPERIMENT_ID = "ROLLOUT_EXPERIMENT_ID"
ENV_JOB_DIR = "ROLLOUT_JOB_DIR"


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricsRow(_Wire):
    """All metrics of one training iteration, keyed by lifetime env steps."""

    step: int = Field(ge=0, description="Lifetime env steps at the end of the iteration.")
    time_s: float = Field(ge=0, description="Seconds since the run started.")
    values: dict[str, float] = Field(description="Metric name -> value (finite floats only).")


class MetricsIngest(_Wire):
    rows: list[MetricsRow] = Field(max_length=10_000)


class StatusReport(_Wire):
    """A lifecycle transition reported by the job itself."""

    status: Literal["running", "succeeded", "failed", "stopped"]
    reason: str = Field(default="", max_length=2000)
    error: str | None = Field(default=None, max_length=20_000)
    log_tail: str | None = Field(default=None, max_length=200_000)


class LogLines(_Wire):
    """Progress lines from the job, shown live in the dashboard's log tail."""

    lines: list[str] = Field(max_length=10_000)


class CheckpointMeta(_Wire):
    """Sent as query parameters with a checkpoint upload (the body is the .tar.gz stream)."""

    iteration: int = Field(ge=0)
    env_steps: int = Field(ge=0)
    episode_return_mean: float | None = None
