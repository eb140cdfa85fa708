"""ORM rows of the sweeps domain: a sweep owns its member experiments.

A member is an ordinary experiment with `sweep_id` set, the index of its grid point
(`sweep_group`: members of one group share every config field but the seed) and the grid point
itself (`sweep_point`, dotted keys -> values). Its status is the experiment's own; the sweep's
status is derived from its members' (`app.sweeps.service.sweep_status`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON
from sqlalchemy.orm import Mapped, mapped_column

from app.core.db import Base
from app.experiments.models import NEVER_REUSE_IDS, RunGroupColumns


class Sweep(RunGroupColumns, Base):
    __tablename__ = "sweeps"
    __table_args__ = NEVER_REUSE_IDS

    # As the user gave them: the grid and the seeds.
    grid: Mapped[dict[str, list[Any]]] = mapped_column(JSON)
    seeds: Mapped[list[int]] = mapped_column(JSON)
