"""How a run's row changes status, for every kind of run that has a lifecycle (experiments,
evaluations): one sequence, in which each kind states only its state machine, how it loads its
row and what it records and publishes once the row has moved.

The sequence: load the row locked; a move to the status it already has changes nothing (a
retried report is harmless); a move the state machine forbids raises IllegalTransition;
otherwise the row is stamped (`stamp_transition`) and the kind records it. `settle` is the
same move made only while the row is still in the statuses its caller saw (how the service
never overwrites what a job reported meanwhile).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from sqlalchemy.orm import Session

from app.core.db import utcnow
from app.core.errors import IllegalTransition, NotFound


class RunRow(Protocol):
    """A row whose status moves through a run's lifecycle (an experiment, an evaluation)."""

    status: Any
    updated_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    error: str | None
    log_tail: str | None


R = TypeVar("R", bound=RunRow)


def stamp_transition(
    row: RunRow, target: Any, *, error: str | None = None, log_tail: str | None = None
) -> None:
    """Set the row's new status with the times and failure details that go with it: started
    on first running, finished on a terminal status; an error or log tail only when given."""
    now = utcnow()
    row.status = target
    row.updated_at = now
    if target.value == "running" and row.started_at is None:
        row.started_at = now
    if target.is_finished:
        row.finished_at = now
    if error is not None:
        row.error = error
    if log_tail is not None:
        row.log_tail = log_tail


@dataclass(frozen=True)
class Lifecycle(Generic[R]):
    """One kind's state machine and the two things only it knows: how to load its row and
    what a move records."""

    name: str  # "experiment": in the IllegalTransition message
    status: type[Enum]
    allowed: Mapping[Any, Collection[Any]]  # status -> the statuses it may move to
    load: Callable[[Session, int], R]  # the row, locked; NotFound when it is gone
    record: Callable[[Session, R, Any, str], None]  # (row, previous status, reason)

    def transition(
        self,
        session: Session,
        row_id: int,
        to: Any,
        reason: str,
        *,
        error: str | None = None,
        log_tail: str | None = None,
    ) -> R:
        """Move the row to `to` and record it (after commit, the kind publishes it)."""
        target = self.status(to)
        row = self.load(session, row_id)
        if row.status == target:
            return row
        if target not in self.allowed[row.status]:
            raise IllegalTransition(
                f"{self.name} {row_id} cannot go from {row.status.value} to {target.value}"
            )
        previous = row.status
        stamp_transition(row, target, error=error, log_tail=log_tail)
        self.record(session, row, previous, reason)
        return row

    def settle(
        self,
        session: Session,
        row_id: int,
        expected: Collection[Any],
        to: Any,
        reason: str,
        error: str | None = None,
        log_tail: str | None = None,
    ) -> bool:
        """`transition` only while the row is still in one of `expected` (its job may have
        reported meanwhile: the job's own report wins); False when it was not, or is gone."""
        try:
            if self.load(session, row_id).status not in expected:
                return False
        except NotFound:
            return False
        self.transition(session, row_id, to, reason, error=error, log_tail=log_tail)
        return True
