"""Rollups: per-bucket min/max points of each series, kept at ingest, read by long queries.

Widths grow by 4x per level (16384, 65536, ... steps); a query for N points over a range picks
the finest level with at most N/2 buckets in it, reads the buckets fully inside the range from
the rollup table and computes the two partial edge buckets from the raw points. The result is
exactly "min and max point per bucket", with bucket widths rounded up to the next level (so
between N/4 and N points come back).
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import Connection, text

from app.metrics.downsample import driver_cursor, min_max_points

# Level 0 buckets are 2**14 = 16384 steps wide: a PPO iteration is hundreds to thousands of env
# steps, so a level-0 bucket holds several points and the rollups stay far smaller than the
# series. Ranges too short for level 0 are bucketed from the raw points (a short scan).
BASE_SHIFT = 14
LEVELS = 14  # the widest level: 16384 * 4**13 ~ 1.1e12 steps


def level_shift(level: int) -> int:
    return BASE_SHIFT + 2 * level


Point = tuple[int, float]  # (step, value)
Extremes = tuple[int, float, int, float]  # min_step, min_value, max_step, max_value


def _merge_into(buckets: dict[int, list], key: int, ext: Extremes | list) -> None:
    cur = buckets.get(key)
    if cur is None:
        buckets[key] = list(ext)
        return
    if ext[1] < cur[1] or (ext[1] == cur[1] and ext[0] < cur[0]):
        cur[0], cur[1] = ext[0], ext[1]
    if ext[3] > cur[3] or (ext[3] == cur[3] and ext[2] < cur[2]):
        cur[2], cur[3] = ext[2], ext[3]


def rollup_rows(
    series: dict[str, list[Point]],
) -> list[tuple[str, int, int, int, float, int, float]]:
    """(name, level, bucket, min_step, min_value, max_step, max_value) for every level.

    Level 0 comes from the points in one pass; each coarser level from the one below (4 of
    its buckets make one), so the work is about one pass over the points whatever the levels.
    """
    out = []
    for name, points in series.items():
        level_buckets: dict[int, list] = {}
        for step, value in points:
            _merge_into(level_buckets, step >> BASE_SHIFT, (step, value, step, value))
        for level in range(LEVELS):
            out.extend((name, level, b, *ext) for b, ext in level_buckets.items())
            coarser: dict[int, list] = {}
            for b, ext in level_buckets.items():
                _merge_into(coarser, b >> 2, ext)
            level_buckets = coarser
    return out


# Only a bucket whose extremes widen is written: a point inside the range it already spans
# (most points, for coarse buckets) leaves the row alone, so no new row version, no dead
# tuple for VACUUM and no WAL on PostgreSQL.
_MERGE = """
ON CONFLICT (experiment_id, name, level, bucket) DO UPDATE SET
  min_step = CASE WHEN excluded.min_value < metric_rollups.min_value
                  THEN excluded.min_step ELSE metric_rollups.min_step END,
  min_value = CASE WHEN excluded.min_value < metric_rollups.min_value
                  THEN excluded.min_value ELSE metric_rollups.min_value END,
  max_step = CASE WHEN excluded.max_value > metric_rollups.max_value
                  THEN excluded.max_step ELSE metric_rollups.max_step END,
  max_value = CASE WHEN excluded.max_value > metric_rollups.max_value
                  THEN excluded.max_value ELSE metric_rollups.max_value END
WHERE excluded.min_value < metric_rollups.min_value
   OR excluded.max_value > metric_rollups.max_value
"""
_SQLITE = (
    "INSERT INTO metric_rollups (experiment_id, name, level, bucket, min_step, min_value, "
    "max_step, max_value) VALUES (?, ?, ?, ?, ?, ?, ?, ?)" + _MERGE
)
_POSTGRES = (
    "INSERT INTO metric_rollups (experiment_id, name, level, bucket, min_step, min_value, "
    "max_step, max_value) SELECT %b, * FROM unnest(%b::text[], %b::smallint[], %b::bigint[], "
    "%b::bigint[], %b::float8[], %b::bigint[], %b::float8[])" + _MERGE
)


def update(
    connection: Connection, experiment_id: int, points: dict[tuple[str, int], float]
) -> None:
    """Merge a batch of (name, step) -> value points into every level."""
    series: dict[str, list[Point]] = defaultdict(list)
    for (name, step), value in points.items():
        series[name].append((step, value))
    rows = rollup_rows(series)
    if connection.dialect.name == "postgresql":
        columns = list(zip(*rows, strict=True)) if rows else [[]] * 7
        with driver_cursor(connection) as cursor:
            cursor.execute(_POSTGRES, (experiment_id, *[list(c) for c in columns]))
    else:
        connection.exec_driver_sql(_SQLITE, [(experiment_id, *row) for row in rows])


def choose_level(lo: int, hi: int, max_points: int) -> int | None:
    """The finest level with at most max_points/2 - 2 buckets over [lo, hi] (edges aside)."""
    budget = max(1, max_points // 2 - 2)
    for level in range(LEVELS):
        width = 1 << level_shift(level)
        if (hi - lo + 1) / width <= budget:
            return level
    return LEVELS - 1


def query(
    connection: Connection, experiment_id: int, name: str, lo: int, hi: int, max_points: int
) -> tuple[list[int], list[float]] | None:
    """Min/max points per bucket over [lo, hi] from the rollups; None when the range is too
    short for level 0 (the caller then buckets the raw points)."""
    level = choose_level(lo, hi, max_points)
    shift = level_shift(level)
    width = 1 << shift
    first_full = -(-lo // width)
    last_full = (hi + 1) // width - 1
    if last_full < first_full:
        return None
    points: dict[int, float] = {}
    rows = connection.execute(
        text(
            "SELECT min_step, min_value, max_step, max_value FROM metric_rollups "
            "WHERE experiment_id = :e AND name = :n AND level = :l AND bucket >= :b0 "
            "AND bucket <= :b1"
        ),
        {"e": experiment_id, "n": name, "l": level, "b0": first_full, "b1": last_full},
    )
    for min_step, min_value, max_step, max_value in rows:
        points[min_step] = min_value
        points[max_step] = max_value
    edges = [(lo, first_full * width - 1), ((last_full + 1) * width, hi)]
    for a, b in edges:
        if a <= b:
            steps, values = min_max_points(connection, experiment_id, name, a, b, 2)
            points.update(zip(steps, values, strict=True))
    steps = sorted(points)
    return steps, [points[s] for s in steps]
