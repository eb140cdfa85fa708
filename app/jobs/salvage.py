"""What a job wrote down in its job dir but never delivered, stored by the API after all.

A job appends every iteration's metrics to `<job dir>/metrics.jsonl` before a background
thread sends them, keeps each packed checkpoint (`checkpoints/iter_*.tar.gz`, its
CheckpointMeta beside it) until it is uploaded, and, when the API stays unreachable past its
patience, leaves its final status in `final_status.json` (trainer/job.py). A job that dies
(SIGKILL, the OOM killer) or outlives an API outage loses nothing that is in those files when
the job ran on the API's machine: before an experiment is settled, the missing rows (those past
its latest stored step; ingest is idempotent anyway), the checkpoints it has no row for and the
undelivered log lines are stored, and the status is the one the job earned, its reason saying
only what is still missing.

Stored archives are copied (never moved) into checkpoint storage inside the caller's
transaction; the job dir's copies and what retention drops are removed only once that
transaction committed, so a failed commit loses nothing (an archive copied without its row is
an orphan that app.checkpoints.orphans removes at the next start).
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from app.checkpoints import service as checkpoints
from app.checkpoints import storage
from app.checkpoints.models import Checkpoint
from app.core import layout
from app.core.config import Settings
from app.core.system import InsufficientStorage
from app.experiments import service
from app.experiments.lifecycle import ExperimentStatus
from app.experiments.models import Experiment
from app.metrics import service as metrics
from app.metrics.models import MetricPoint
from trainer.wire import (
    CHECKPOINTS_SUBDIR,
    FINAL_STATUS_FILE,
    CheckpointMeta,
    FinalStatusRecord,
    MetricsRow,
    checkpoint_meta_path,
)

log = logging.getLogger(__name__)

BATCH_ROWS = 1000
COPY_CHUNK_BYTES = 1024**2


@dataclass
class Salvaged:
    """What one salvage stored, and what the job's final record says is still missing."""

    rows: int = 0
    checkpoints: list[int] = field(default_factory=list)  # iterations stored from the job dir
    log_lines: int = 0
    refused: list[str] = field(default_factory=list)  # archives that could not be stored, why
    record: FinalStatusRecord | None = None
    missing_steps: list[int] = field(default_factory=list)
    missing_checkpoints: list[int] = field(default_factory=list)
    remove_after_commit: list[Path] = field(default_factory=list)  # see salvage_job_dir

    def describe(self) -> str:
        """'; recovered from the job dir: ...; still missing: ...' ('' when nothing to say)."""
        found = []
        if self.rows:
            found.append(f"{self.rows} metric rows")
        if self.checkpoints:
            found.append(f"the checkpoints of iterations {_listed(self.checkpoints)}")
        if self.log_lines:
            found.append(f"{self.log_lines} log lines")
        missing = []
        if self.missing_steps:
            steps = self.missing_steps
            missing.append(f"{len(steps)} metric rows (steps {min(steps)}..{max(steps)})")
        if self.missing_checkpoints:
            missing.append(f"the checkpoints of iterations {_listed(self.missing_checkpoints)}")
        missing += self.refused
        text = ""
        if found:
            text += f"; recovered from the job dir: {', '.join(found)}"
        if missing:
            text += f"; still missing: {', '.join(missing)}"
        return text

    def reported(self) -> Settlement | None:
        """The status the job earned but could not report (it left it in its job dir)."""
        if self.record is None:
            return None
        report = self.record.report
        reason = (
            f"{report.reason}{self.describe()}; the job left this status in its job dir "
            "(the API was unreachable when the job ended)"
        )
        status = ExperimentStatus(report.status)
        if not status.is_finished:
            status = ExperimentStatus.failed  # a record is only ever written at the end
        return Settlement(status, reason, report.error, report.log_tail)

    def outcome(self, fallback: Settlement) -> Settlement:
        """How the run ends: the status the job earned and left in its job dir, else the
        caller's `fallback` with what was recovered (and what is missing) in its reason."""
        reported = self.reported()
        if reported is not None:
            return reported
        return Settlement(
            fallback.status, fallback.reason + self.describe(), fallback.error, fallback.log_tail
        )


@dataclass(frozen=True)
class Settlement:
    status: ExperimentStatus
    reason: str
    error: str | None = None
    log_tail: str | None = None


def _listed(values: list[int]) -> str:
    if len(values) > 6:
        return f"{values[0]}..{values[-1]} ({len(values)})"
    return ", ".join(str(v) for v in values)


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


