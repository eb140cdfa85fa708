"""ORM rows of the evaluations domain: an evaluation of one checkpoint and its episodes.

The status enum and its allowed transitions live in app/evaluations/lifecycle.py (no SQLAlchemy,
so wire schemas and the Python client can use it).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Integer,
    String,
    Text,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, IntPK, JobColumns, UTCDateTime, status_type
from app.evaluations.lifecycle import ALLOWED, EvaluationStatus
from app.experiments.models import NEVER_REUSE_IDS, ExperimentRef

__all__ = ["ALLOWED", "Evaluation", "EvaluationEpisode", "EvaluationStatus"]


class Evaluation(JobColumns, Base):
    __tablename__ = "evaluations"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[IntPK]
    experiment_id: Mapped[ExperimentRef] = mapped_column(index=True)
    # No foreign key: retention may delete the checkpoint; the evaluation keeps what it was.
    checkpoint_id: Mapped[int] = mapped_column(Integer)
    checkpoint_ref: Mapped[str] = mapped_column(String(32))  # as asked: best, latest or an id
    checkpoint_iteration: Mapped[int] = mapped_column(Integer)
    checkpoint_env_steps: Mapped[int] = mapped_column(BigInteger)
    episodes: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(BigInteger)
    deterministic: Mapped[bool] = mapped_column(Boolean)
    record_video: Mapped[bool] = mapped_column(Boolean)
    # Created by the experiment's `evaluation_every` (app/evaluations/periodic.py), not a user.
    scheduled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    status: Mapped[EvaluationStatus] = mapped_column(status_type(EvaluationStatus), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    job_started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # the job called in
    # Kept current by every episode upload (SQLite has no stddev aggregate).
    episodes_done: Mapped[int] = mapped_column(Integer, default=0)
    return_mean: Mapped[float | None] = mapped_column(Double)
    return_std: Mapped[float | None] = mapped_column(Double)
    return_min: Mapped[float | None] = mapped_column(Double)
    return_max: Mapped[float | None] = mapped_column(Double)
    video: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # trainer.wire.VideoMeta + size
    video_path: Mapped[str | None] = mapped_column(String(500))  # relative to the data dir
    video_message: Mapped[str | None] = mapped_column(Text)  # why there is no video


class EvaluationEpisode(Base):
    __tablename__ = "evaluation_episodes"

    evaluation_id: Mapped[int] = mapped_column(
        ForeignKey("evaluations.id", ondelete="CASCADE"), primary_key=True
    )
    index: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    episode_return: Mapped[float] = mapped_column(Double)
    length: Mapped[int] = mapped_column(Integer)
