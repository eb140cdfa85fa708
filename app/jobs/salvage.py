"""Metrics a job wrote down but never delivered, recovered from its local JSONL copy.

A job appends every iteration's metrics to `<job dir>/metrics.jsonl` before a background
thread sends them. A job that dies without warning (SIGKILL, the OOM killer) loses what that
thread had not sent yet; when the job ran on the API's machine its file is still there, and the
reconciler ingests the missing rows before it marks the experiment ended. Rows are sent in file
order, so the missing ones are those past the experiment's latest stored step; ingest is
idempotent anyway (keyed by step and name).
"""

from __future__ import annotations

import logging
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.orm import Session

from app.experiments import service
from app.metrics import service as metrics
from trainer.wire import MetricsRow

log = logging.getLogger(__name__)

BATCH_ROWS = 1000


def undelivered_rows(path: Path, after_step: int | None) -> list[MetricsRow]:
    """Complete, valid rows of the JSONL file with a step past `after_step`."""
    rows: list[MetricsRow] = []
    try:
        f = path.open("rb")
    except OSError:
        return rows
    with f:
        for line in f:
            if not line.endswith(b"\n"):
                break  # the last line, cut off mid-write
            try:
                row = MetricsRow.model_validate_json(line)
            except ValidationError:
                continue
            if after_step is None or row.step > after_step:
                rows.append(row)
    return rows


def salvage_metrics(session: Session, experiment_id: int, jsonl: Path) -> int:
    """Ingest the rows of `jsonl` the API does not hold yet; returns how many."""
    exp = service.get(session, experiment_id, lock=True)
    rows = undelivered_rows(jsonl, exp.env_steps)
    for start in range(0, len(rows), BATCH_ROWS):
        metrics.ingest(session, exp, rows[start : start + BATCH_ROWS])
    if rows:
        service.append_logs(
            session,
            experiment_id,
            [f"recovered {len(rows)} metric rows the job wrote but never sent ({jsonl})"],
        )
        log.info("experiment %s: recovered %d metric rows from %s", experiment_id, len(rows), jsonl)
    return len(rows)
