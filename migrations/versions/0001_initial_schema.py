"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 03:33:08.748057
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.db import UTCDateTime

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column(
            "status",
            sa.Enum(
                "pending",
                "queued",
                "running",
                "stopping",
                "succeeded",
                "failed",
                "stopped",
                name="experimentstatus",
                native_enum=False,
                length=16,
            ),
            nullable=False,
        ),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("ray_job_id", sa.String(length=128), nullable=True),
        sa.Column("job_token_hash", sa.String(length=64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("log_tail", sa.Text(), nullable=True),
        sa.Column("env_steps", sa.BigInteger(), nullable=True),
        sa.Column("elapsed_s", sa.Double(), nullable=True),
        sa.Column("episode_return_mean", sa.Double(), nullable=True),
        sa.Column("best_return", sa.Double(), nullable=True),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("resume_from_checkpoint_id", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiments")),
    )
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_experiments_status"), ["status"], unique=False)

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("env_steps", sa.BigInteger(), nullable=False),
        sa.Column("episode_return_mean", sa.Double(), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("path", sa.String(length=500), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_checkpoints_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_checkpoints")),
        sa.UniqueConstraint(
            "experiment_id", "iteration", name=op.f("uq_checkpoints_experiment_id_iteration")
        ),
    )
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_checkpoints_experiment_id"), ["experiment_id"], unique=False
        )

    op.create_table(
        "experiment_events",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("from_status", sa.String(length=16), nullable=True),
        sa.Column("to_status", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_events_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_experiment_events")),
    )
    with op.batch_alter_table("experiment_events", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_experiment_events_experiment_id"), ["experiment_id"], unique=False
        )

    op.create_table(
        "experiment_tags",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_experiment_tags_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("experiment_id", "tag", name=op.f("pk_experiment_tags")),
    )
    with op.batch_alter_table("experiment_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_experiment_tags_tag"), ["tag"], unique=False)

    op.create_table(
        "log_lines",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("line", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_log_lines_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_lines")),
    )
    with op.batch_alter_table("log_lines", schema=None) as batch_op:
        batch_op.create_index(
            "ix_log_lines_experiment_id_id", ["experiment_id", "id"], unique=False
        )

    op.create_table(
        "metric_points",
        sa.Column("experiment_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("step", sa.BigInteger(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(
            ["experiment_id"],
            ["experiments.id"],
            name=op.f("fk_metric_points_experiment_id_experiments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("experiment_id", "name", "step", name=op.f("pk_metric_points")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    op.drop_table("metric_points")
    with op.batch_alter_table("log_lines", schema=None) as batch_op:
        batch_op.drop_index("ix_log_lines_experiment_id_id")

    op.drop_table("log_lines")
    with op.batch_alter_table("experiment_tags", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_tags_tag"))

    op.drop_table("experiment_tags")
    with op.batch_alter_table("experiment_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiment_events_experiment_id"))

    op.drop_table("experiment_events")
    with op.batch_alter_table("checkpoints", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_checkpoints_experiment_id"))

    op.drop_table("checkpoints")
    with op.batch_alter_table("experiments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_experiments_status"))

    op.drop_table("experiments")
