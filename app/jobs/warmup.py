"""Warm a freshly started local Ray head up with one no-op job (trainer/warmup.py).

A new head's first job reaches its first metric several seconds later than the ones after it:
Ray's job and runtime-env agents serve their first request, and its driver reads torch and
gymnasium from a cold page cache. So that a user's first experiment does not pay for that, the
service submits one job that does all of it and trains a tiny CartPole iteration, in the
background, as soon as the head answers, so start-up itself is not slowed.
It takes no CPU of the queue's budget; a slow or failed warm-up only costs the first
experiment what it cost before. It is stopped with the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time

from app.jobs.launcher import RayJobLauncher, RayJobState, RayUnavailable

log = logging.getLogger(__name__)

WARMUP_MODULE = "trainer.warmup"
TIMEOUT_S = 300.0
POLL_S = 0.5


class HeadWarmup:
    """One warm-up job and its state: pending, running, succeeded, failed, stopped."""

    def __init__(self, launcher: RayJobLauncher) -> None:
        self.launcher = launcher
        self.submission_id = f"rollout-warmup-{secrets.token_hex(4)}"
        self.state = "pending"
        self.seconds: float | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="rollout-ray-warmup")

    async def _run(self) -> None:
        t0 = time.monotonic()
        try:
            await self.launcher.submit_module(self.submission_id, WARMUP_MODULE)
            self.state = "running"
            deadline = t0 + TIMEOUT_S
            while True:
                job = await self.launcher.job(self.submission_id)
                if job.state.is_terminal:
                    self.state = "succeeded" if job.state == RayJobState.SUCCEEDED else "failed"
                    if self.state == "failed":
                        log.warning("the Ray warm-up job failed: %s", job.message)
                    break
                if time.monotonic() > deadline:
                    self.state = "failed"
                    log.warning("the Ray warm-up job did not end in %.0fs", TIMEOUT_S)
                    await self.launcher.stop(self.submission_id)
                    break
                await asyncio.sleep(POLL_S)
        except RayUnavailable as exc:
            self.state = "failed"
            log.warning("the Ray warm-up job could not run: %s", exc)
        self.seconds = time.monotonic() - t0
        log.info("Ray warm-up %s in %.1fs", self.state, self.seconds)

    async def stop(self) -> None:
        """Cancel the watcher and stop the job if it still runs (before the head goes)."""
        if self._task is None:
            return
        running = not self._task.done()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if running and self.state in ("pending", "running"):
            self.state = "stopped"
            with contextlib.suppress(RayUnavailable):
                await self.launcher.stop(self.submission_id)

    def as_dict(self) -> dict[str, object]:
        return {"state": self.state, "seconds": self.seconds, "ray_job_id": self.submission_id}
