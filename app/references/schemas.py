"""Wire models of the references API, also the format of the files in app/references/data/.

A reference is one peer's learning curve on one env: the mean return of the last `window`
finished episodes (Rollout's `episode_return_mean`), against env steps and against wall time,
as the mean over seeds with the min/max over seeds as a band. benchmarks/references.py writes
the files; the service only reads them.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Band(BaseModel):
    """Mean and min/max over seeds on one x grid (all four lists have the same length)."""

    model_config = ConfigDict(extra="forbid")

    x: list[float]
    mean: list[float]
    min: list[float]
    max: list[float]

    @model_validator(mode="after")
    def _same_lengths(self) -> Band:
        n = len(self.x)
        if not (len(self.mean) == len(self.min) == len(self.max) == n):
            raise ValueError("x, mean, min and max must have the same length")
        if any(b <= a for a, b in zip(self.x, self.x[1:], strict=False)):
            raise ValueError("x must increase strictly")
        return self


class ReferenceRun(BaseModel):
    """One seed's run, as measured."""

    model_config = ConfigDict(extra="forbid")

    seed: int
    episodes: int = Field(description="Finished episodes.")
    env_steps: int = Field(description="Env steps sampled when the run ended.")
    wall_s: float = Field(description="Seconds from process start to its last episode.")
    final_return: float = Field(description="Mean return of the last `window` episodes.")


class ReferenceCurves(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str
    label: str = Field(description="Short name for a legend, e.g. 'SB3 PPO (rl-zoo)'.")
    source: str = Field(description="Which program and which published settings produced it.")
    settings: dict[str, Any] = Field(description="The hyperparameters as the source spells them.")
    budget_env_steps: int = Field(description="Env steps each run was given.")
    metric: str = Field(default="episode_return_mean")
    window: int = Field(description="Episodes in the rolling mean.")
    seeds: list[int]
    command: str = Field(description="The command that regenerates this file.")
    generated_at: dt.datetime
    machine: str = Field(description="Where the runs were made (wall time depends on it).")
    notes: str = ""
    env_steps: Band = Field(description="x: env steps.")
    wall_time_s: Band = Field(description="x: seconds since the process started.")
    runs: list[ReferenceRun]


class ReferenceList(BaseModel):
    items: list[ReferenceCurves]
