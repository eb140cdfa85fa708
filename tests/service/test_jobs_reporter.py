"""The job-side reporter against a real, misbehaving HTTP server: nothing lost or doubled."""

from __future__ import annotations

import json
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI, Request, Response

from app.jobs.ray_head import free_ports
from trainer.reporter import Backoff, Reporter
from trainer.wire import CheckpointMeta

EXP = "exp-1"
BASE = f"/api/v1/jobs/experiments/{EXP}"


@dataclass
class FlakyApi:
    """Records what arrives; fails the first `fail_first` requests with 503 before reading them."""

    fail_first: int = 0
    seen: int = 0
    points: Counter[tuple[int, str]] = field(default_factory=Counter)
    logs: list[str] = field(default_factory=list)
    checkpoints: dict[int, bytes] = field(default_factory=dict)
    statuses: list[dict] = field(default_factory=list)
    auth: set[str] = field(default_factory=set)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.middleware("http")
        async def flaky(request: Request, call_next):  # type: ignore[no-untyped-def]
            self.seen += 1
            self.auth.add(request.headers.get("authorization", ""))
            if self.seen <= self.fail_first:
                return Response(status_code=503)
            return await call_next(request)

        @app.post(f"{BASE}/metrics")
        async def metrics(request: Request) -> dict:
            body = await request.json()
            for row in body["rows"]:
                for name in row["values"]:
                    self.points[(row["step"], name)] += 1
            return {"accepted": len(body["rows"])}

        @app.post(f"{BASE}/logs")
        async def logs(request: Request) -> dict:
            self.logs.extend((await request.json())["lines"])
            return {}

        @app.put(f"{BASE}/checkpoints")
        async def checkpoint(request: Request, iteration: int, env_steps: int) -> dict:
            self.checkpoints[iteration] = b"".join([c async for c in request.stream()])
            return {}

        @app.post(f"{BASE}/status")
        async def status(request: Request) -> dict:
            self.statuses.append(await request.json())
            return {}

        return app


class Server:
    def __init__(self, app: FastAPI, port: int) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "test server did not start"
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def port() -> int:
    return free_ports(1)[0]


@pytest.fixture
def started() -> Iterator[list[Server]]:
    servers: list[Server] = []
    yield servers
    for s in servers:
        s.stop()


def make_reporter(port: int, job_dir: Path, **kw) -> Reporter:  # type: ignore[no-untyped-def]
    return Reporter(
        f"http://127.0.0.1:{port}",
        "job-token",
        EXP,
        job_dir,
        backoff=Backoff(initial_s=0.02, max_s=0.2),
        timeout_s=5,
        **kw,
    )


def add_rows(reporter: Reporter, count: int) -> None:
    for i in range(count):
        reporter.add_metrics(step=(i + 1) * 100, time_s=i * 0.1, values={"a": i, "b": -i})


def test_failed_requests_are_retried_without_duplicates(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    api = FlakyApi(fail_first=5)
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path, batch_rows=7)
    add_rows(reporter, 50)
    for i in range(5):
        reporter.add_log(f"line {i}")
    assert reporter.close(timeout_s=30)

    assert api.seen > 5
    assert set(api.points) == {((i + 1) * 100, n) for i in range(50) for n in ("a", "b")}
    assert max(api.points.values()) == 1  # each point accepted exactly once
    assert api.logs == [f"line {i}" for i in range(5)]
    assert api.auth == {"Bearer job-token"}
    assert reporter.stats.failures >= 5


