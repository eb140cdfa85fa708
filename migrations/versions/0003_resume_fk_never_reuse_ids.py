"""resume checkpoint foreign key; ids never reused on SQLite

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01 09:00:00.000000

`experiments.resume_from_checkpoint_id` becomes a foreign key to `checkpoints.id` (ON DELETE
RESTRICT, indexed), and on SQLite the tables whose ids are shown or referenced become
AUTOINCREMENT, so a deleted row's id never comes back for another row (SQLite would otherwise
reuse the highest id after a delete, and a queued resume could load another experiment's
weights). Before the constraint is added, references that are already wrong are settled:
a pending or queued experiment whose checkpoint is gone (or whose id was reused by a checkpoint
of another experiment than its parent) fails, saying so; other wrong references are cleared.
"""

import datetime as dt
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.core.db import UTCDateTime

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FK_NAME = "fk_experiments_resume_from_checkpoint_id_checkpoints"
INDEX_NAME = "ix_experiments_resume_from_checkpoint_id"
NEVER_REUSE = ("experiments", "checkpoints", "experiment_events", "log_lines")

_experiments = sa.table(
    "experiments",
    sa.column("id", sa.Integer),
    sa.column("status", sa.String),
    sa.column("parent_id", sa.Integer),
    sa.column("resume_from_checkpoint_id", sa.Integer),
    sa.column("error", sa.Text),
    sa.column("updated_at", UTCDateTime),
    sa.column("finished_at", UTCDateTime),
)
_checkpoints = sa.table(
    "checkpoints", sa.column("id", sa.Integer), sa.column("experiment_id", sa.Integer)
)
_events = sa.table(
    "experiment_events",
    sa.column("experiment_id", sa.Integer),
    sa.column("from_status", sa.String),
    sa.column("to_status", sa.String),
    sa.column("reason", sa.Text),
    sa.column("at", UTCDateTime),
)


def _settle_wrong_references() -> None:
    """Fail unstarted resumes whose checkpoint is gone or foreign; clear other wrong refs."""
    bind = op.get_bind()
    e, c = _experiments, _checkpoints
    rows = bind.execute(
        sa.select(e.c.id, e.c.status, e.c.resume_from_checkpoint_id)
        .select_from(e.outerjoin(c, c.c.id == e.c.resume_from_checkpoint_id))
        .where(
            e.c.resume_from_checkpoint_id.is_not(None),
            sa.or_(c.c.id.is_(None), c.c.experiment_id != sa.func.coalesce(e.c.parent_id, -1)),
        )
    ).all()
    now = dt.datetime.now(dt.UTC)
    for exp_id, status, checkpoint_id in rows:
        if status in ("pending", "queued"):
            reason = (
                f"checkpoint {checkpoint_id} it was to resume from no longer exists "
                "(found while upgrading the database)"
            )
            bind.execute(
                e.update()
                .where(e.c.id == exp_id)
                .values(status="failed", error=reason, updated_at=now, finished_at=now)
            )
            bind.execute(
                _events.insert().values(
                    experiment_id=exp_id,
                    from_status=status,
                    to_status="failed",
                    reason=reason,
                    at=now,
                )
            )
        bind.execute(e.update().where(e.c.id == exp_id).values(resume_from_checkpoint_id=None))


def upgrade() -> None:
    _settle_wrong_references()
    if op.get_bind().dialect.name == "sqlite":
        for table in NEVER_REUSE:
            with op.batch_alter_table(
                table, recreate="always", table_kwargs={"sqlite_autoincrement": True}
            ) as batch_op:
                if table == "experiments":
                    _add_reference(batch_op)
    else:
        with op.batch_alter_table("experiments") as batch_op:
            _add_reference(batch_op)


def _add_reference(batch_op: object) -> None:
    batch_op.create_foreign_key(  # type: ignore[attr-defined]
        FK_NAME, "checkpoints", ["resume_from_checkpoint_id"], ["id"], ondelete="RESTRICT"
    )
    batch_op.create_index(  # type: ignore[attr-defined]
        INDEX_NAME, ["resume_from_checkpoint_id"], unique=False
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for table in NEVER_REUSE:
            with op.batch_alter_table(
                table, recreate="always", table_kwargs={"sqlite_autoincrement": False}
            ) as batch_op:
                if table == "experiments":
                    batch_op.drop_index(INDEX_NAME)
                    batch_op.drop_constraint(FK_NAME, type_="foreignkey")
    else:
        with op.batch_alter_table("experiments") as batch_op:
            batch_op.drop_index(INDEX_NAME)
            batch_op.drop_constraint(FK_NAME, type_="foreignkey")
