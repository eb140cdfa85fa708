"""A sweep's metrics per seed group: read every member's series at the grid's resolution, put
them on one env-steps grid and aggregate (app.sweeps.aggregate).

Reading 100 members x 10k raw points would cost far more than the response is worth, so a
member is read from the metric rollups (app.metrics.rollups): the min and the max point of each
bucket, at the finest level with at most `points` buckets over the sweep's step range (the
points the experiment charts draw when zoomed out), plus its first and last raw point. Short
series (even level-0 buckets would be too coarse for the grid) are read point by point. All
members come back in three statements whatever their number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np
from sqlalchemy import Connection

from app.metrics import rollups
from app.sweeps import aggregate
from app.sweeps.grid import label
from app.sweeps.schemas import FinalReturn, GroupSeries, MemberFinal, MetricGroups

DEFAULT_POINTS = 200
MAX_POINTS = 2000


@dataclass(frozen=True)
class MemberRef:
    id: int
    group: int
    seed: int


@dataclass(frozen=True)
class GroupRef:
    index: int
    point: dict
    members: list[MemberRef]


# Member ids are integers from our own rows, written into the SQL; the name is a parameter
# ({n}: ":n" on SQLite, "%(n)s" on PostgreSQL). Run on the DB-API cursor: these reads return
# tens of thousands of rows, and SQLAlchemy's Row objects would cost more than the query.
_ENDS = """
WITH ends AS (
  SELECT e.id AS eid,
    (SELECT MIN(step) FROM metric_points WHERE experiment_id = e.id AND name = {n}) AS lo,
    (SELECT MAX(step) FROM metric_points WHERE experiment_id = e.id AND name = {n}) AS hi
  FROM experiments e WHERE e.id IN ({ids})
)
SELECT p.experiment_id, p.step, p.value FROM ends
JOIN metric_points p ON p.experiment_id = ends.eid AND p.name = {n}
  AND p.step IN (ends.lo, ends.hi)
"""
_ROLLUPS = (
    "SELECT experiment_id, min_step, min_value, max_step, max_value FROM metric_rollups "
    "WHERE experiment_id IN ({ids}) AND name = {n} AND level = {level}"
)
_RAW = (
    "SELECT experiment_id, step, value FROM metric_points "
    "WHERE experiment_id IN ({ids}) AND name = {n}"
)


def _fetch(
    connection: Connection, sql: str, ids: Sequence[int], name: str, width: int, level: int = 0
) -> np.ndarray:
    """Rows of `sql` as a float array [R, width], on the session's own DB-API connection."""
    placeholder = "%(n)s" if connection.dialect.name == "postgresql" else ":n"
    query = sql.format(n=placeholder, ids=",".join(str(int(i)) for i in ids), level=int(level))
    cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(query, {"n": name})
        rows = cursor.fetchall()
    finally:
        cursor.close()
    flat = np.fromiter(chain.from_iterable(rows), dtype=np.float64, count=len(rows) * width)
    return flat.reshape(-1, width)


def _level(lo: int, hi: int, points: int) -> int | None:
    """The finest rollup level with at most `points` buckets over [lo, hi]; None when even
    level 0 has fewer than points / 4 (a short series: read its raw points)."""
    span = hi - lo + 1
    if span / (1 << rollups.level_shift(0)) < points / 4:
        return None
    for level in range(rollups.LEVELS):
        if span / (1 << rollups.level_shift(level)) <= points:
            return level
    return rollups.LEVELS - 1


def read_series(
    connection: Connection, ids: Sequence[int], name: str, points: int
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Member id -> (steps ascending [K], values [K]) for the members that have `name`."""
    end_rows = _fetch(connection, _ENDS, ids, name, 3)
    if not len(end_rows):
        return {}
    level = _level(int(end_rows[:, 1].min()), int(end_rows[:, 1].max()), points)
    if level is None:
        rows = _fetch(connection, _RAW, ids, name, 3)
    else:
        b = _fetch(connection, _ROLLUPS, ids, name, 5, level)
        rows = np.concatenate([b[:, [0, 1, 2]], b[:, [0, 3, 4]], end_rows])
    # Sort by (member, step) and drop repeated points (a bucket's min and max can be one point).
    rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))]
    keep = np.ones(len(rows), dtype=bool)
    keep[1:] = (rows[1:, 0] != rows[:-1, 0]) | (rows[1:, 1] != rows[:-1, 1])
    rows = rows[keep]
    member_ids, starts = np.unique(rows[:, 0], return_index=True)
    bounds = [*starts[1:], len(rows)]
    return {
        int(m): (rows[s:e, 1], rows[s:e, 2])
        for m, s, e in zip(member_ids, starts, bounds, strict=True)
    }


def _floats(values: np.ndarray) -> list[float | None]:
    return [None if v != v else v for v in values.tolist()]  # NaN != NaN: no value there


def group_metrics(
    connection: Connection, groups: list[GroupRef], name: str, points: int
) -> MetricGroups:
    """One metric of every group on a common env-steps grid, with each group's final values."""
    ids = [m.id for g in groups for m in g.members]
    series = read_series(connection, ids, name, points) if ids else {}
    if not series:
        grid = np.zeros(0, dtype=np.int64)
    else:
        first = np.array([s[0][0] for s in series.values()])
        last = np.array([s[0][-1] for s in series.values()])
        grid = aggregate.common_grid(first, last, points)
    present = [[m for m in g.members if m.id in series] for g in groups]
    values = np.full((len(groups), max((len(p) for p in present), default=0), len(grid)), np.nan)
    for k, members in enumerate(present):
        for row, member in enumerate(members):
            values[k, row] = aggregate.on_grid(*series[member.id], grid)
    stats = aggregate.group_stats(values)
    out = []
    for k, (group, members) in enumerate(zip(groups, present, strict=True)):
        finals = [
            MemberFinal(
                experiment_id=m.id,
                seed=m.seed,
                step=int(series[m.id][0][-1]),
                value=float(series[m.id][1][-1]),
            )
            for m in members
        ]
        last_values = [f.value for f in finals]
        out.append(
            GroupSeries(
                index=group.index,
                label=label(group.point),
                point=group.point,
                member_ids=[m.id for m in group.members],
                n=stats.n[k].tolist(),
                mean=_floats(stats.mean[k]),
                min=_floats(stats.min[k]),
                max=_floats(stats.max[k]),
                ci_low=_floats(stats.ci_low[k]),
                ci_high=_floats(stats.ci_high[k]),
                final=FinalReturn(
                    n=len(finals),
                    mean=float(np.mean(last_values)) if finals else None,
                    min=min(last_values) if finals else None,
                    max=max(last_values) if finals else None,
                    members=finals,
                ),
            )
        )
    return MetricGroups(step=grid.tolist(), groups=out)
