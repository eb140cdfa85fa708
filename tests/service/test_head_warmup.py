"""The warm-up job a freshly started local head runs in the background (app/jobs/warmup.py):
it runs the trainer for real and ends by itself, and a service stopping meanwhile stops it
cleanly. Its effect on the first experiment's start is measured in docs/benchmarks.md."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.jobs.launcher import RayJobLauncher, RayJobState
from app.jobs.ray_head import LocalRayHead, alive, descendants
from app.jobs.warmup import HeadWarmup

pytestmark = pytest.mark.ray


def _warmup_processes(head: LocalRayHead, submission_id: str) -> dict[int, int]:
    """The warm-up job's driver (and the shell Ray wraps it in), found by its command line."""
    assert head.pid is not None
    found = {}
    for pid, started in descendants(head.pid).items():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"trainer.warmup" in b" ".join(argv):
            found[pid] = started
    return found


async def _until(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


def test_the_warmup_job_trains_once_and_ends(ray_head: LocalRayHead) -> None:
    async def scenario() -> tuple[HeadWarmup, str]:
        launcher = RayJobLauncher(ray_head.dashboard_url, stop_grace_s=5)
        await launcher.connect()
        warmup = HeadWarmup(launcher)
        try:
            warmup.start()

            async def ended() -> bool:
                return warmup.state not in ("pending", "running")

            await _until(ended, 240, "the warm-up job to end")
            return warmup, await launcher.log_tail(warmup.submission_id)
        finally:
            await warmup.stop()
            await launcher.close()

    warmup, log = asyncio.run(scenario())
    assert warmup.state == "succeeded", log
    assert warmup.seconds is not None and warmup.seconds > 0
    assert "warm-up done" in log
    assert warmup.as_dict()["ray_job_id"] == warmup.submission_id


def test_a_service_stopping_during_the_warmup_stops_it(ray_head: LocalRayHead) -> None:
    async def scenario() -> tuple[HeadWarmup, RayJobState, dict[int, int]]:
        launcher = RayJobLauncher(ray_head.dashboard_url, stop_grace_s=5)
        await launcher.connect()
        warmup = HeadWarmup(launcher)
        try:
            warmup.start()

            async def driver_started() -> bool:
                return bool(_warmup_processes(ray_head, warmup.submission_id))

            await _until(driver_started, 120, "the warm-up driver to start")
            processes = _warmup_processes(ray_head, warmup.submission_id)
            await warmup.stop()

            async def ended() -> bool:
                return (await launcher.job(warmup.submission_id)).state.is_terminal

            await _until(ended, 60, "the warm-up job to end")
            return warmup, (await launcher.job(warmup.submission_id)).state, processes
        finally:
            await warmup.stop()
            await launcher.close()

    warmup, state, processes = asyncio.run(scenario())
    # Stopped before it could finish, unless it finished in the instant before the stop.
    assert (warmup.state, state) in (
        ("stopped", RayJobState.STOPPED),
        ("succeeded", RayJobState.SUCCEEDED),
    )
    deadline = time.monotonic() + 30
    while alive(processes):
        assert time.monotonic() < deadline, f"warm-up processes left: {alive(processes)}"
        time.sleep(0.2)