def test_api_down_at_first_then_everything_arrives(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    reporter = make_reporter(port, tmp_path, batch_rows=10)
    add_rows(reporter, 30)
    archive = tmp_path / "ckpt.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(__file__, arcname="x.py")
    payload = archive.read_bytes()
    reporter.add_checkpoint(archive, CheckpointMeta(iteration=3, env_steps=300))
    time.sleep(0.5)  # the sender is backing off against a closed port
    assert reporter.stats.failures >= 1

    api = FlakyApi()
    started.append(Server(api.app(), port).start())
    add_rows_after = 5
    for i in range(add_rows_after):
        reporter.add_metrics(step=10_000 + i, time_s=10.0, values={"a": 1.0})
    assert reporter.close(timeout_s=30)

    assert len(api.points) == 30 * 2 + add_rows_after
    assert max(api.points.values()) == 1
    assert api.checkpoints == {3: payload}
    assert not archive.exists()  # removed after the upload
    # The local JSONL copy holds every row, in order.
    rows = [json.loads(x) for x in reporter.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in rows][:3] == [100, 200, 300]
    assert len(rows) == 35


def test_non_finite_values_are_dropped_and_status_is_retried(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    api = FlakyApi(fail_first=2)
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path)
    reporter.report_status("running", reason="started", timeout_s=10)
    reporter.add_metrics(step=1, time_s=0.0, values={"ok": 1.0, "nan": float("nan")})
    assert reporter.close(timeout_s=10)
    assert api.statuses[0]["status"] == "running"
    assert set(api.points) == {(1, "ok")}


@pytest.mark.timing
def test_close_gives_up_after_its_timeout_and_keeps_the_local_copy(
    port: int, tmp_path: Path
) -> None:
    reporter = make_reporter(port, tmp_path)
    add_rows(reporter, 3)
    t0 = time.monotonic()
    assert not reporter.close(timeout_s=0.5)
    assert time.monotonic() - t0 < 3
    assert len(reporter.metrics_path.read_text().splitlines()) == 3


def test_nul_and_huge_log_lines_reach_the_real_api(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """The API refuses NUL and bodies over 8 MiB; the reporter sends what it can store."""
    from app.core.config import Settings
    from app.core.db import transaction
    from app.experiments import service as experiments
    from app.main import create_app

    settings = Settings(
        data_dir=tmp_path / "data", jobs_enabled=False, frontend_dir=tmp_path / "none", port=port
    )
    app = create_app(settings)
    started.append(Server(app, port).start())
    with transaction(app.state.sessionmaker) as session:
        exp = experiments.create(session, experiments.ExperimentCreate(name="logs"))
        exp_id, token = exp.id, experiments.issue_job_token(session, exp.id)
    reporter = Reporter(
        f"http://127.0.0.1:{port}", token, str(exp_id), tmp_path / "job",
        backoff=Backoff(initial_s=0.02, max_s=0.2), max_log_lines=2000,
    )  # fmt: skip
    reporter.add_log("a\x00b")
    for i in range(1500):  # 1500 x 20k characters: 30 MB, several times the body limit
        reporter.add_log(f"{i:05d}" + "x" * 20_000)
    assert reporter.close(timeout_s=120)  # everything first: the end revokes the token
    reporter.report_status("failed", reason="r\x00", error="e\x00", log_tail="t\x00")
    reporter.shutdown()
    assert reporter.stats.permanent_errors == []
    with transaction(app.state.sessionmaker) as session:
        lines = experiments.tail_logs(session, exp_id, 2000)
        stored = experiments.get(session, exp_id)
        assert (stored.status.value, stored.error, stored.log_tail) == (
            "failed",
            "e\ufffd",
            "t\ufffd",
        )
    assert lines[0] == "a\ufffdb"
    assert [line[:5] for line in lines[1:]] == [f"{i:05d}" for i in range(1500)]
    assert all(len(line) == 10_000 for line in lines[1:])


@pytest.mark.timing
def test_a_batch_the_api_always_fails_is_given_up_and_the_rest_goes_out(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """A 500 on one batch is retried a few times, then skipped (kept in the JSONL copy): the
    rows after it, the final checkpoint and the status still reach the API."""
    api = FlakyApi()
    app = api.app()
    poisoned_calls = Counter[str]()

    @app.middleware("http")
    async def poison(request: Request, call_next):  # type: ignore[no-untyped-def]
        if request.url.path.endswith("/metrics"):
            body = await request.body()
            if any(row["step"] == 300 for row in json.loads(body)["rows"]):
                poisoned_calls["metrics"] += 1
                return Response(status_code=500, content=b'{"error": {}}')
        return await call_next(request)

    started.append(Server(app, port).start())
    reporter = make_reporter(port, tmp_path / "job", batch_rows=1, max_server_error_attempts=4)
    add_rows(reporter, 5)  # steps 100..500
    archive = tmp_path / "final.tar.gz"
    archive.write_bytes(b"final checkpoint")
    reporter.add_checkpoint(archive, CheckpointMeta(iteration=5, env_steps=500))
    t0 = time.monotonic()
    assert not reporter.close(timeout_s=30)  # not everything was delivered...
    assert time.monotonic() - t0 < 10  # ...but close did not wait for its timeout
    reporter.report_status("succeeded", reason="done", timeout_s=10)
    reporter.shutdown()
    assert poisoned_calls["metrics"] == 4
    assert {step for step, _ in api.points} == {100, 200, 400, 500}
    assert api.checkpoints == {5: b"final checkpoint"}
    assert [s["status"] for s in api.statuses] == ["succeeded"]
    assert (
        reporter.stats.given_up == 1 and "gave up on metrics" in reporter.stats.permanent_errors[0]
    )
    kept = [json.loads(line)["step"] for line in reporter.metrics_path.read_text().splitlines()]
    assert kept == [100, 200, 300, 400, 500]  # the local copy keeps the skipped row


def test_a_failing_batch_is_given_up_while_log_lines_go_out_between_its_attempts(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """Paced metrics let log requests through between a failing batch's retries; the batch still
    counts its own attempts and is given up after max_server_error_attempts, while training
    goes on (not at close)."""
    api = FlakyApi()
    app = api.app()
    poisoned_calls = Counter[str]()

    @app.middleware("http")
    async def poison(request: Request, call_next):  # type: ignore[no-untyped-def]
        path = request.url.path
        if path.endswith("/metrics") and any(
            row["step"] == 300 for row in json.loads(await request.body())["rows"]
        ):
            poisoned_calls["metrics"] += 1
            return Response(status_code=500, content=b'{"error": {}}')
        return await call_next(request)

    started.append(Server(app, port).start())
    reporter = make_reporter(
        port, tmp_path / "job", batch_rows=1, max_server_error_attempts=4, send_every_s=0.05
    )
    add_rows(reporter, 5)  # steps 100..500
    deadline = time.monotonic() + 20
    i = 0
    while reporter.stats.given_up == 0:
        assert time.monotonic() < deadline, f"not given up: {poisoned_calls}, {len(api.logs)} lines"
        reporter.add_log(f"line {i}")
        i += 1
        time.sleep(0.01)
    assert poisoned_calls["metrics"] == 4 and api.logs  # lines went out meanwhile
    assert reporter.close(timeout_s=30) is False  # the given-up batch is undelivered
    assert {step for step, _ in api.points} == {100, 200, 400, 500}
    assert api.logs == [f"line {k}" for k in range(i)]


def test_503s_are_retried_for_as_long_as_they_last(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """Unavailable (the database is down) is not given up, unlike a 500."""
    api = FlakyApi(fail_first=12)
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path, max_server_error_attempts=2)
    add_rows(reporter, 3)
    assert reporter.close(timeout_s=30)
    assert reporter.stats.given_up == 0 and reporter.stats.failures >= 12
    assert set(api.points) == {(s, n) for s in (100, 200, 300) for n in ("a", "b")}


FAST_ITERATIONS = 150
PACE_S = 0.5


def iterate_fast(reporter: Reporter) -> float:
    """A run of an iteration every 10 ms (a row and a log line each); its length in seconds."""
    t0 = time.monotonic()
    for i in range(FAST_ITERATIONS):
        reporter.add_metrics(step=(i + 1) * 100, time_s=i * 0.01, values={"a": i})
        reporter.add_log(f"iter {i}")
        time.sleep(max(0.0, t0 + (i + 1) * 0.01 - time.monotonic()))
    return time.monotonic() - t0


def requests_when_paced(seconds: float) -> int:
    """The most requests a run of `seconds` paced at PACE_S may send: per kind (metrics,
    logs) the first at once, one per period, then close's."""
    return 2 * (int(seconds / PACE_S) + 2)


def test_a_fast_run_sends_a_few_requests_a_second(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """At most one request of each kind every send_every_s, every row and line once, in
    order."""
    api = FlakyApi()
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path, send_every_s=PACE_S)
    elapsed = iterate_fast(reporter)
    assert reporter.close(timeout_s=30)
    assert api.seen <= requests_when_paced(elapsed), f"{api.seen} in {elapsed:.2f} s"
    assert set(api.points) == {((i + 1) * 100, "a") for i in range(FAST_ITERATIONS)}
    assert max(api.points.values()) == 1
    assert api.logs == [f"iter {i}" for i in range(FAST_ITERATIONS)]


def test_without_pacing_every_iteration_is_a_request_of_its_own(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    """The control for the test above: the same run with send_every_s=0 sends far more often,
    so the bound there is the pacing's doing."""
    api = FlakyApi()
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path, send_every_s=0)
    elapsed = iterate_fast(reporter)
    assert reporter.close(timeout_s=30)
    assert api.seen > requests_when_paced(elapsed)


def test_close_sends_what_is_left_without_waiting_for_its_turn(
    port: int, started: list[Server], tmp_path: Path
) -> None:
    api = FlakyApi()
    started.append(Server(api.app(), port).start())
    reporter = make_reporter(port, tmp_path, send_every_s=60)
    add_rows(reporter, 1)
    reporter.add_log("first")
    deadline = time.monotonic() + 10
    while len(api.points) < 2 or not api.logs:  # the first request of each kind: at once
        assert time.monotonic() < deadline, (api.points, api.logs)
        time.sleep(0.01)
    reporter.add_metrics(step=200, time_s=0.1, values={"a": 1})  # its turn: in a minute
    reporter.add_log("second")
    closing = time.monotonic()
    assert reporter.close(timeout_s=30)
    assert time.monotonic() - closing < 10
    assert {step for step, _ in api.points} == {100, 200}
    assert api.logs == ["first", "second"]
