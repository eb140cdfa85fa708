"""Metric ingest (idempotent upsert) and queries (with spike-preserving downsampling)."""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from app.core.db import publish_after_commit, utcnow
from app.core.errors import InvalidInput
from app.experiments.models import Experiment
from app.experiments.service import announce_progress
from app.live.topics import columnar, experiment_topic, metrics_message
from app.metrics import rollups
from app.metrics.downsample import driver_cursor, min_max_points, pipeline, raw_rows
from app.metrics.models import MetricPoint, MetricRollup
from app.metrics.schemas import IngestResult, MetricSummary, Series
from trainer.wire import MetricsRow

RETURN_METRIC = "episode_return_mean"
TIME_METRIC = "time_s"
MAX_METRIC_NAME = 128  # the metric_points.name column
# Every query is bounded: a series never comes back longer than this (longer ones are min/max
# bucketed as with max_points), nor a whole response longer than the request budget.
MAX_POINTS_PER_SERIES = 100_000
MAX_POINTS_PER_REQUEST = 1_000_000
MAX_NAMES_PER_REQUEST = 1_000


def point_budget(max_points: int | None, series_count: int) -> int:
    """Points per series a query may return: the caller's max_points within the bounds."""
    share = MAX_POINTS_PER_REQUEST // max(1, series_count)
    return max(2, min(max_points or MAX_POINTS_PER_SERIES, MAX_POINTS_PER_SERIES, share))


def flatten(rows: list[MetricsRow]) -> list[tuple[int, str, float]]:
    """Rows -> (step, name, value) points; the row's `time_s` becomes a series of its own (a
    `time_s` among the values is the row's clock sent twice by an older job: the field wins).
    Values are finite already (the wire model refuses others)."""
    points: list[tuple[int, str, float]] = []
    bad = []
    for i, row in enumerate(rows):
        values = {**row.values, TIME_METRIC: row.time_s}
        for name, value in values.items():
            if not name or len(name) > MAX_METRIC_NAME:
                message = f"a metric name is 1 to {MAX_METRIC_NAME} characters"
                bad.append(
                    {"field": f"rows.{i}.values.{name[:MAX_METRIC_NAME]}", "message": message}
                )
            else:
                points.append((row.step, name, float(value)))
    if bad:
        raise InvalidInput("metric names and values must be valid", fields=bad[:50])
    return points


_SQLITE_UPSERT = (
    "INSERT INTO metric_points (experiment_id, name, step, value) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (experiment_id, name, step) DO UPDATE SET value = excluded.value"
)
# One statement per batch: arrays in, rows out (far faster than row-by-row executemany).
_POSTGRES_UPSERT = (
    "INSERT INTO metric_points (experiment_id, name, step, value) "
    "SELECT %b, n, s, v FROM unnest(%b::text[], %b::bigint[], %b::float8[]) AS t(n, s, v) "
    "ON CONFLICT (experiment_id, name, step) DO UPDATE SET value = EXCLUDED.value"
)


def upsert_points(
    session: Session, experiment_id: int, points: list[tuple[int, str, float]]
) -> None:
    """Write points and their rollups with the DB driver directly: this is the hot path of
    every job. On PostgreSQL both statements go out in one pipeline (one round trip)."""
    unique = {(name, step): value for step, name, value in points}  # last one wins
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        names = [k[0] for k in unique]
        steps = [k[1] for k in unique]
        with driver_cursor(connection) as cursor, pipeline(connection):
            cursor.execute(_POSTGRES_UPSERT, (experiment_id, names, steps, list(unique.values())))
            rollups.update(connection, experiment_id, unique)
    else:
        connection.exec_driver_sql(
            _SQLITE_UPSERT, [(experiment_id, n, s, v) for (n, s), v in unique.items()]
        )
        rollups.update(connection, experiment_id, unique)


def ingest(session: Session, exp: Experiment, rows: list[MetricsRow]) -> IngestResult:
    """Upsert points keyed by (experiment, name, step): a retried batch never duplicates."""
    points = flatten(rows)
    if not points:
        return IngestResult(rows=len(rows), points=0)
    upsert_points(session, exp.id, points)
    _update_summary(exp, rows)
    steps, series = columnar(points)
    publish_after_commit(session, experiment_topic(exp.id), metrics_message(exp.id, steps, series))
    announce_progress(session, exp)
    return IngestResult(rows=len(rows), points=len(points))


