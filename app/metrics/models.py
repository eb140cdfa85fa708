"""Metric points: one value per (experiment, metric name, env step)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Double, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base


class MetricPoint(Base):
    """The primary key is the idempotency key of ingest: a retried batch overwrites, never adds.

    On SQLite the table has no rowid, so the points of one series lie together in the primary
    key's b-tree and a range scan over steps reads them in order (downsampling stays fast).
    """

    __tablename__ = "metric_points"
    __table_args__ = {"sqlite_with_rowid": False}

    experiment_id: Mapped[int] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), primary_key=True
    )
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value: Mapped[float] = mapped_column(Double)
