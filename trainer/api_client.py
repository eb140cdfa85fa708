"""The job side of the job <-> API contract, written once: one HTTP client, one retry policy,
one set of retryable statuses, one token handling, one way to make text storable.

Every job (an experiment's trainer.job, an evaluation's trainer.evaluation_job) talks to its
own resource under /api/v1/jobs/{kind}/{id} with its own bearer token (trainer/job_token.py
redeems it). A reply is classified once, by `check`:

    2xx/3xx                          -> ok
    408 425 429 502 503 504, network -> TransientError: the API, a proxy or the database is away
                                        or busy; retried with backoff for as long as it lasts
                                        (up to the caller's deadline)
    500                              -> ServerError: the API failed on THIS request (a bug, a
                                        row it cannot store). Retried `max_server_error_attempts`
                                        times, then given up: waiting longer does not mend it,
                                        and for the reporter one unit it can never take must
                                        not hold back everything queued behind it.
    other 4xx                        -> PermanentError: refused for good (bad request, token
                                        revoked, 507 storage full); never retried

Each error carries the service's error message (its JSON envelope), not the raw body.
"""

from __future__ import annotations

import importlib
import logging
import os
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from trainer.process_guard import lower_job_priority, make_undumpable
from trainer.wire import API_PREFIX

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 425, 429, 502, 503, 504})
SERVER_ERROR_STATUS = frozenset({500})
MAX_SERVER_ERROR_ATTEMPTS = 5
CHUNK_BYTES = 1024 * 1024
LOG_TAIL_LINES = 100
T = TypeVar("T")


class ApiError(RuntimeError):
    """A reply the job could not use; `status` is its HTTP status (None: no reply)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class TransientError(ApiError):
    """408/425/429/502/503/504: retried for as long as it lasts."""


class ServerError(ApiError):
    """500: retried `max_server_error_attempts` times, then given up."""


class PermanentError(ApiError):
    """Any other 4xx: refused for good."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: initial_s, doubled per failure, capped at max_s."""

    initial_s: float = 0.2
    max_s: float = 5.0

    def delay(self, failures: int) -> float:
        return min(self.max_s, self.initial_s * 2 ** max(0, failures - 1))


def check(response: httpx.Response) -> httpx.Response:
    """Raise the classified error for a failed reply (see the module docstring)."""
    if response.status_code < 400:
        return response
    if not response.is_stream_consumed:
        response.read()
    try:
        text = str(response.json()["error"]["message"])  # the service's error envelope
    except (ValueError, KeyError, TypeError):
        text = response.text[:500]
    status = response.status_code
    message = f"{response.request.method} {response.request.url.path} -> {status}: {text}"
    if status in RETRYABLE_STATUS:
        raise TransientError(message, status)
    if status in SERVER_ERROR_STATUS:
        raise ServerError(message, status)
    raise PermanentError(message, status)