def _update_summary(exp: Experiment, rows: list[MetricsRow]) -> None:
    """Keep the latest env steps / return / elapsed and the best return on the experiment row."""
    latest = max(rows, key=lambda r: r.step)
    if exp.env_steps is None or latest.step >= exp.env_steps:
        exp.env_steps = latest.step
        exp.elapsed_s = latest.time_s
        if RETURN_METRIC in latest.values:
            exp.episode_return_mean = latest.values[RETURN_METRIC]
    returns = [r.values[RETURN_METRIC] for r in rows if RETURN_METRIC in r.values]
    if returns:
        best = max(returns)
        exp.best_return = best if exp.best_return is None else max(exp.best_return, best)
    exp.updated_at = utcnow()


def names(session: Session, experiment_id: int) -> list[str]:
    """Series names, from the coarsest rollup level (one row per series): no point scan."""
    stmt = (
        select(MetricRollup.name)
        .where(
            MetricRollup.experiment_id == experiment_id,
            MetricRollup.level == rollups.LEVELS - 1,
        )
        .distinct()
        .order_by(MetricRollup.name)
    )
    return list(session.scalars(stmt))


def recent_points(
    session: Session, experiment_id: int, after_step: int, max_steps: int
) -> list[tuple[int, str, float]]:
    """(step, name, value) of the last `max_steps` steps after `after_step`.

    Every row carries `time_s`, so that series finds the first step to send; each series is
    then read over that step range along its primary key (no scan of the whole experiment).
    """
    first = session.scalars(
        select(MetricPoint.step)
        .where(
            MetricPoint.experiment_id == experiment_id,
            MetricPoint.name == TIME_METRIC,
            MetricPoint.step > after_step,
        )
        .order_by(MetricPoint.step.desc())
        .limit(max_steps)
    ).all()
    if not first:
        return []
    lo = first[-1]
    points: list[tuple[int, str, float]] = []
    for name in names(session, experiment_id):
        rows = session.execute(
            select(MetricPoint.step, MetricPoint.value).where(
                MetricPoint.experiment_id == experiment_id,
                MetricPoint.name == name,
                MetricPoint.step >= lo,
            )
        )
        points.extend((step, name, value) for step, value in rows)
    return points


def series_many(
    session: Session,
    experiment_id: int,
    names: list[str],
    *,
    every_name: bool,
    max_points: int,
    step_min: int | None,
    step_max: int | None,
) -> dict[str, tuple[Series, bool]]:
    """The series of `names` in [step_min, step_max], each bucketed like `series`.

    Every stored row carries `time_s`, so no series has more steps in a range than `time_s`:
    when that count is within max_points (a run of up to max_points iterations, or a zoom),
    ONE read returns every series raw (a dashboard's query costs a fixed 3-4 statements, not
    2 per series); longer ranges take the bounded, downsampled read of each series. `every_name`
    says `names` are all the experiment's series, so a full-range read needs no name filter.
    """
    where = _range(experiment_id, step_min, step_max)
    steps = select(MetricPoint.step).where(*where, MetricPoint.name == TIME_METRIC)
    count = session.scalar(select(func.count()).select_from(steps.limit(max_points + 1).subquery()))
    out: dict[str, tuple[Series, bool]] = {}
    if count <= max_points:
        if not every_name or step_min is not None or step_max is not None:
            where.append(MetricPoint.name.in_(names))  # the primary key's (name, step) ranges
        rows = raw_rows(
            session.connection(),
            select(MetricPoint.name, MetricPoint.step, MetricPoint.value)
            .where(*where)
            .order_by(MetricPoint.name, MetricPoint.step),
        )
        for name, group in groupby(rows, key=itemgetter(0)):
            points = list(group)
            series_ = Series.model_construct(
                step=[p[1] for p in points], value=[p[2] for p in points]
            )
            out[name] = series_, False
    for name in names:
        found = out.get(name)
        if found is None or len(found[0].step) > max_points:  # not read together, or too long
            kwargs = {"max_points": max_points, "step_min": step_min, "step_max": step_max}
            out[name] = series(session, experiment_id, name, **kwargs)
    return {name: out[name] for name in names}


