"""The experiment state machine: which status may follow which.

    pending ──► queued ──► running ──► succeeded | failed | stopped
       │           │          │
       │           │          └──► stopping ──► stopped | failed | succeeded
       └───────────┴──► stopped | failed   (stopped before start; launch errors)

A stop of a pending or queued experiment ends it at once; a running one goes through
`stopping` until its job has saved a final checkpoint and reported `stopped`.
"""

from __future__ import annotations

import enum


class ExperimentStatus(enum.StrEnum):
    pending = "pending"
    queued = "queued"
    running = "running"
    stopping = "stopping"
    succeeded = "succeeded"
    failed = "failed"
    stopped = "stopped"

    @property
    def is_finished(self) -> bool:
        return self in FINISHED


S = ExperimentStatus
FINISHED = frozenset({S.succeeded, S.failed, S.stopped})

ALLOWED: dict[ExperimentStatus, frozenset[ExperimentStatus]] = {
    S.pending: frozenset({S.queued, S.running, S.stopped, S.failed}),
    S.queued: frozenset({S.running, S.stopped, S.failed}),
    S.running: frozenset({S.stopping, S.succeeded, S.failed, S.stopped}),
    S.stopping: frozenset({S.stopped, S.failed, S.succeeded}),
    S.succeeded: frozenset(),
    S.failed: frozenset(),
    S.stopped: frozenset(),
}
