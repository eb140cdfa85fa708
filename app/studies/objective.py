"""A trial's objective from the metric points its job reported.

The value is the objective metric's last `k` finite reports averaged (or its last one), so a
noisy final iteration does not decide a trial. Intermediate values, the pruner's input, are the
same reduction over the points up to each multiple of the study's interval that the trial has
passed: trials with different batch sizes report at different env steps, and the interval
puts them on one grid.
"""

from __future__ import annotations

import math

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.metrics.models import MetricPoint
from app.studies.schemas import Objective

Points = list[tuple[int, float]]  # (env steps, value), ordered by step


def points(session: Session, experiment_id: int, metric: str) -> Points:
    stmt = (
        select(MetricPoint.step, MetricPoint.value)
        .where(MetricPoint.experiment_id == experiment_id, MetricPoint.name == metric)
        .order_by(MetricPoint.step)
    )
    return [(step, value) for step, value in session.execute(stmt) if math.isfinite(value)]


def reduce(series: Points, objective: Objective) -> float | None:
    """The objective over `series` (None when it holds no finite value)."""
    if not series:
        return None
    if objective.reduce == "final":
        return series[-1][1]
    tail = [value for _, value in series[-objective.k :]]
    return sum(tail) / len(tail)


def intermediate(
    series: Points, objective: Objective, interval: int, last_step: int
) -> dict[int, float]:
    """Objective at every multiple of `interval` up to `last_step` (the trial's env steps)."""
    out: dict[int, float] = {}
    end = 0
    for mark in range(interval, last_step + 1, interval):
        while end < len(series) and series[end][0] <= mark:
            end += 1
        value = reduce(series[:end], objective)
        if value is not None:
            out[mark] = value
    return out
