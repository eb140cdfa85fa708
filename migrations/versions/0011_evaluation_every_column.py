"""evaluation_every moves from the stored config to a column of experiments, sweeps and studies

It is a setting of the service (videos of checkpoints as a run trains), not of the trainer,
which never read it. Every stored config loses the key; its value (0 where absent) becomes
the row's column. Experiments' configs are stored resolved, so after this they validate as
the PPOConfig without the field; sweeps' and studies' base configs are partial, as given.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07 06:00:00.000000
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("experiments", "sweeps", "studies")
KEY = "evaluation_every"


def _table(name: str) -> sa.TableClause:
    return sa.table(
        name, sa.column("id", sa.Integer), sa.column("config", sa.JSON), sa.column(KEY, sa.Integer)
    )


def _every(value: Any) -> int:
    """The stored value as the column's integer (the old field's bounds: 0-100,000)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return min(max(value, 0), 100_000)
    return 0


def upgrade() -> None:
    for name in TABLES:
        with op.batch_alter_table(name, schema=None) as batch_op:
            batch_op.add_column(sa.Column(KEY, sa.Integer(), nullable=False, server_default="0"))
    bind = op.get_bind()
    for name in TABLES:
        table = _table(name)
        for row_id, config in bind.execute(sa.select(table.c.id, table.c.config)).all():
            if not isinstance(config, dict) or KEY not in config:
                continue
            rest = {k: v for k, v in config.items() if k != KEY}
            bind.execute(
                table.update()
                .where(table.c.id == row_id)
                .values(config=rest, **{KEY: _every(config[KEY])})
            )


def downgrade() -> None:
    bind = op.get_bind()
    for name in TABLES:
        table = _table(name)
        rows = bind.execute(sa.select(table.c.id, table.c.config, table.c[KEY])).all()
        for row_id, config, every in rows:
            if not isinstance(config, dict):
                continue
            # Experiments stored resolved configs, which always held the field; sweeps and
            # studies held it only when the user gave it.
            if name == "experiments" or every:
                bind.execute(
                    table.update().where(table.c.id == row_id).values(config={**config, KEY: every})
                )
    sqlite = bind.dialect.name == "sqlite"
    for name in TABLES:
        # SQLite drops a column by copying the table: keep its AUTOINCREMENT (ids never reused).
        with op.batch_alter_table(
            name,
            recreate="always" if sqlite else "auto",
            table_kwargs={"sqlite_autoincrement": True} if sqlite else {},
        ) as batch_op:
            batch_op.drop_column(KEY)
