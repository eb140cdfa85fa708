"""The job's side of the job <-> API contract: report metrics, logs, checkpoints and status.

Training must never wait for the API. Metric rows go first to a local JSONL file (the job's
write-ahead log, so nothing is lost even when the API is down for a long time); a background
thread sends them from that file in batches and advances its offset only on success, which keeps
memory bounded by one batch. Every call is idempotent on the API side (points keyed by step and
name, checkpoints by iteration), so a batch whose reply was lost is simply sent again.
Transient failures (connection errors, timeouts, 502/503/504, 429) are retried with exponential
backoff for as long as they last: the API (or its database) is away and nothing is lost by
waiting. A 500 is retried a few times, then that unit (a metrics batch, a log batch, a
checkpoint) is given up, so one batch the API can never take does not hold back everything
queued behind it (the final checkpoint included); its rows stay in the local JSONL copy, its
archive in the job dir. Other 4xx replies are permanent and logged (trainer/api_client.py
classifies every reply). A checkpoint the API refuses (507: its storage is full) stays in the job
dir, but only the latest refused one: refused archives never pile up on a full disk.

A metrics request goes out no sooner than `send_every_s` after the one before, and so does a
logs request: a fast run (CartPole does 30+ iterations a second) sends a few requests a second
with many rows each instead of two requests per iteration. The API then stores, and every live
viewer receives, a handful of messages a second per job however fast it trains. The first
request of each kind goes at once, checkpoints are not held back, and `close()` flushes without
waiting.

Only `close()` (end of the run) blocks the trainer, and only up to its patience; whatever it
could not deliver by then is described by `undelivered()`, which the job puts in its final
status (the API recovers the rows from the job dir's JSONL copy when it can read it).
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from trainer.api_client import (
    MAX_SERVER_ERROR_ATTEMPTS,
    Backoff,
    JobApiClient,
    PermanentError,
    ServerError,
    TransientError,
    file_chunks,
    storable,
)
from trainer.wire import (
    CheckpointMeta,
    ExperimentSpec,
    LogLines,
    MetricsRow,
    StatusReport,
    checkpoint_meta_path,
    finite_values,
)

__all__ = ["Backoff", "PermanentError", "Reporter", "ReporterStats", "Undelivered"]

log = logging.getLogger(__name__)

SEND_EVERY_S = 0.25  # a metrics (or logs) request at most this often: rows gather meanwhile

# One log request stays far below the API's body limit (ROLLOUT_MAX_REQUEST_BODY_BYTES, 8 MiB
# by default), however long the lines; the API keeps at most 10,000 characters of a line.
LOG_BATCH_MAX_BYTES = 1024 * 1024
LOG_LINE_MAX_CHARS = 10_000


@dataclass
class _PendingCheckpoint:
    path: Path
    meta: CheckpointMeta


@dataclass
class ReporterStats:
    rows_sent: int = 0
    log_lines_sent: int = 0
    log_lines_dropped: int = 0
    checkpoints_sent: int = 0
    failures: int = 0
    given_up: int = 0  # units skipped after max_server_error_attempts 500s
    given_up_rows: list[int] = field(default_factory=list)  # steps of skipped metric rows
    given_up_checkpoints: list[int] = field(default_factory=list)  # their iterations
    permanent_errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Undelivered:
    """What the reporter did not deliver: metric rows (by step), checkpoints (by iteration),
    log lines. All of it but the log lines is kept in `job_dir`."""

    job_dir: Path
    steps: tuple[int, ...] = ()
    checkpoints: tuple[int, ...] = ()
    log_lines: int = 0
    lines: tuple[str, ...] = ()  # the undelivered log lines themselves

    def __bool__(self) -> bool:
        return bool(self.steps or self.checkpoints or self.log_lines)

    def describe(self) -> str:
        parts = []
        if self.steps:
            parts.append(
                f"{len(self.steps)} metric rows (steps {min(self.steps)}..{max(self.steps)})"
            )
        if self.checkpoints:
            listed = ", ".join(str(i) for i in self.checkpoints)
            parts.append(f"the checkpoints of iterations {listed}")
        if self.log_lines:
            parts.append(f"{self.log_lines} log lines")
        return f"not delivered to the API: {', '.join(parts)}; kept in {self.job_dir}"


class Reporter:
    """Reports one experiment's progress to the API from a background thread.

    `close()` ends the background sender (after delivering what it holds, or a timeout); the
    synchronous calls (`report_status`, `fetch_spec`, `download`) work until `shutdown()`.
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        experiment_id: str,
        job_dir: Path,
        *,
        batch_rows: int = 500,
        max_log_lines: int = 2000,
        timeout_s: float = 10.0,
        backoff: Backoff | None = None,
        transport: httpx.BaseTransport | None = None,
        max_server_error_attempts: int = MAX_SERVER_ERROR_ATTEMPTS,
        send_every_s: float = SEND_EVERY_S,
    ) -> None:
        self.experiment_id = experiment_id
        self._api = JobApiClient.for_job(
            api_url,
            token,
            "experiments",
            experiment_id,
            timeout_s=timeout_s,
            backoff=backoff,
            transport=transport,
            max_server_error_attempts=max_server_error_attempts,
        )
        self._batch_rows = batch_rows
        self._send_every_s = send_every_s
        self._sent_at: dict[str, float] = {}  # kind -> when its last request went out
        self._backoff = self._api.backoff
        self.job_dir = job_dir
        job_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = job_dir / "metrics.jsonl"
        self.metrics_path.touch()
        # Rows left by an earlier attempt of this job are sent again: ingest is idempotent.
        self._written_bytes = self.metrics_path.stat().st_size
        self._sent_bytes = 0
        self._unwritten: deque[bytes] = deque()  # rows a full disk kept out of the file
        self._disk_full = False
        self._logs: deque[str] = deque(maxlen=max_log_lines)
        self._checkpoints: deque[_PendingCheckpoint] = deque()
        self._refused_archive: Path | None = None  # the latest checkpoint the API refused
        self._cond = threading.Condition()
        self._closing = False
        self._abandoned = False
        self._failures = 0
        self._max_server_error_attempts = max_server_error_attempts
        self._unit_failures: dict[tuple[str, object], int] = {}  # 500s so far, per unit
        self.stats = ReporterStats()
        self._thread = threading.Thread(target=self._run, name="rollout-reporter", daemon=True)
        self._thread.start()

    # --- producer side (the training loop) --------------------------------------------------
    def add_metrics(self, step: int, time_s: float, values: dict[str, float]) -> None:
        """Append one iteration's metrics to the local JSONL log and wake the sender."""
        finite = finite_values(values)
        finite.pop("time_s", None)  # the row's own field carries the clock
        row = MetricsRow(step=step, time_s=max(0.0, time_s), values=finite)
        line = (row.model_dump_json() + "\n").encode()
        with self._cond:
            self._unwritten.append(line)
            self._write_rows()
            self._cond.notify()

    def _write_rows(self) -> None:
        """Append the rows not yet in the JSONL file, in order. A full disk (ENOSPC, EDQUOT)
        keeps them in memory (a few hundred bytes per iteration) and cuts off any partial
        line; the next row tries again: training goes on, and no row is lost or reordered."""
        fd = os.open(self.metrics_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while self._unwritten:
                view = memoryview(self._unwritten[0])
                while view:
                    view = view[os.write(fd, view) :]
                self._written_bytes += len(self._unwritten.popleft())
            self._disk_full = False
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            os.ftruncate(fd, self._written_bytes)
            if not self._disk_full:
                log.warning(
                    "reporter: cannot write %s (%s); keeping metric rows in memory until "
                    "there is room",
                    self.metrics_path,
                    exc.strerror,
                )
            self._disk_full = True
        finally:
            os.close(fd)

    def add_log(self, line: str) -> None:
        """Queue a progress line for the dashboard's log tail (the oldest drop when full)."""
        line = storable(line)[:LOG_LINE_MAX_CHARS]
        with self._cond:
            if len(self._logs) == self._logs.maxlen:
                self.stats.log_lines_dropped += 1
            self._logs.append(line)
            self._cond.notify()

    def add_checkpoint(self, archive: Path, meta: CheckpointMeta) -> None:
        """Queue a packed checkpoint (.tar.gz) for upload; the file is deleted once uploaded."""
        with self._cond:
            self._checkpoints.append(_PendingCheckpoint(archive, meta))
            self._cond.notify()

    # --- synchronous calls --------------------------------------------------------------------
    def fetch_spec(self, timeout_s: float = 60.0) -> ExperimentSpec:
        """The experiment's config (and checkpoint to resume from), fetched with the job token."""
        return ExperimentSpec.model_validate(self._api.call("GET", timeout_s=timeout_s).json())

    def download(self, url_path: str, dest: Path, timeout_s: float = 120.0) -> Path:
        """Stream a file (e.g. a checkpoint to resume from) from the API to `dest`."""
        return self._api.download(url_path, dest, timeout_s=timeout_s)

    def report_status(
        self,
        status: str,
        reason: str = "",
        error: str | None = None,
        log_tail: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Post a lifecycle transition, retrying transient failures up to `timeout_s`."""
        report = status_report(status, reason, error, log_tail)
        self._api.call("POST", "/status", timeout_s=timeout_s, json=report.model_dump(mode="json"))

    def close(self, timeout_s: float = 60.0) -> bool:
        """Flush every queued row, log line and checkpoint; True if all were delivered (False
        also when a unit was given up after repeated 500s: it is still in the job dir)."""
        with self._cond:
            if self._unwritten:
                self._write_rows()  # the disk may have room again
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout_s)
        with self._cond:
            delivered = not self._thread.is_alive() and not self._has_work()
            delivered = delivered and not self._unwritten
            delivered = delivered and self.stats.given_up == 0
            self._abandoned = True
        if not delivered:
            log.warning("reporter: %s", self.undelivered().describe())
        return delivered

    def undelivered(self) -> Undelivered:
        """What has not reached the API (after `close()`: what never will through this
        reporter)."""
        with self._cond:
            pending = [p.meta.iteration for p in self._checkpoints]
            lines = tuple(self._logs)
            sent = self._sent_bytes
            in_memory = [json.loads(line)["step"] for line in self._unwritten]
        steps = list(self.stats.given_up_rows) + in_memory  # the latter lost with the job
        with self.metrics_path.open("rb") as f:
            f.seek(sent)
            for line in f:
                if line.endswith(b"\n") and line.strip():
                    steps.append(MetricsRow.model_validate_json(line).step)
        return Undelivered(
            job_dir=self.job_dir,
            steps=tuple(sorted(steps)),
            checkpoints=tuple(sorted(self.stats.given_up_checkpoints + pending)),
            log_lines=len(lines),
            lines=lines,
        )

    def shutdown(self) -> None:
        """Release the HTTP connection (after `close()` and the final status report)."""
        self._api.close()

    # --- the sender thread --------------------------------------------------------------------
    def _has_work(self) -> bool:
        return self._sent_bytes < self._written_bytes or bool(self._logs or self._checkpoints)

    def _run(self) -> None:
        while True:
            with self._cond:
                kind = self._next_due()
                if kind is None or self._abandoned:
                    return  # closing and nothing left, or close() gave up waiting
                unit = self._current_unit(kind)
            try:
                self._send(kind)
                self._failures = 0
                self._unit_failures.pop(unit, None)
            except ServerError as exc:
                self._on_server_error(unit, exc)
            except (httpx.TransportError, TransientError) as exc:
                self._failures += 1
                self.stats.failures += 1
                delay = self._backoff.delay(self._failures)
                log.info("reporter: API call failed (%s); retrying in %.1fs", exc, delay)
                time.sleep(delay)
            except PermanentError as exc:
                self.stats.permanent_errors.append(str(exc))
                log.error("reporter: %s", exc)
            except Exception:
                if self._abandoned:
                    return  # close() gave up on this thread
                log.exception("reporter: unexpected error; retrying")
                time.sleep(self._backoff.max_s)

    def _pending(self) -> list[str]:
        """(Holding the lock.) The kinds of unit waiting to be sent, in their order."""
        waiting = {
            "metrics": self._sent_bytes < self._written_bytes,
            "logs": bool(self._logs),
            "checkpoint": bool(self._checkpoints),
        }
        return [kind for kind, is_waiting in waiting.items() if is_waiting]

    def _next_due(self) -> str | None:
        """(Holding the lock.) The kind of unit to send now: metrics, logs and checkpoints in
        that order among those due. A metrics or logs request is due `send_every_s` after the
        last of its kind (rows and lines gather meanwhile into one batch); a checkpoint, and
        anything once `close()` began, at once. None: closing, and nothing is left."""
        while True:
            pending = self._pending()
            if not pending:
                if self._closing:
                    return None
                self._cond.wait()
                continue
            now = time.monotonic()
            waits = []
            for kind in pending:
                due = self._sent_at.get(kind, -math.inf) + self._send_every_s
                if kind == "checkpoint" or self._closing or now >= due:
                    self._sent_at[kind] = now
                    return kind
                waits.append(due - now)
            self._cond.wait(min(waits))

    def _current_unit(self, kind: str) -> tuple[str, object]:
        """(Holding the lock.) The unit `_send(kind)` sends: identifies it across retries."""
        if kind == "metrics":
            return ("metrics", self._sent_bytes)
        if kind == "logs":
            return ("logs", id(self._logs[0]))
        return ("checkpoint", id(self._checkpoints[0]))

    def _on_server_error(self, unit: tuple[str, object], exc: ServerError) -> None:
        """Back off and retry; after max_server_error_attempts on one unit, give it up (each
        unit counts its own attempts: units of other kinds may go out in between)."""
        self.stats.failures += 1
        attempts = self._unit_failures[unit] = self._unit_failures.get(unit, 0) + 1
        if attempts < self._max_server_error_attempts:
            delay = self._backoff.delay(attempts)
            log.info("reporter: API error (%s); retrying in %.1fs", exc, delay)
            time.sleep(delay)
            return
        message = f"gave up on {unit[0]} after {attempts} attempts: {exc}"
        log.error("reporter: %s; it stays in %s", message, self.metrics_path.parent)
        self.stats.given_up += 1
        self.stats.permanent_errors.append(message)
        del self._unit_failures[unit]
        self._skip(unit[0])

    def _skip(self, kind: str) -> None:
        """Drop the head unit of `kind` from the queue (its data stays on disk)."""
        if kind == "metrics":
            rows, self._sent_bytes = _read_rows(
                self.metrics_path, self._sent_bytes, self._batch_rows
            )
            self.stats.given_up_rows.extend(json.loads(r)["step"] for r in rows)
        elif kind == "logs":
            with self._cond:
                count = len(_first_lines_within(self._logs, LOG_BATCH_MAX_BYTES))
            self._drop_logs(count)
        elif kind == "checkpoint":
            self.stats.given_up_checkpoints.append(self._checkpoints[0].meta.iteration)
            self._pop_checkpoint()

    def _send(self, kind: str) -> None:
        """Send the next unit of `kind`: a metrics batch, a logs batch or a checkpoint."""
        if kind == "metrics":
            self._send_metrics_batch()
        elif kind == "logs":
            self._send_logs()
        else:
            self._send_checkpoint(self._checkpoints[0])

    def _send_metrics_batch(self) -> None:
        rows, end = _read_rows(self.metrics_path, self._sent_bytes, self._batch_rows)
        if rows:
            body = {"rows": [json.loads(r) for r in rows]}
            try:
                self._api.send("POST", "/metrics", json=body)
            except PermanentError:
                self._sent_bytes = end  # skip the rejected batch; it stays in the JSONL file
                raise
            self.stats.rows_sent += len(rows)
        self._sent_bytes = end

    def _send_logs(self) -> None:
        with self._cond:
            lines = _first_lines_within(self._logs, LOG_BATCH_MAX_BYTES)
        try:
            body = LogLines(lines=lines).model_dump(mode="json")
            self._api.send("POST", "/logs", json=body)
            self.stats.log_lines_sent += len(lines)
        except PermanentError:
            self._drop_logs(len(lines))
            raise
        self._drop_logs(len(lines))

    def _drop_logs(self, count: int) -> None:
        with self._cond:
            # New lines may have arrived meanwhile; the oldest `count` are the ones sent (unless
            # the deque overflowed, in which case some of them were already dropped).
            for _ in range(min(count, len(self._logs))):
                self._logs.popleft()

    def _send_checkpoint(self, pending: _PendingCheckpoint) -> None:
        params = {k: v for k, v in pending.meta.model_dump().items() if v is not None}
        size = pending.path.stat().st_size
        try:
            self._api.send(
                "PUT",
                "/checkpoints",
                params=params,
                content=file_chunks(pending.path),
                headers={"Content-Length": str(size), "Content-Type": "application/gzip"},
                timeout=max(60.0, size / 5e6),
            )
        except PermanentError:
            self._pop_checkpoint()
            self._keep_refused(pending.path)
            raise
        self.stats.checkpoints_sent += 1
        self._pop_checkpoint()
        _remove_archive(pending.path)

    def _keep_refused(self, archive: Path) -> None:
        """A checkpoint refused for good (e.g. 507, the API's storage is full) stays in the
        job dir, but only the latest one: on a full disk they must not pile up."""
        previous, self._refused_archive = self._refused_archive, archive
        if previous is not None and previous != archive:
            _remove_archive(previous)

    def _pop_checkpoint(self) -> None:
        with self._cond:
            self._checkpoints.popleft()


def status_report(
    status: str, reason: str = "", error: str | None = None, log_tail: str | None = None
) -> StatusReport:
    """A StatusReport cut to the wire's limits (the error's and the log's tails are kept)."""
    return StatusReport(
        status=status,  # type: ignore[arg-type]
        reason=storable(reason)[:2000],
        error=storable(error)[-20_000:] if error else None,
        log_tail=storable(log_tail)[-200_000:] if log_tail else None,
    )


def _remove_archive(archive: Path) -> None:
    """A packed checkpoint and the CheckpointMeta beside it (for the API's salvage)."""
    archive.unlink(missing_ok=True)
    checkpoint_meta_path(archive).unlink(missing_ok=True)


def _read_rows(path: Path, offset: int, limit: int) -> tuple[list[str], int]:
    """Up to `limit` complete JSONL lines from byte `offset`; returns them and the new offset."""
    rows: list[str] = []
    with path.open("rb") as f:
        f.seek(offset)
        while len(rows) < limit:
            line = f.readline()
            if not line.endswith(b"\n"):
                break  # end of file (or a line still being written)
            offset += len(line)
            if line.strip():
                rows.append(line.decode())
    return rows, offset


def _first_lines_within(lines: deque[str], max_bytes: int) -> list[str]:
    """The oldest lines whose UTF-8 size fits `max_bytes` (at least one)."""
    batch: list[str] = []
    size = 0
    for line in lines:
        size += len(line.encode()) + 8  # quotes, comma, escapes: a rough JSON overhead
        if batch and size > max_bytes:
            break
        batch.append(line)
    return batch
