"""The job's side of the job <-> API contract: report metrics, logs, checkpoints and status.

Training must never wait for the API. Metric rows go first to a local JSONL file (the job's
write-ahead log, so nothing is lost even when the API is down for a long time); a background
thread sends them from that file in batches and advances its offset only on success, which keeps
memory bounded by one batch. Every call is idempotent on the API side (points keyed by step and
name, checkpoints by iteration), so a batch whose reply was lost is simply sent again.
Transient failures (connection errors, timeouts, 502/503/504, 429) are retried with exponential
backoff for as long as they last: the API (or its database) is away and nothing is lost by
waiting. A 500 is the API failing on this very request: it is retried `max_server_error_attempts`
times, then that unit (a metrics batch, a log batch, a checkpoint) is given up, so one batch the
API can never take does not hold back everything queued behind it (the final checkpoint
included); its rows stay in the local JSONL copy, its archive in the job dir. Other 4xx replies
are permanent and logged. Only `close()` (end of the run) blocks the trainer, and only up to a
timeout.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from trainer.wire import API_PREFIX, CheckpointMeta, LogLines, MetricsRow, StatusReport

log = logging.getLogger(__name__)

# Retried without limit: the API, a proxy or the database is away or busy for a while.
RETRYABLE_STATUS = frozenset({408, 425, 429, 502, 503, 504})
# Retried a few times, then the unit is given up: the API fails on this request.
SERVER_ERROR_STATUS = frozenset({500})
UPLOAD_CHUNK_BYTES = 1024 * 1024
# One log request stays far below the API's body limit (ROLLOUT_MAX_REQUEST_BODY_BYTES, 8 MiB
# by default), however long the lines; the API keeps at most 10,000 characters of a line.
LOG_BATCH_MAX_BYTES = 1024 * 1024
LOG_LINE_MAX_CHARS = 10_000


class PermanentError(RuntimeError):
    """The API rejected a request for good (4xx other than 408/425/429)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: initial_s, doubled per failure, capped at max_s."""

    initial_s: float = 0.2
    max_s: float = 5.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.initial_s * 2 ** max(0, failures - 1))


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
    permanent_errors: list[str] = field(default_factory=list)


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
        max_server_error_attempts: int = 5,
    ) -> None:
        self.experiment_id = experiment_id
        self._base = f"{API_PREFIX}/jobs/experiments/{experiment_id}"
        self._client = httpx.Client(
            base_url=api_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )
        self._batch_rows = batch_rows
        self._backoff = backoff or Backoff()
        job_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = job_dir / "metrics.jsonl"
        self.metrics_path.touch()
        # Rows left by an earlier attempt of this job are sent again: ingest is idempotent.
        self._written_bytes = self.metrics_path.stat().st_size
        self._sent_bytes = 0
        self._logs: deque[str] = deque(maxlen=max_log_lines)
        self._checkpoints: deque[_PendingCheckpoint] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._abandoned = False
        self._failures = 0
        self._max_server_error_attempts = max_server_error_attempts
        self._failing_unit: tuple[str, object] | None = None
        self._unit_failures = 0
        self.stats = ReporterStats()
        self._thread = threading.Thread(target=self._run, name="rollout-reporter", daemon=True)
        self._thread.start()

    # --- producer side (the training loop) --------------------------------------------------
    def add_metrics(self, step: int, time_s: float, values: dict[str, float]) -> None:
        """Append one iteration's metrics to the local JSONL log and wake the sender."""
        finite = {k: float(v) for k, v in values.items() if _is_finite_number(v)}
        row = MetricsRow(step=step, time_s=max(0.0, time_s), values=finite)
        line = (row.model_dump_json() + "\n").encode()
        with self._cond:
            with self.metrics_path.open("ab") as f:
                f.write(line)
            self._written_bytes += len(line)
            self._cond.notify()

    def add_log(self, line: str) -> None:
        """Queue a progress line for the dashboard's log tail (the oldest drop when full)."""
        line = _storable(line)[:LOG_LINE_MAX_CHARS]
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
    def fetch_spec(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """The experiment's config (and checkpoint to resume from), fetched with the job token."""
        return self._call_with_retries("GET", self._base, timeout_s).json()

    def download(self, url_path: str, dest: Path, timeout_s: float = 120.0) -> Path:
        """Stream a file (e.g. a checkpoint to resume from) from the API to `dest`."""
        deadline = time.monotonic() + timeout_s
        failures = 0
        while True:
            try:
                with self._client.stream("GET", url_path) as response:
                    _raise_for_status(response)
                    with dest.open("wb") as f:
                        for chunk in response.iter_bytes(UPLOAD_CHUNK_BYTES):
                            f.write(chunk)
                return dest
            except (httpx.TransportError, _RetryableError) as exc:
                failures += 1
                if time.monotonic() + self._backoff.delay(failures) > deadline:
                    raise TimeoutError(f"download of {url_path} failed: {exc}") from exc
                time.sleep(self._backoff.delay(failures))

    def report_status(
        self,
        status: str,
        reason: str = "",
        error: str | None = None,
        log_tail: str | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        """Post a lifecycle transition, retrying transient failures up to `timeout_s`."""
        report = StatusReport(
            status=status,  # type: ignore[arg-type]
            reason=_storable(reason)[:2000],
            error=_storable(error)[-20_000:] if error else None,
            log_tail=_storable(log_tail)[-200_000:] if log_tail else None,
        )
        self._call_with_retries(
            "POST", f"{self._base}/status", timeout_s, json=report.model_dump(mode="json")
        )

    def close(self, timeout_s: float = 60.0) -> bool:
        """Flush every queued row, log line and checkpoint; True if all were delivered (False
        also when a unit was given up after repeated 500s: it is still in the job dir)."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout_s)
        with self._cond:
            delivered = not self._thread.is_alive() and not self._has_work()
            delivered = delivered and self.stats.given_up == 0
            self._abandoned = True
        if not delivered:
            log.warning("reporter: API unreachable, undelivered data kept in %s", self.metrics_path)
        return delivered

    def shutdown(self) -> None:
        """Release the HTTP connection (after `close()` and the final status report)."""
        self._client.close()

    # --- the sender thread --------------------------------------------------------------------
    def _has_work(self) -> bool:
        return self._sent_bytes < self._written_bytes or bool(self._logs or self._checkpoints)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._has_work() and not self._closing:
                    self._cond.wait()
                if not self._has_work() or self._abandoned:
                    return  # closing and nothing left, or close() gave up waiting
            unit = self._current_unit()
            try:
                self._send_once()
                self._failures = 0
                self._failing_unit, self._unit_failures = None, 0
            except _ServerError as exc:
                self._on_server_error(unit, exc)
            except (httpx.TransportError, _RetryableError) as exc:
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

    def _current_unit(self) -> tuple[str, object]:
        """What `_send_once` sends next: identifies a unit across its retries."""
        if self._sent_bytes < self._written_bytes:
            return ("metrics", self._sent_bytes)
        with self._cond:
            if self._logs:
                return ("logs", id(self._logs[0]))
            if self._checkpoints:
                return ("checkpoint", id(self._checkpoints[0]))
        return ("nothing", None)

    def _on_server_error(self, unit: tuple[str, object], exc: _ServerError) -> None:
        """Back off and retry; after max_server_error_attempts on one unit, give it up."""
        self.stats.failures += 1
        if unit != self._failing_unit:
            self._failing_unit, self._unit_failures = unit, 0
        self._unit_failures += 1
        if self._unit_failures < self._max_server_error_attempts:
            delay = self._backoff.delay(self._unit_failures)
            log.info("reporter: API error (%s); retrying in %.1fs", exc, delay)
            time.sleep(delay)
            return
        message = f"gave up on {unit[0]} after {self._unit_failures} attempts: {exc}"
        log.error("reporter: %s; it stays in %s", message, self.metrics_path.parent)
        self.stats.given_up += 1
        self.stats.permanent_errors.append(message)
        self._failing_unit, self._unit_failures = None, 0
        self._skip(unit[0])

    def _skip(self, kind: str) -> None:
        """Drop the head unit of `kind` from the queue (its data stays on disk)."""
        if kind == "metrics":
            _, self._sent_bytes = _read_rows(self.metrics_path, self._sent_bytes, self._batch_rows)
        elif kind == "logs":
            with self._cond:
                count = len(_first_lines_within(self._logs, LOG_BATCH_MAX_BYTES))
            self._drop_logs(count)
        elif kind == "checkpoint":
            self._pop_checkpoint()

    def _send_once(self) -> None:
        """Send one unit of work in order: metrics first, then logs, then checkpoints."""
        if self._sent_bytes < self._written_bytes:
            self._send_metrics_batch()
        elif self._logs:
            self._send_logs()
        elif self._checkpoints:
            self._send_checkpoint(self._checkpoints[0])

    def _send_metrics_batch(self) -> None:
        rows, end = _read_rows(self.metrics_path, self._sent_bytes, self._batch_rows)
        if rows:
            body = {"rows": [json.loads(r) for r in rows]}
            try:
                _raise_for_status(self._client.post(f"{self._base}/metrics", json=body))
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
            _raise_for_status(self._client.post(f"{self._base}/logs", json=body))
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
            response = self._client.put(
                f"{self._base}/checkpoints",
                params=params,
                content=_file_chunks(pending.path),
                headers={"Content-Length": str(size), "Content-Type": "application/gzip"},
                timeout=max(60.0, size / 5e6),
            )
            _raise_for_status(response)
        except PermanentError:
            self._pop_checkpoint()  # rejected for good; the archive stays in the job dir
            raise
        self.stats.checkpoints_sent += 1
        self._pop_checkpoint()
        pending.path.unlink(missing_ok=True)

    def _pop_checkpoint(self) -> None:
        with self._cond:
            self._checkpoints.popleft()

    def _call_with_retries(
        self, method: str, url: str, timeout_s: float, **kwargs: Any
    ) -> httpx.Response:
        deadline = time.monotonic() + timeout_s
        failures = 0
        while True:
            try:
                response = self._client.request(method, url, **kwargs)
                _raise_for_status(response)
                return response
            except (httpx.TransportError, _RetryableError) as exc:
                failures += 1
                delay = self._backoff.delay(failures)
                if time.monotonic() + delay > deadline:
                    raise TimeoutError(f"{method} {url} failed for {timeout_s}s: {exc}") from exc
                time.sleep(delay)


class _RetryableError(RuntimeError):
    pass


class _ServerError(_RetryableError):
    """A 500: retried a few times per unit (see the module docstring)."""


def _raise_for_status(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    if response.is_stream_consumed is False:
        response.read()
    message = f"{response.request.method} {response.request.url.path} -> {response.status_code}"
    detail = response.text[:500]
    if response.status_code in RETRYABLE_STATUS:
        raise _RetryableError(f"{message}: {detail}")
    if response.status_code in SERVER_ERROR_STATUS:
        raise _ServerError(f"{message}: {detail}")
    raise PermanentError(f"{message}: {detail}")


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


def _file_chunks(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(UPLOAD_CHUNK_BYTES):
            yield chunk


def _storable(text: str) -> str:
    """The API refuses NUL characters (PostgreSQL cannot store them): make them visible."""
    return text.replace("\x00", "\ufffd")


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


def _is_finite_number(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False
