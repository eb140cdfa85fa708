"""Wire formats between a trainer job and the API (pure pydantic, shared by both sides).

A job reports to `{api_url}/api/v1/jobs/experiments/{experiment_id}/...` with its own bearer
token (from the environment, never the command line). Every call is idempotent so the job can
retry freely: metric points are keyed by (experiment, step, name), status reports by their
target status, checkpoints by iteration.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, AllowInfNan, BaseModel, ConfigDict, Field

from trainer.config import PPOConfig

API_PREFIX = "/api/v1"

# Ray settings every process of a cluster must agree on: Ray 2.60 turns token auth on by
# default, and the service's loopback-only head, its jobs, a trainer's private local Ray and the
# tests all run without it. The service's head starts with these, its launcher passes them to
# jobs, and a trainer sets them (unless already set) before it starts or joins Ray.
RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
}

# Environment variables the launcher sets for a job.
ENV_API_URL = "ROLLOUT_API_URL"
ENV_JOB_TOKEN = "ROLLOUT_JOB_TOKEN"  # a job started by hand; launched jobs get a claim
# A one-time code the job exchanges for its token at `{kind}/{id}/token`: Ray's dashboard lists
# every job's runtime_env, so the token itself never goes there.
ENV_JOB_CLAIM = "ROLLOUT_JOB_CLAIM"
ENV_EXPERIMENT_ID = "ROLLOUT_EXPERIMENT_ID"
ENV_JOB_DIR = "ROLLOUT_JOB_DIR"
# The job's CPU niceness, for its Ray workers (trainer/process_guard.py `setup_worker`).
ENV_JOB_NICENESS = "ROLLOUT_JOB_NICENESS"
# Set in the service's environment, it travels to every job: the trainer then runs its torch
# reference implementations instead of its fast paths (trainer/fast/switch.py).
ENV_REFERENCE_PATHS = "ROLLOUT_REFERENCE_PATHS"


# Numbers are bounded by the SQL columns that keep them (INTEGER is 32-bit on PostgreSQL,
# BIGINT 64-bit): a bigger value is a 422 here instead of a driver error in the service.
MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1


def _no_nul(value: str) -> str:
    """PostgreSQL text cannot hold U+0000; the reporter replaces it before sending."""
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


Text = Annotated[str, AfterValidator(_no_nul)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class JobTokenGrant(_Wire):
    """The answer to a redeemed claim."""

    token: str


# Metrics every iteration reports whatever the env (the return window's, trainer/episode_window.py,
# and the learner's), so a study may optimise any of them (app/studies/space.py checks its
# objective against them); tests/trainer check them against a real iteration's keys.
STUDY_METRICS = (
    "episode_return_mean",
    "episode_return_min",
    "episode_return_max",
    "episode_len_mean",
    "policy_loss",
    "vf_loss",
    "entropy",
    "kl",
    "clip_fraction",
    "explained_variance",
    "env_steps_per_s",
)


def finite_values(values: dict[str, float]) -> dict[str, float]:
    """The one rule for values that are not finite numbers (a return mean before the first
    episode ends, a KL that overflowed): they are "not measured", never a point. Every sink
    leaves them out (the service's rows, `rollout train`'s metrics.jsonl, the console's `-`),
    and the service refuses a row that holds one (`MetricsRow`: a 422 naming it)."""
    out = {}
    for name, value in values.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out[name] = number
    return out


class ExperimentSpec(_Wire):
    """What an experiment's job runs (GET .../jobs/experiments/{id}): the config the service
    validated when it stored it, typed on both sides of the wire."""

    experiment_id: int
    name: str
    config: PPOConfig
    resume_from_checkpoint_id: int | None = Field(
        description="Download it from .../jobs/experiments/{id}/resume_checkpoint when set."
    )


class MetricsRow(_Wire):
    """All metrics of one training iteration, keyed by lifetime env steps."""

    step: int = Field(
        ge=0, le=MAX_INT64, description="Lifetime env steps at the end of the iteration."
    )
    time_s: float = Field(
        ge=0,
        allow_inf_nan=False,
        description="Seconds since the run started: the row's one clock, stored as the "
        "`time_s` series.",
    )
    values: dict[Text, Annotated[float, AllowInfNan(False)]] = Field(
        description="Metric name -> value: finite floats only (`finite_values`)."
    )


class MetricsIngest(_Wire):
    rows: list[MetricsRow] = Field(max_length=10_000)


class StatusReport(_Wire):
    """A lifecycle transition reported by the job itself."""

    status: Literal["running", "succeeded", "failed", "stopped"]
    reason: Text = Field(default="", max_length=2000)
    error: Text | None = Field(default=None, max_length=20_000)
    log_tail: Text | None = Field(default=None, max_length=200_000)


# --- what a job leaves in its job dir for the API to pick up (when the dir is on its machine) ---
FINAL_STATUS_FILE = "final_status.json"
CHECKPOINTS_SUBDIR = "checkpoints"  # iter_000012.tar.gz with its CheckpointMeta in iter_000012.json


def checkpoint_meta_path(archive: Path) -> Path:
    """The CheckpointMeta written beside a packed checkpoint in the job dir."""
    return archive.with_name(archive.name.removesuffix(".tar.gz") + ".json")


class FinalStatusRecord(_Wire):
    """The final status a job could not deliver (the API stayed unreachable past the job's
    patience), written to `<job dir>/final_status.json`: once the job has ended the API settles
    the experiment with it, after storing the rows and checkpoints the job dir holds."""

    report: StatusReport
    steps: list[int] = Field(default_factory=list, description="Undelivered metric rows.")
    checkpoints: list[int] = Field(default_factory=list, description="Undelivered iterations.")
    log_lines: list[Text] = Field(default_factory=list, max_length=10_000)


class LogLines(_Wire):
    """Progress lines from the job, shown live in the dashboard's log tail."""

    lines: list[Text] = Field(max_length=10_000)


class CheckpointMeta(_Wire):
    """Sent as query parameters with a checkpoint upload (the body is the .tar.gz stream)."""

    iteration: int = Field(ge=0, le=MAX_INT32)
    env_steps: int = Field(ge=0, le=MAX_INT64)
    episode_return_mean: float | None = None
    final: bool = Field(default=False, description="The run ends with this checkpoint.")


# --- evaluation jobs: `{api_url}/api/v1/jobs/evaluations/{evaluation_id}/...` -----------------

ENV_EVALUATION_ID = "ROLLOUT_EVALUATION_ID"


class EvaluationSpec(_Wire):
    """What an evaluation job runs (GET .../jobs/evaluations/{id})."""

    evaluation_id: int
    experiment_id: int
    checkpoint_id: int
    episodes: int = Field(ge=1)
    seed: int = Field(ge=0)
    deterministic: bool
    record_video: bool
    video_max_bytes: int = Field(gt=0)
    video_max_frames: int = Field(gt=0)


class EpisodeResult(_Wire):
    index: int = Field(ge=0, le=MAX_INT32, description="0-based; episode k: seed + k.")
    episode_return: float = Field(allow_inf_nan=False)
    length: int = Field(ge=0, le=MAX_INT32)


class EpisodeResults(_Wire):
    """Finished episodes; idempotent per index (a retried batch replaces the same rows)."""

    episodes: list[EpisodeResult] = Field(min_length=1, max_length=1000)


class EvaluationStatusReport(_Wire):
    status: Literal["running", "succeeded", "failed"]
    reason: Text = Field(default="", max_length=2000)
    error: Text | None = Field(default=None, max_length=20_000)
    log_tail: Text | None = Field(default=None, max_length=200_000)
    video_message: Text | None = Field(
        default=None, max_length=2000, description="Why no video was recorded."
    )


class VideoMeta(_Wire):
    """Sent as query parameters with a video upload (the body is the file)."""

    codec: Text = Field(max_length=32)
    media_type: Literal["video/webm", "video/mp4"]
    frames: int = Field(ge=1, le=MAX_INT32)
    # At least 1/1000: frames / fps (the duration) must stay a finite number.
    fps: float = Field(ge=1e-3, le=1000, allow_inf_nan=False)
    width: int = Field(ge=2, le=65_536)
    height: int = Field(ge=2, le=65_536)
    source_frames: int = Field(ge=1, le=MAX_INT32, description="Frames the episode rendered.")
    frame_step: int = Field(
        ge=1, le=MAX_INT32, description="Every frame_step-th rendered frame was kept."
    )
    cut: bool = Field(description="The video ends before the episode did (size cap).")
