"""metric rollups

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 03:46:04.791684
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "metric_rollups",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("level", sa.SmallInteger(), nullable=False),
        sa.Column("bucket", sa.BigInteger(), nullable=False),
        sa.Column("min_step", sa.BigInteger(), nullable=False),
        sa.Column("min_value", sa.Double(), nullable=False),
        sa.Column("max_step", sa.BigInteger(), nullable=False),
        sa.Column("max_value", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_metric_rollups_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "experiment_id", "name", "level", "bucket", name=op.f("pk_metric_rollups")
        ),
        sqlite_with_rowid=False,
    )
    _backfill()


def _backfill() -> None:
    """Build the rollups of series stored before this revision."""
    from app.metrics import rollups

    bind = op.get_bind()
    series = bind.execute(sa.text("SELECT DISTINCT experiment_id, name FROM metric_points"))
    for experiment_id, name in series.all():
        points = bind.execute(
            sa.text("SELECT step, value FROM metric_points WHERE experiment_id = :e AND name = :n"),
            {"e": experiment_id, "n": name},
        )
        rollups.update(bind, experiment_id, {(name, step): value for step, value in points})


def downgrade() -> None:
    op.drop_table("metric_rollups")
