"""Wire models of the sweeps API (kept apart from the ORM rows)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.core.json_bounds import JsonObject, check_depth
from app.core.text import NoNulStr
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.schemas import EvaluationEvery, ExperimentPublic

MAX_SEEDS = 100
MAX_PARALLEL = 1000


class SweepCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NoNulStr = Field(min_length=1, max_length=200)
    config: JsonObject = Field(
        default_factory=dict,
        description="The base PPOConfig (partial, resolved with its preset like an experiment's).",
    )
    grid: Annotated[dict[str, list[Any]], AfterValidator(check_depth)] = Field(
        default_factory=dict,
        description="PPOConfig field (dotted for nested ones: 'stop.env_steps') -> values; "
        "every combination is one group. Empty: one group (a seed sweep).",
    )
    seeds: list[int] = Field(
        default_factory=lambda: [0], min_length=1, max_length=MAX_SEEDS,
        description="One member per grid point and seed.",
    )  # fmt: skip
    max_parallel: int = Field(
        default=4, ge=1, le=MAX_PARALLEL, description="Members of this sweep running at once."
    )
    evaluation_every: EvaluationEvery = Field(default=0, description="Each member's.")


class SweepGroup(BaseModel):
    index: int
    point: dict[str, Any] = Field(description="The grid point: dotted keys -> values.")
    label: str = Field(description="'lr=0.001, stop.env_steps=20000' (empty without a grid).")
    member_ids: list[int]


class SweepPublic(BaseModel):
    id: int
    name: str
    config: dict[str, Any] = Field(description="The base config as submitted.")
    grid: dict[str, list[Any]]
    seeds: list[int]
    max_parallel: int
    evaluation_every: int = Field(description="Each member's (videos as it trains; 0: none).")
    created_at: dt.datetime
    status: ExperimentStatus = Field(
        description="running (a member runs) | queued (members wait, none runs) | stopping | "
        "succeeded (all did) | stopped (all ended, some stopped) | failed (all ended, some "
        "failed, none stopped)"
    )
    counts: dict[str, int] = Field(description="Members per experiment status.")
    size: int = Field(description="Number of members.")


class SweepDetail(SweepPublic):
    groups: list[SweepGroup]
    members: list[ExperimentPublic]


class SweepList(BaseModel):
    items: list[SweepPublic]


class MemberFinal(BaseModel):
    experiment_id: int
    seed: int
    step: int = Field(description="Env steps of the member's last point.")
    value: float


class FinalReturn(BaseModel):
    """A group's last values: each member's latest point (still moving while it runs)."""

    n: int
    mean: float | None
    min: float | None
    max: float | None
    members: list[MemberFinal]


class GroupSeries(BaseModel):
    index: int
    label: str
    point: dict[str, Any]
    member_ids: list[int]
    n: list[int] = Field(description="Members that have reached each grid step (count there).")
    mean: list[float | None]
    min: list[float | None]
    max: list[float | None]
    ci_low: list[float | None] = Field(description="95 % bootstrap interval of the mean.")
    ci_high: list[float | None]
    final: FinalReturn


class MetricGroups(BaseModel):
    step: list[int] = Field(description="The common env-steps grid of every group.")
    groups: list[GroupSeries]


class SweepMetrics(BaseModel):
    sweep_id: int
    grid_keys: list[str]
    confidence: float
    bootstrap_resamples: int
    bootstrap_seed: int
    metrics: dict[str, MetricGroups]
