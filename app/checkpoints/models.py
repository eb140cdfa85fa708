"""Checkpoint rows; the archives themselves live under the data dir."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import BigInteger, Double, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, IntPK, UTCDateTime, utcnow
from app.experiments.models import NEVER_REUSE_IDS, ExperimentRef


class Checkpoint(Base):
    """`path` is relative to the checkpoints dir; a file name is never reused (it carries a
    random suffix), so a failed upload can never remove the archive of a committed row."""

    __tablename__ = "checkpoints"
    __table_args__ = (UniqueConstraint("experiment_id", "iteration"), NEVER_REUSE_IDS)

    id: Mapped[IntPK]
    experiment_id: Mapped[ExperimentRef] = mapped_column(index=True)
    iteration: Mapped[int] = mapped_column(Integer)
    env_steps: Mapped[int] = mapped_column(BigInteger)
    episode_return_mean: Mapped[float | None] = mapped_column(Double)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    sha256: Mapped[str] = mapped_column(String(64))
    path: Mapped[str] = mapped_column(String(500))
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