def _range(experiment_id: int, step_min: int | None, step_max: int | None) -> list[Any]:
    where: list[Any] = [MetricPoint.experiment_id == experiment_id]
    if step_min is not None:
        where.append(MetricPoint.step >= step_min)
    if step_max is not None:
        where.append(MetricPoint.step <= step_max)
    return where


def series(
    session: Session,
    experiment_id: int,
    name: str,
    *,
    max_points: int | None,
    step_min: int | None,
    step_max: int | None,
) -> tuple[Series, bool]:
    """One series in [step_min, step_max]; min/max-bucketed when longer than max_points
    (or than MAX_POINTS_PER_SERIES without it)."""
    max_points = point_budget(max_points, 1) if max_points is None else max_points
    where = [*_range(experiment_id, step_min, step_max), MetricPoint.name == name]
    if max_points is not None:
        connection = session.connection()
        in_range = select(MetricPoint.step).where(*where)
        count = session.scalar(
            select(func.count()).select_from(in_range.limit(max_points + 1).subquery())
        )
        if count > max_points:
            # Two ORDER BY ... LIMIT 1 lookups walk the primary key: no scan of the range.
            lo = session.scalar(in_range.order_by(MetricPoint.step).limit(1))
            hi = session.scalar(in_range.order_by(MetricPoint.step.desc()).limit(1))
            found = rollups.query(connection, experiment_id, name, lo, hi, max_points)
            if found is None:
                found = min_max_points(connection, experiment_id, name, lo, hi, max_points)
            return Series(step=found[0], value=found[1]), True
    rows = session.execute(
        select(MetricPoint.step, MetricPoint.value).where(*where).order_by(MetricPoint.step)
    ).all()
    return Series(step=[r[0] for r in rows], value=[r[1] for r in rows]), False


def metrics_message_between(
    session: Session, experiment_id: int, step_min: int, step_max: int
) -> dict[str, Any]:
    """The stored points of [step_min, step_max] as one live `metrics` message."""
    rows = session.execute(
        select(MetricPoint.step, MetricPoint.name, MetricPoint.value).where(
            MetricPoint.experiment_id == experiment_id,
            MetricPoint.step >= step_min,
            MetricPoint.step <= step_max,
        )
    ).all()
    steps, columns = columnar([tuple(r) for r in rows])
    return metrics_message(experiment_id, steps, columns)


MAX_SUMMARY_EXPERIMENTS = 200
MAX_SUMMARY_NAMES = 20


def summaries(
    session: Session, experiment_ids: list[int], names: list[str]
) -> dict[int, dict[str, MetricSummary]]:
    """Last, min and max of each named series of each experiment, in two index-backed reads:
    the extremes from the coarsest rollup level (a few rows per series, never a point scan),
    the last values at each run's latest env step."""
    if not experiment_ids or not names:
        return {}
    top = rollups.LEVELS - 1
    extremes = session.execute(
        select(
            MetricRollup.experiment_id,
            MetricRollup.name,
            func.min(MetricRollup.min_value),
            func.max(MetricRollup.max_value),
        )
        .where(
            MetricRollup.experiment_id.in_(experiment_ids),
            MetricRollup.name.in_(names),
            MetricRollup.level == top,
        )
        .group_by(MetricRollup.experiment_id, MetricRollup.name)
    ).all()
    latest = {
        exp_id: steps
        for exp_id, steps in session.execute(
            select(Experiment.id, Experiment.env_steps).where(
                Experiment.id.in_(experiment_ids), Experiment.env_steps.is_not(None)
            )
        )
    }
    last: dict[tuple[int, str], float] = {}
    if latest:
        rows = session.execute(
            select(MetricPoint.experiment_id, MetricPoint.name, MetricPoint.value).where(
                tuple_(MetricPoint.experiment_id, MetricPoint.step).in_(list(latest.items())),
                MetricPoint.name.in_(names),
            )
        ).all()
        last = {(exp_id, name): value for exp_id, name, value in rows}
    out: dict[int, dict[str, MetricSummary]] = {}
    for exp_id, name, low, high in extremes:
        out.setdefault(exp_id, {})[name] = MetricSummary(
            last=last.get((exp_id, name)), min=low, max=high
        )
    return out
