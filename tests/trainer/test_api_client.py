"""The one job-side API client: how each reply is classified and retried, and the shared
entrypoint pieces (job dir, NUL escaping, failure report)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from trainer.api_client import (
    Backoff,
    Failure,
    JobApiClient,
    PermanentError,
    ServerError,
    storable,
    usable_job_dir,
)


def _client(statuses: list[int], seen: list[httpx.Request], **kw: object) -> JobApiClient:
    """A client whose server answers `statuses` in turn, then 200 {"ok": true}."""

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if len(seen) <= len(statuses):
            status = statuses[len(seen) - 1]
            return httpx.Response(status, json={"error": {"message": f"no ({status})"}})
        return httpx.Response(200, json={"ok": True})

    return JobApiClient.for_job(
        "http://api",
        "tok",
        "experiments",
        7,
        backoff=Backoff(initial_s=0.001, max_s=0.002),
        transport=httpx.MockTransport(handle),
        **kw,  # type: ignore[arg-type]
    )


def test_transient_statuses_and_network_errors_are_retried_until_they_pass() -> None:
    seen: list[httpx.Request] = []
    api = _client([503, 429, 502, 504, 408, 425] * 3, seen)
    assert api.call("POST", "/status", json={}).json() == {"ok": True}
    assert len(seen) == 19
    assert seen[0].url.path == "/api/v1/jobs/experiments/7/status"
    assert seen[0].headers["authorization"] == "Bearer tok"


def test_a_transient_failure_past_the_deadline_is_a_timeout() -> None:
    seen: list[httpx.Request] = []
    api = _client([503] * 10_000, seen)
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="did not answer for 0s"):
        api.call("GET", timeout_s=0.2)
    assert time.monotonic() - t0 < 2 and len(seen) > 3


def test_a_500_is_retried_a_few_times_then_given_up() -> None:
    seen: list[httpx.Request] = []
    api = _client([500] * 100, seen, max_server_error_attempts=3)
    with pytest.raises(ServerError, match=r"-> 500: no \(500\)") as info:
        api.call("POST", "/metrics", timeout_s=60)
    assert info.value.status == 500 and len(seen) == 3
    seen.clear()
    assert _client([500, 500], seen, max_server_error_attempts=3).call("GET").status_code == 200


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 413, 422, 507])
def test_other_client_errors_are_permanent_and_never_retried(status: int) -> None:
    seen: list[httpx.Request] = []
    with pytest.raises(PermanentError, match=f"-> {status}: no") as info:
        _client([status], seen).call("PUT", "/checkpoints")
    assert info.value.status == status and len(seen) == 1


def test_download_streams_to_a_file_after_retries(tmp_path: Path) -> None:
    calls = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, content=b"x" * 3_000_000)

    api = JobApiClient.for_job(
        "http://api/",
        "t",
        "evaluations",
        3,
        backoff=Backoff(0.001, 0.002),
        transport=httpx.MockTransport(handle),
    )
    dest = api.download("/checkpoint", tmp_path / "c.tar.gz")
    assert dest.stat().st_size == 3_000_000
    assert calls == ["/api/v1/jobs/evaluations/3/checkpoint"] * 3
    api.download("/api/v1/jobs/experiments/9/resume_checkpoint", tmp_path / "r")
    assert calls[-1] == "/api/v1/jobs/experiments/9/resume_checkpoint"


def test_usable_job_dir_and_storable_text(tmp_path: Path) -> None:
    assert usable_job_dir(str(tmp_path / "a" / "b"), "p-") == tmp_path / "a" / "b"
    blocker = tmp_path / "file"
    blocker.write_text("")
    fallback = usable_job_dir(str(blocker / "x"), "rollout-job-5-")
    assert fallback.is_dir() and fallback.name.startswith("rollout-job-5-")
    fallback.rmdir()
    assert storable("a\x00b") == "a\ufffdb"


def test_a_failure_report_is_storable_and_bounded() -> None:
    try:
        raise ValueError("bad\x00value " + "y" * 30_000)
    except ValueError as exc:
        failure = Failure.of(exc)
    assert "\x00" not in failure.error and len(failure.error) == 20_000
    assert failure.error.endswith("y") and "\x00" not in failure.log_tail
    assert "Traceback" in failure.log_tail and "test_a_failure_report" in failure.log_tail
