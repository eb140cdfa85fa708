"""ORM rows of the studies domain: a study owns its trials, each trial one experiment.

The rows are the whole state of a study: Optuna's samplers and pruners are re-run over them
each time the service suggests or prunes (app/studies/search.py), so nothing lives in memory
between ticks and any API process can carry a study on after another stopped.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Double, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, IntPK, UTCDateTime, utcnow
from app.experiments.models import NEVER_REUSE_IDS, RunGroupColumns


class Study(RunGroupColumns, Base):
    __tablename__ = "studies"
    __table_args__ = NEVER_REUSE_IDS

    # As the user gave them (validated): the search space (dotted field -> ParamSpec), the
    # objective, the sampler and the pruner.
    space: Mapped[dict[str, Any]] = mapped_column(JSON)
    objective: Mapped[dict[str, Any]] = mapped_column(JSON)
    sampler: Mapped[dict[str, Any]] = mapped_column(JSON)
    pruner: Mapped[dict[str, Any]] = mapped_column(JSON)
    n_trials: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    # Env steps between two intermediate values (the pruner's steps), fixed at creation.
    interval_env_steps: Mapped[int] = mapped_column(Integer)
    stopped_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)  # stopped by the user
    # Every trial has ended and none is to come: the study driver skips it from then on.
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, index=True)


class StudyTrial(Base):
    """One suggestion and what became of it. `(study_id, number)` is unique, so two API
    processes suggesting at once cannot both add trial N: the second insert fails and its
    transaction (the experiment included) is rolled back."""

    __tablename__ = "study_trials"
    __table_args__ = (UniqueConstraint("study_id", "number"), NEVER_REUSE_IDS)

    id: Mapped[IntPK]
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id", ondelete="CASCADE"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    # The trial's experiment; deleting that experiment alone keeps the trial (its params and
    # value still inform the sampler).
    experiment_id: Mapped[int | None] = mapped_column(
        ForeignKey("experiments.id", ondelete="SET NULL"), unique=True
    )
    params: Mapped[dict[str, Any]] = mapped_column(JSON)  # dotted field -> value
    state: Mapped[str] = mapped_column(String(16))  # app.studies.trials.TrialState
    value: Mapped[float | None] = mapped_column(Double)
    # Objective at each reached multiple of the study's interval: {"<env steps>": value}.
    intermediate: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    # What the pruner keeps between calls (successive halving's rungs), as Optuna's trial
    # system attributes.
    system_attrs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    note: Mapped[str | None] = mapped_column(Text)  # why it was pruned, failed or stopped
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