def final_record(job_dir: Path) -> FinalStatusRecord | None:
    """The final status the job left because it could not report it, if any."""
    try:
        return FinalStatusRecord.model_validate_json((job_dir / FINAL_STATUS_FILE).read_bytes())
    except (OSError, ValidationError):
        return None


def _stored_iterations(session: Session, experiment_id: int) -> set[int]:
    stmt = select(Checkpoint.iteration).where(Checkpoint.experiment_id == experiment_id)
    return set(session.scalars(stmt))


def _copy_into(source: Path, directory: Path) -> storage.StoredFile:
    """Copy `source` to a temp file in `directory`, hashing it on the way."""
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    fd, name = tempfile.mkstemp(dir=directory, prefix=storage.TEMP_PREFIX, suffix=".salvage")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            while chunk := src.read(COPY_CHUNK_BYTES):
                digest.update(chunk)
                out.write(chunk)
                size += len(chunk)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return storage.StoredFile(tmp, size, digest.hexdigest())


def salvage_checkpoints(
    session: Session, settings: Settings, exp: Experiment, job_dir: Path, into: Salvaged
) -> None:
    """Store the packed checkpoints the job dir holds and the API has no row for, oldest
    first (retention then applies as if they had been uploaded)."""
    from app.evaluations import periodic  # evaluations build on checkpoints

    root = settings.checkpoints_dir
    limits = storage.StorageLimits.from_settings(settings)
    stored = _stored_iterations(session, exp.id)
    found: list[tuple[CheckpointMeta, Path]] = []
    for archive in (job_dir / CHECKPOINTS_SUBDIR).glob("iter_*.tar.gz"):
        try:
            meta = CheckpointMeta.model_validate_json(checkpoint_meta_path(archive).read_bytes())
        except (OSError, ValidationError):
            continue  # packing was cut off: no meta, no checkpoint
        if meta.iteration in stored:
            into.remove_after_commit += [archive, checkpoint_meta_path(archive)]
        else:
            found.append((meta, archive))
    for meta, archive in sorted(found, key=lambda item: item[0].iteration):
        try:
            limits.check(root, archive.stat().st_size)
            copied = _copy_into(archive, storage.experiment_dir(root, exp.id))
        except (InsufficientStorage, OSError) as exc:
            message = getattr(exc, "message", None) or str(exc)
            into.refused.append(f"the checkpoint of iteration {meta.iteration} ({message})")
            continue
        final = storage.new_archive_path(root, exp.id, meta.iteration)
        os.replace(copied.path, final)
        placed = storage.StoredFile(final, copied.size_bytes, copied.sha256)
        checkpoint, removed = checkpoints.register(session, exp, meta, placed, root)
        periodic.on_checkpoint(session, exp, checkpoint, final=meta.final)
        into.checkpoints.append(meta.iteration)
        into.remove_after_commit += [archive, checkpoint_meta_path(archive), *removed]


def _missing_steps(session: Session, experiment_id: int, steps: list[int]) -> list[int]:
    if not steps:
        return []
    stmt = select(MetricPoint.step).where(
        MetricPoint.experiment_id == experiment_id, MetricPoint.step.in_(steps)
    )
    present = set(session.scalars(stmt.distinct()))
    return sorted(s for s in steps if s not in present)


def salvage_job_dir(session: Session, settings: Settings, experiment_id: int) -> Salvaged:
    """Store everything the experiment's job dir holds that the API does not (when the dir
    is on this machine); the files it replaces go once the session's transaction commits."""
    job_dir = layout.experiment_job_dir(settings.data_dir, experiment_id)
    result = Salvaged()
    if not job_dir.is_dir():
        return result
    result.rows = salvage_metrics(session, experiment_id, job_dir / "metrics.jsonl")
    exp = service.get(session, experiment_id, lock=True)
    salvage_checkpoints(session, settings, exp, job_dir, result)
    if result.checkpoints:
        service.append_logs(
            session,
            experiment_id,
            [f"recovered the checkpoints of iterations {_listed(result.checkpoints)} from the "
             f"job dir ({job_dir})"],
        )  # fmt: skip
    record = result.record = final_record(job_dir)
    if record is not None:
        if record.log_lines:
            service.append_logs(session, experiment_id, record.log_lines)
            result.log_lines = len(record.log_lines)
        result.missing_steps = _missing_steps(session, experiment_id, record.steps)
        have = _stored_iterations(session, experiment_id) | set(result.checkpoints)
        result.missing_checkpoints = [i for i in record.checkpoints if i not in have]
        result.remove_after_commit.append(job_dir / FINAL_STATUS_FILE)
    if result.remove_after_commit:
        paths = list(result.remove_after_commit)
        event.listen(session, "after_commit", lambda _: storage.remove_files(paths), once=True)
    return result
