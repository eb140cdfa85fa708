"""Wire models of the studies API (kept apart from the ORM rows)."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from app.core.json_bounds import JsonObject, check_depth
from app.core.text import NoNulStr
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.schemas import EvaluationEvery
from trainer.config import MAX_SEED

MAX_TRIALS = 500
MAX_PARALLEL = 64
MAX_PARAMS = 16
MAX_CHOICES = 64


class _Range(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log: bool = False  # log-uniform between low and high


class FloatRange(_Range):
    """A float in [low, high], uniform or (log) log-uniform, optionally on a grid of `step`."""

    type: Literal["float"] = "float"
    low: float
    high: float
    step: float | None = Field(default=None, gt=0)


class IntRange(_Range):
    """An integer in [low, high] (both included), every `step`-th, or log-uniform."""

    type: Literal["int"] = "int"
    low: int
    high: int
    step: int = Field(default=1, ge=1)


class Categorical(BaseModel):
    """One of `choices` (any JSON values: numbers, strings, lists such as hidden sizes)."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["categorical"] = "categorical"
    choices: Annotated[list[Any], AfterValidator(check_depth)] = Field(
        min_length=1, max_length=MAX_CHOICES
    )


ParamSpec = Annotated[FloatRange | IntRange | Categorical, Field(discriminator="type")]


class Objective(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: NoNulStr = Field(
        default="episode_return_mean", description="A metric every trial logs."
    )
    direction: Literal["maximize", "minimize"] = "maximize"
    reduce: Literal["last_k", "final"] = Field(
        default="last_k",
        description="last_k: the mean of the metric's last `k` reports; final: its last one.",
    )
    k: int = Field(default=5, ge=1, le=100)


class SamplerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["tpe", "random"] = Field(
        default="tpe", description="tpe: Optuna's TPE (constant liar for parallel trials)."
    )
    # 10, as Optuna's and rl-zoo's: on a noisy objective a model fitted to fewer points
    # steers away from good settings it has not seen yet (docs/benchmarks.md, studies).
    n_startup_trials: int = Field(
        default=10, ge=0, le=MAX_TRIALS, description="TPE: random suggestions before modelling."
    )


class PrunerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["median", "percentile", "asha", "none"] = Field(
        default="median",
        description="median: stop a trial below the median of finished trials at the same "
        "step; percentile: the same against another percentile (keep the top `percentile` "
        "%); asha: asynchronous successive halving; none: every trial runs its budget.",
    )
    interval_env_steps: int | None = Field(
        default=None,
        ge=1,
        le=2**31 - 1,
        description="Env steps between intermediate values; default a tenth of the budget.",
    )
    n_startup_trials: int = Field(
        default=3, ge=0, le=MAX_TRIALS, description="median, percentile: trials finished first."
    )
    n_warmup_intervals: int = Field(
        default=2, ge=0, le=1000, description="median, percentile: intervals before pruning."
    )
    # 75 stops only the worst quarter: for a noisy objective, whose early values rank settings
    # poorly, the median (50) stops good settings as often as bad ones.
    percentile: float = Field(
        default=75.0, gt=0.0, lt=100.0, description="percentile: the share of trials kept, in %."
    )
    min_intervals: int = Field(default=1, ge=1, le=1000, description="asha: the first rung.")
    reduction_factor: int = Field(
        default=3, ge=2, le=16, description="asha: 1 in reduction_factor goes up a rung."
    )


class StudyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: NoNulStr = Field(min_length=1, max_length=200)
    config: JsonObject = Field(
        default_factory=dict,
        description="The base PPOConfig (partial, resolved with its preset like an "
        "experiment's); it needs an env-step budget (stop.env_steps) unless the space has one.",
    )
    space: dict[str, ParamSpec] = Field(
        min_length=1,
        max_length=MAX_PARAMS,
        description="PPOConfig field (dotted for nested ones: 'model.hidden_sizes') -> range.",
    )
    n_trials: int = Field(ge=1, le=MAX_TRIALS)
    max_parallel: int = Field(default=2, ge=1, le=MAX_PARALLEL)
    evaluation_every: EvaluationEvery = Field(default=0, description="Each trial's.")
    objective: Objective = Field(default_factory=Objective)
    sampler: SamplerSpec = Field(default_factory=SamplerSpec)
    pruner: PrunerSpec = Field(default_factory=PrunerSpec)
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="Seeds the suggestions.")


TrialStateName = Literal["running", "pruning", "complete", "pruned", "failed", "stopped"]


class TrialPublic(BaseModel):
    number: int
    experiment_id: int | None
    experiment_status: ExperimentStatus | None = Field(
        description="Its experiment's status (null once that experiment was deleted)."
    )
    params: dict[str, Any]
    state: TrialStateName = Field(
        description="running | pruning (stop sent) | complete | pruned | failed | stopped"
    )
    value: float | None = Field(description="The objective of a complete trial.")
    latest: float | None = Field(description="The objective's latest intermediate value.")
    env_steps: int | None
    intermediate: dict[str, float] = Field(description="Env steps -> objective there.")
    note: str | None
    created_at: dt.datetime
    finished_at: dt.datetime | None


class StudyPublic(BaseModel):
    id: int
    name: str
    config: dict[str, Any]
    space: dict[str, ParamSpec]
    objective: Objective
    sampler: SamplerSpec
    pruner: PrunerSpec
    n_trials: int
    max_parallel: int
    evaluation_every: int = Field(description="Each trial's (videos as it trains; 0: none).")
    seed: int
    interval_env_steps: int
    created_at: dt.datetime
    status: Literal["running", "stopping", "stopped", "succeeded"] = Field(
        description="running (trials run or are still to come) | stopping (stopped, trials "
        "still ending) | stopped | succeeded (every trial ended)"
    )
    counts: dict[str, int] = Field(description="Trials per state.")
    best_value: float | None
    best_trial: int | None = Field(description="Number of the best complete trial.")


class StudyDetail(StudyPublic):
    trials: list[TrialPublic]
    importances: dict[str, float] = Field(
        description="Each parameter's share of the objective's variance over complete trials "
        "(Optuna's PED-ANOVA); empty before there are enough."
    )


class TrialOf(BaseModel):
    """The study trial an experiment runs (its page links there)."""

    study_id: int
    study_name: str
    number: int
    state: TrialStateName
    note: str | None


class StudyList(BaseModel):
    items: list[StudyPublic]


class StudyBest(BaseModel):
    study_id: int
    trial: TrialPublic
    config: dict[str, Any] = Field(
        description="The best trial's resolved config: fork it, or sweep it over seeds."
    )
