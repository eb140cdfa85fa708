"""The registry of every domain's ORM models: importing this module puts all tables on
`Base.metadata` (Alembic's target, the migration drift test, and sessions whose flushes follow
foreign keys into tables the caller never imported). A new domain with tables adds its models
module here, and nowhere else."""

from __future__ import annotations

from sqlalchemy import MetaData

import app.checkpoints.models
import app.evaluations.models
import app.experiments.models
import app.metrics.models
import app.studies.models
import app.sweeps.models  # noqa: F401
from app.core.db import Base


def all_models() -> MetaData:
    """Every table (their modules are imported with this one)."""
    return Base.metadata
