"""The evaluation state machine: which status may follow which.

    pending ──► queued ──► running ──► succeeded | failed
       │           │
       └───────────┴──► failed   (launch errors, does not fit the cluster)

An evaluation has no `stopping`/`stopped`: deleting one stops its job.
"""

from __future__ import annotations

import enum


class EvaluationStatus(enum.StrEnum):
    pending = "pending"
    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"

    @property
    def is_finished(self) -> bool:
        return self in (EvaluationStatus.succeeded, EvaluationStatus.failed)


E = EvaluationStatus
ALLOWED: dict[EvaluationStatus, frozenset[EvaluationStatus]] = {
    E.pending: frozenset({E.queued, E.running, E.failed}),
    E.queued: frozenset({E.running, E.failed}),
    E.running: frozenset({E.succeeded, E.failed}),
    E.succeeded: frozenset(),
    E.failed: frozenset(),
}
