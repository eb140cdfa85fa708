"""evaluations

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01 10:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.db import UTCDateTime

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "evaluations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("checkpoint_id", sa.Integer(), nullable=False),
        sa.Column("checkpoint_ref", sa.String(length=32), nullable=False),
        sa.Column("checkpoint_iteration", sa.Integer(), nullable=False),
        sa.Column("checkpoint_env_steps", sa.BigInteger(), nullable=False),
        sa.Column("episodes", sa.Integer(), nullable=False),
        sa.Column("seed", sa.BigInteger(), nullable=False),
        sa.Column("deterministic", sa.Boolean(), nullable=False),
        sa.Column("record_video", sa.Boolean(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "queued",
                "running",
                "succeeded",
                "failed",
                name="evaluationstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("job_started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("ray_job_id", sa.String(length=128), nullable=True),
        sa.Column("job_token_hash", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("log_tail", sa.Text(), nullable=True),
        sa.Column("episodes_done", sa.Integer(), nullable=False),
        sa.Column("return_mean", sa.Double(), nullable=True),
        sa.Column("return_std", sa.Double(), nullable=True),
        sa.Column("return_min", sa.Double(), nullable=True),
        sa.Column("return_max", sa.Double(), nullable=True),
        sa.Column("video", sa.JSON(), nullable=True),
        sa.Column("video_path", sa.String(length=500), nullable=True),
        sa.Column("video_message", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_evaluations_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_evaluations_experiment_id"), ["experiment_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_evaluations_status"), ["status"], unique=False)

    op.create_table(
        "evaluation_episodes",
        sa.Column("evaluation_id", sa.Integer(), nullable=False),
        sa.Column("index", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("episode_return", sa.Double(), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["evaluation_id"],
            ["evaluations.id"],
            name=op.f("fk_evaluation_episodes_evaluation_id_evaluations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("evaluation_id", "index", name=op.f("pk_evaluation_episodes")),
    )


def downgrade() -> None:
    op.drop_table("evaluation_episodes")
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluations_status"))
        batch_op.drop_index(batch_op.f("ix_evaluations_experiment_id"))
    op.drop_table("evaluations")
