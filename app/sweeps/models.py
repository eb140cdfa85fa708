"""ORM rows of the sweeps domain: a sweep owns its member experiments.

A member is an ordinary experiment with `sweep_id` set, the index of its grid point
(`sweep_group`: members of one group share every config field but the seed) and the grid point
itself (`sweep_point`, dotted keys -> values). Its status is the experiment's own; the sweep's
status is derived from its members' (`app.sweeps.service.sweep_status`).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base, UTCDateTime, utcnow
from app.experiments.models import NEVER_REUSE_IDS


class Sweep(Base):
    __tablename__ = "sweeps"
    __table_args__ = NEVER_REUSE_IDS

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    # As the user gave them: the base config (unresolved), the grid and the seeds.
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    grid: Mapped[dict[str, list[Any]]] = mapped_column(JSON)
    seeds: Mapped[list[int]] = mapped_column(JSON)
    max_parallel: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
