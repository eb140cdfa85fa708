"""The record of the service's local Ray head: what a restarted service adopts, stops or refuses.

A recorded pid is signalled only once it is proven to be that very head: a pid reused by an
unrelated process is left alone. The end-to-end adoption after a SIGKILL of the API is in
test_api_crash.py.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.db import make_engine, make_sessionmaker, migrate, transaction
from app.experiments import service
from app.experiments.schemas import ExperimentCreate
from app.jobs import head_state
from app.jobs.head_state import HeadRecord
from app.jobs.ray_head import (
    LocalRayHead,
    alive,
    apply_ray_env,
    descendants,
    kill_if_alive,
    proc_start_time,
)
from app.jobs.runtime import JobsRuntime
from tests.service.test_e2e_jobs import QUICK


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process in a session of its own (as a reused pid would be)."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def _record(pid: int, started: int, temp_dir: Path, owner: tuple[int, int]) -> HeadRecord:
    return HeadRecord(
        pid=pid,
        started=started,
        boot_id=head_state.boot_id(),
        address="127.0.0.1:1",
        dashboard_url="http://127.0.0.1:1",
        temp_dir=str(temp_dir),
        owned_temp=False,
        owner_pid=owner[0],
        owner_started=owner[1],
    )


def test_a_reused_pid_is_not_taken_for_the_head(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    started = proc_start_time(stranger.pid)
    assert started is not None
    record = _record(stranger.pid, started, tmp_path / "ray", owner=(1, 1))
    assert not head_state.is_that_head(record)  # alive, same start time, but not `ray start`
    assert head_state.leftovers(record) == {}  # its process group does not name our temp dir
    stale = _record(stranger.pid, started - 1, tmp_path / "ray", owner=(1, 1))
    assert not head_state.is_that_head(stale)
    other_boot = HeadRecord(**{**record.__dict__, "boot_id": "another-boot"})
    assert not head_state.is_that_head(other_boot)


def test_a_record_round_trips_and_a_broken_one_is_ignored(tmp_path: Path) -> None:
    record = _record(123, 456, tmp_path / "ray", owner=(7, 8))
    head_state.save(tmp_path, record)
    assert head_state.load(tmp_path) == record
    head_state.path_for(tmp_path).write_text("{not json")
    assert head_state.load(tmp_path) is None
    head_state.clear(tmp_path)
    assert head_state.load(tmp_path) is None


def _runtime_on(tmp_path: Path) -> tuple[JobsRuntime, Settings, int]:
    """A jobs runtime on a fresh SQLite file holding one experiment marked running."""
    apply_ray_env()
    settings = Settings(data_dir=tmp_path / "data", ray_address=None)
    settings.data_dir.mkdir()
    engine = make_engine(f"sqlite:///{tmp_path / 'r.db'}")
    migrate(engine)
    sessionmaker = make_sessionmaker(engine)
    with transaction(sessionmaker) as session:
        exp = service.create(session, ExperimentCreate(name="was running", config=QUICK))
        for to in ("queued", "running"):
            service.transition(session, exp.id, to, "before the crash")
        exp.ray_job_id = "rollout-exp1-gone"
        exp_id = exp.id
    return JobsRuntime(settings, sessionmaker, None), settings, exp_id


def test_another_live_service_on_the_data_dir_is_refused(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    runtime, settings, exp_id = _runtime_on(tmp_path)
    owner = (stranger.pid, proc_start_time(stranger.pid) or 0)
    head_state.save(settings.data_dir, _record(stranger.pid, owner[1], tmp_path / "x", owner))
    with pytest.raises(RuntimeError, match=f"another `rollout serve` \\(pid {stranger.pid}\\)"):
        asyncio.run(runtime.start())
    assert alive({stranger.pid: owner[1]})  # never signalled
    assert head_state.load(settings.data_dir) is not None  # still that service's record
    with transaction(runtime.sessionmaker) as session:
        assert service.get(session, exp_id).status == "running"


@pytest.mark.ray
def test_a_head_gone_with_the_old_service_fails_its_experiments_at_once(tmp_path: Path) -> None:
    runtime, settings, exp_id = _runtime_on(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait(timeout=10)
    head_state.save(settings.data_dir, _record(gone.pid, 1, tmp_path / "old-ray", (gone.pid, 1)))

    async def scenario() -> HeadRecord | None:
        await runtime.start()
        try:
            return head_state.load(settings.data_dir)
        finally:
            await runtime.stop()

    fresh = asyncio.run(scenario())
    assert fresh is not None and fresh.pid != gone.pid and fresh.owner_pid == os.getpid()
    assert head_state.load(settings.data_dir) is None  # removed on a clean stop
    with transaction(runtime.sessionmaker) as session:
        exp = service.get(session, exp_id)
        # Failed at start-up, not after the reconciler's grace period, and saying why.
        assert exp.status == "failed"
        assert "ended while the service was down" in (exp.error or "")


@pytest.mark.ray
def test_a_head_that_no_longer_answers_is_stopped_before_its_experiments_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.jobs.runtime.ADOPT_TIMEOUT_S", 1.0)
    runtime, settings, exp_id = _runtime_on(tmp_path)
    temp_dir = tmp_path / "hung-ray"
    # Looks like our head to every check (command line, pid, start time) but never answers.
    # The interpreter itself, not a launcher that execs it: while a process is between two
    # execs its command line reads empty, and the check would rightly say "not that head".
    hung = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)",
         "start", "--head", f"--temp-dir={temp_dir}"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    try:
        assert hung.stdout is not None
        ready, _, _ = select.select([hung.stdout], [], [], 30)
        assert ready and hung.stdout.readline() == b"up\n"  # past every exec, in its own code
        started = proc_start_time(hung.pid) or 0
        head_state.save(settings.data_dir, _record(hung.pid, started, temp_dir, (hung.pid, 0)))

        async def scenario() -> None:
            await runtime.start()
            await runtime.stop()

        asyncio.run(scenario())
        assert hung.wait(timeout=10) is not None  # stopped by its pid
        with transaction(runtime.sessionmaker) as session:
            exp = service.get(session, exp_id)
            assert exp.status == "failed"
            assert "did not answer after the service restarted" in (exp.error or "")
    finally:
        hung.kill()
        hung.wait(timeout=10)
        hung.stdout.close()


@pytest.mark.ray
def test_what_a_head_whose_leader_died_left_behind_is_found(tmp_path: Path) -> None:
    apply_ray_env()
    head = LocalRayHead(num_cpus=1).start()
    assert head.pid is not None
    try:
        daemons = descendants(head.pid)
        record = HeadRecord(
            **{
                **_record(head.pid, head.started, Path(str(head.temp_dir)), (0, 0)).__dict__,
                "daemons": {str(pid): started for pid, started in daemons.items()},
            }
        )
        os.kill(head.pid, signal.SIGKILL)  # the leader only: its daemons run on
        assert head.process is not None
        head.process.wait(timeout=10)
        assert alive(daemons), "Ray's daemons outlive a killed `ray start`"
        left = head_state.leftovers(record)
        assert set(alive(daemons)) <= set(left)
        kill_if_alive(left)
        assert alive(daemons) == []
    finally:
        head.stop()
        kill_if_alive(daemons)


def test_rollout_serve_on_a_data_dir_in_use_says_so(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    owner = (stranger.pid, proc_start_time(stranger.pid) or 0)
    head_state.save(data_dir, _record(stranger.pid, owner[1], tmp_path / "x", owner))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "ROLLOUT_RAY_ADDRESS")}
    result = subprocess.run(
        [sys.executable, "-m", "app.cli", "serve", "--port", "0", "--data-dir", str(data_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"another `rollout serve` (pid {stranger.pid})" in result.stderr
    assert "Traceback" not in result.stderr
    assert alive({stranger.pid: owner[1]})
