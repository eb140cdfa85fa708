"""Wire models of the metrics API."""

from __future__ import annotations

from pydantic import BaseModel, Field


class IngestResult(BaseModel):
    rows: int = Field(description="Metric rows (steps) received.")
    points: int = Field(description="Points written (inserted or overwritten).")


class Series(BaseModel):
    step: list[int]
    value: list[float]


class SeriesResponse(BaseModel):
    series: dict[str, Series]
    downsampled: dict[str, bool] = Field(
        default_factory=dict, description="Per name: whether min/max bucketing was applied."
    )


class MetricNames(BaseModel):
    names: list[str]


class MetricSummary(BaseModel):
    """One series reduced to what a runs table shows: its last value and its extremes."""

    last: float | None = Field(description="Value at the run's latest env step, if logged there.")
    min: float
    max: float


class MetricSummaries(BaseModel):
    summaries: dict[int, dict[str, MetricSummary]] = Field(
        description="Experiment id -> metric name -> summary; series never logged are absent."
    )
