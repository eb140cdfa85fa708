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
