"""ORM rows of the experiments domain: experiments, their tags, lifecycle events and logs."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from sqlalchemy import JSON, BigInteger, Double, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.core.db import Base, IntPK, JobColumns, UTCDateTime, status_type, utcnow
from app.core.stored_config import PPOConfigColumn, StoredConfig
from app.experiments.lifecycle import ExperimentStatus

# SQLite reuses the highest rowid after a delete unless the table is AUTOINCREMENT; ids that are
# shown to users or referenced by other rows must never come back for a different row.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}
# A row's experiment: the database deletes the row with it (ON DELETE CASCADE).
ExperimentRef = Annotated[int, mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"))]


class RunGroupColumns:
    """The columns of every group of runs (a sweep's members, a study's trials): its name, the
    base config as the user gave it (partial, unresolved: each run resolves its own), how many
    of its runs may run at once, and the settings it gives each run."""

    id: Mapped[IntPK]
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    max_parallel: Mapped[int] = mapped_column(Integer)
    # Given to every run (videos as it trains; 0: none).
    evaluation_every: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Experiment(JobColumns, Base):
    __tablename__ = "experiments"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[IntPK]
    name: Mapped[str] = mapped_column(String(200))
    # Validated once when stored; loads typed (a StaleConfig if it no longer validates).
    config: Mapped[StoredConfig] = mapped_column(PPOConfigColumn)
    # Watch it learn: every N-th periodic checkpoint gets a video evaluation (0: none).
    evaluation_every: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    status: Mapped[ExperimentStatus] = mapped_column(status_type(ExperimentStatus), index=True)
    # Latest / best values of the metrics the list page shows, kept current by ingest.
    env_steps: Mapped[int | None] = mapped_column(BigInteger)
    elapsed_s: Mapped[float | None] = mapped_column(Double)
    episode_return_mean: Mapped[float | None] = mapped_column(Double)
    best_return: Mapped[float | None] = mapped_column(Double)
    # Lineage: a resumed experiment starts from a checkpoint of another one; a fork copies one.
    parent_id: Mapped[int | None] = mapped_column(Integer, index=True)
    # RESTRICT: the database refuses to delete a checkpoint an experiment still points to.
    # Retention and delete never remove one an unfinished experiment will resume from, and
    # release (set to NULL) the references of finished ones first (app.checkpoints.service).
    resume_from_checkpoint_id: Mapped[int | None] = mapped_column(
        ForeignKey("checkpoints.id", ondelete="RESTRICT", use_alter=True), index=True
    )
    # Sweep members (app.sweeps): the sweep, the index of the grid point (members of one group
    # differ only in their seed) and the grid point as dotted keys -> values. Deleting a sweep
    # deletes its members first (app.sweeps.service), so the database never cascades.
    sweep_id: Mapped[int | None] = mapped_column(
        ForeignKey("sweeps.id", ondelete="RESTRICT"), index=True
    )
    sweep_group: Mapped[int | None] = mapped_column(Integer)
    sweep_point: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # The user's own notes about the run (markdown), edited with PATCH like its name and tags.
    notes: Mapped[str | None] = mapped_column(Text)

    tags: Mapped[list[ExperimentTag]] = relationship(
        cascade="all, delete-orphan",
        passive_deletes=True,
        lazy="selectin",
        order_by="ExperimentTag.tag",
    )

    @property
    def tag_names(self) -> list[str]:
        return [t.tag for t in self.tags]


class ExperimentTag(Base):
    __tablename__ = "experiment_tags"

    experiment_id: Mapped[ExperimentRef] = mapped_column(primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class ExperimentEvent(Base):
    """One lifecycle transition with its reason (the status timeline)."""

    __tablename__ = "experiment_events"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[IntPK]
    experiment_id: Mapped[ExperimentRef] = mapped_column(index=True)
    from_status: Mapped[str | None] = mapped_column(String(16))
    to_status: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class LogLine(Base):
    """A progress line from a job, for the dashboard's log tail."""

    __tablename__ = "log_lines"
    __table_args__ = (
        Index("ix_log_lines_experiment_id_id", "experiment_id", "id"),
        NEVER_REUSE_IDS,
    )

    id: Mapped[IntPK]
    experiment_id: Mapped[ExperimentRef]
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    line: Mapped[str] = mapped_column(Text)
