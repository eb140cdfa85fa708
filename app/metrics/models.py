"""Metric points: one value per (experiment, metric name, env step)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, SmallInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base
from app.experiments.models import ExperimentRef


class MetricPoint(Base):
    """The primary key is the idempotency key of ingest: a retried batch overwrites, never adds.

    On SQLite the table has no rowid, so the points of one series lie together in the primary
    key's b-tree and a range scan over steps reads them in order (downsampling stays fast).
    """

    __tablename__ = "metric_points"
    __table_args__ = {"sqlite_with_rowid": False}

    experiment_id: Mapped[ExperimentRef] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value: Mapped[float] = mapped_column(Double)


class MetricRollup(Base):
    """Min and max point of one series per step bucket, at several bucket widths.

    Level L buckets steps by `step >> (2 * (L + ROLLUP_BASE_SHIFT))`, i.e. widths of 1024 * 4**L
    env steps. Ingest keeps every level current, so a long-range query reads at most a few
    thousand rollup rows instead of scanning a million points. A bucket's extremes only widen:
    overwriting a point with a different value leaves its old extreme in the rollup.
    """

    __tablename__ = "metric_rollups"
    __table_args__ = {"sqlite_with_rowid": False}

    experiment_id: Mapped[ExperimentRef] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    level: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    bucket: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    min_step: Mapped[int] = mapped_column(BigInteger)
    min_value: Mapped[float] = mapped_column(Double)
    max_step: Mapped[int] = mapped_column(BigInteger)
    max_value: Mapped[float] = mapped_column(Double)
