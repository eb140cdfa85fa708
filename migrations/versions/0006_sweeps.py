"""sweeps

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01 22:00:00.000000

A `sweeps` table, and on `experiments` the sweep a member belongs to (a foreign key), the index
of its grid point and the grid point itself. On SQLite the experiments table is rebuilt to add
the foreign key (keeping AUTOINCREMENT, see 0003).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.db import UTCDateTime

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FK_NAME = "fk_experiments_sweep_id_sweeps"
INDEX_NAME = "ix_experiments_sweep_id"


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("grid", sa.JSON(), nullable=False),
        sa.Column("seeds", sa.JSON(), nullable=False),
        sa.Column("max_parallel", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
        sqlite_autoincrement=True,
    )
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "experiments",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True} if sqlite else {},
    ) as batch_op:
        batch_op.add_column(sa.Column("sweep_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("sweep_group", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("sweep_point", sa.JSON(), nullable=True))
        batch_op.create_foreign_key(FK_NAME, "sweeps", ["sweep_id"], ["id"], ondelete="RESTRICT")
        batch_op.create_index(INDEX_NAME, ["sweep_id"], unique=False)


def downgrade() -> None:
    sqlite = op.get_bind().dialect.name == "sqlite"
    with op.batch_alter_table(
        "experiments",
        recreate="always" if sqlite else "auto",
        table_kwargs={"sqlite_autoincrement": True} if sqlite else {},
    ) as batch_op:
        batch_op.drop_index(INDEX_NAME)
        batch_op.drop_constraint(FK_NAME, type_="foreignkey")
        batch_op.drop_column("sweep_point")
        batch_op.drop_column("sweep_group")
        batch_op.drop_column("sweep_id")
    op.drop_table("sweeps")