class JobApiClient:
    """One job's HTTP client for the routes under `base` (e.g. /api/v1/jobs/experiments/7),
    with the job's bearer token and the retry policy above.

    `send` makes one attempt (and classifies the reply); `call` retries it until a deadline;
    the reporter's sender thread uses `send` with its own queue-aware loop."""

    def __init__(
        self,
        api_url: str,
        token: str,
        base: str,
        *,
        timeout_s: float = 30.0,
        backoff: Backoff | None = None,
        transport: httpx.BaseTransport | None = None,
        max_server_error_attempts: int = MAX_SERVER_ERROR_ATTEMPTS,
    ) -> None:
        self.base = base
        self.backoff = backoff or Backoff()
        self.max_server_error_attempts = max_server_error_attempts
        self.http = httpx.Client(
            base_url=api_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
            transport=transport,
        )

    @classmethod
    def for_job(
        cls, api_url: str, token: str, kind: str, job_id: object, **kw: Any
    ) -> JobApiClient:
        """The client of /api/v1/jobs/{kind}/{job_id} ("experiments", "evaluations")."""
        return cls(api_url, token, f"{API_PREFIX}/jobs/{kind}/{job_id}", **kw)

    def send(self, method: str, path: str = "", **kwargs: Any) -> httpx.Response:
        """One attempt at `base + path`; raises httpx.TransportError or an ApiError."""
        return check(self.http.request(method, self.base + path, **kwargs))

    def call(
        self, method: str, path: str = "", *, timeout_s: float = 60.0, **kwargs: Any
    ) -> httpx.Response:
        """`send`, retried by the policy until `timeout_s` (then TimeoutError)."""
        return self.retry(lambda: self.send(method, path, **kwargs), timeout_s, f"{method} {path}")

    def retry(self, attempt: Callable[[], T], timeout_s: float, what: str = "the call") -> T:
        """Run `attempt` until it succeeds: transient failures until the deadline (then
        TimeoutError), a ServerError up to max_server_error_attempts times (then re-raised),
        a PermanentError at once."""
        deadline = time.monotonic() + timeout_s
        failures = server_errors = 0
        while True:
            try:
                return attempt()
            except ServerError as exc:
                server_errors += 1
                if server_errors >= self.max_server_error_attempts:
                    raise
                exc_text = str(exc)
            except (httpx.TransportError, TransientError) as exc:
                exc_text = f"{type(exc).__name__}: {exc}"
            failures += 1
            delay = self.backoff.delay(failures)
            if time.monotonic() + delay > deadline:
                raise TimeoutError(
                    f"{what}: the API did not answer for {timeout_s:.0f}s ({exc_text})"
                )
            log.info("%s failed (%s); retrying in %.1fs", what, exc_text, delay)
            time.sleep(delay)

    def download(self, path: str, dest: Path, *, timeout_s: float = 120.0) -> Path:
        """Stream `base + path` (an absolute /api/... path is taken as is) into `dest`."""
        url = path if path.startswith("/api/") else self.base + path

        def attempt() -> Path:
            with self.http.stream("GET", url) as response:
                check(response)
                with dest.open("wb") as f:
                    for chunk in response.iter_bytes(CHUNK_BYTES):
                        f.write(chunk)
            return dest

        return self.retry(attempt, timeout_s, f"download of {url}")

    def close(self) -> None:
        self.http.close()


def file_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(chunk_bytes):
            yield chunk


def storable(text: str) -> str:
    """The API refuses NUL characters (PostgreSQL cannot store them): make them visible."""
    return text.replace("\x00", "\ufffd")


# --- the pieces every job entrypoint shares --------------------------------------------------
def usable_job_dir(wanted: str | None, prefix: str) -> Path:
    """The launcher's job dir if this node can write there, else a private temp dir
    (`prefix` names it, e.g. "rollout-job-7-")."""
    if wanted:
        try:
            path = Path(wanted)
            path.mkdir(parents=True, exist_ok=True)
            if os.access(path, os.W_OK):
                return path
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix=prefix))


def job_preamble(preload: str) -> None:
    """A job's first lines: non-dumpable before it redeems its token (another job of the same
    OS user cannot read its memory, trainer/process_guard.py), logging, and `preload` (torch +
    gymnasium take seconds) imported in the background while the first API calls are in
    flight. The driver runs at the job's CPU priority, its session too (process_guard)."""
    make_undumpable()
    lower_job_priority()
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    thread = threading.Thread(target=importlib.import_module, args=(preload,), daemon=True)
    thread.start()


@dataclass(frozen=True)
class Failure:
    """What a job reports when it raised: the error line and its traceback tail, storable and
    within the API's limits."""

    error: str
    log_tail: str

    @classmethod
    def of(cls, exc: BaseException, what: str = "job") -> Failure:
        tail = "".join(traceback.format_exception(exc)).splitlines()[-LOG_TAIL_LINES:]
        log.error("%s failed:\n%s", what, "\n".join(tail))
        return cls(
            error=storable(f"{type(exc).__name__}: {exc}")[-20_000:],
            log_tail=storable("\n".join(tail))[-200_000:],
        )
