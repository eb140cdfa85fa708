"""studies: hyperparameter searches whose trials are experiments

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 23:00:00.000000

A `studies` table and a `study_trials` table (one row per suggestion; its experiment a foreign
key that is set to NULL when that experiment alone is deleted).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.db import UTCDateTime

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "studies",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("space", sa.JSON(), nullable=False),
        sa.Column("objective", sa.JSON(), nullable=False),
        sa.Column("sampler", sa.JSON(), nullable=False),
        sa.Column("pruner", sa.JSON(), nullable=False),
        sa.Column("n_trials", sa.Integer(), nullable=False),
        sa.Column("max_parallel", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("interval_env_steps", sa.Integer(), nullable=False),
        sa.Column("stopped_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_studies")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_studies_finished_at"), ["finished_at"], unique=False)

    op.create_table(
        "study_trials",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("study_id", sa.Integer(), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=True),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("intermediate", sa.JSON(), nullable=False),
        sa.Column("system_attrs", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_study_trials_experiment_id_experiments"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["study_id"],
            ["studies.id"],
            name=op.f("fk_study_trials_study_id_studies"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_study_trials")),
        sa.UniqueConstraint("experiment_id", name=op.f("uq_study_trials_experiment_id")),
        sa.UniqueConstraint("study_id", "number", name=op.f("uq_study_trials_study_id_number")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("study_trials", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_study_trials_study_id"), ["study_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("study_trials", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_study_trials_study_id"))

    op.drop_table("study_trials")
    with op.batch_alter_table("studies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_studies_finished_at"))

    op.drop_table("studies")
