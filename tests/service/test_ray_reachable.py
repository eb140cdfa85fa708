"""/health's view of Ray (RayJobLauncher.reachable) never waits for a fresh answer: the last one
serves while younger than REACHABLE_STALE_S, one background check at a time refreshes it after
REACHABLE_REFRESH_S, and a cluster that stops answering shows once the answer went stale."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.jobs import launcher as launcher_module
from app.jobs.launcher import RayJobLauncher


class Dashboard:
    """A stand-in for Ray's dashboard: counts /api/version calls, answers after `delay_s`."""

    def __init__(self) -> None:
        self.calls = 0
        self.up = True
        self.delay_s = 0.0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        return httpx.Response(200 if self.up else 503, json={"version": "x"})


def test_health_reads_the_last_answer_and_refreshes_it_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(launcher_module, "REACHABLE_REFRESH_S", 0.2)
    monkeypatch.setattr(launcher_module, "REACHABLE_STALE_S", 5.0)
    dashboard = Dashboard()

    async def scenario() -> None:
        launcher = RayJobLauncher("http://ray.invalid:8265", stop_grace_s=1)
        launcher._http = httpx.AsyncClient(
            base_url="http://ray.invalid:8265", transport=httpx.MockTransport(dashboard.handle)
        )
        try:
            assert await launcher.reachable() is True  # no answer yet: waited for
            assert dashboard.calls == 1
            dashboard.delay_s = 0.5  # a slow dashboard from now on
            for _ in range(10):  # fresh: served at once, no request
                assert await asyncio.wait_for(launcher.reachable(), 0.3) is True
            assert dashboard.calls == 1
            await asyncio.sleep(0.25)  # past the refresh age: one check starts, nobody waits
            results = await asyncio.wait_for(
                asyncio.gather(*(launcher.reachable() for _ in range(20))), 0.05
            )
            assert all(results) and dashboard.calls == 2
            await asyncio.sleep(0.6)  # that check has answered: up
            dashboard.up = False  # the cluster goes away
            await asyncio.sleep(0.25)
            # The answer (up) is still served at once while the next check asks...
            assert await asyncio.wait_for(launcher.reachable(), 0.3) is True
            await asyncio.sleep(0.6)
            # ...and once that check has answered, /health says so.
            assert await asyncio.wait_for(launcher.reachable(), 0.3) is False
            assert dashboard.calls == 3
        finally:
            await launcher.close()

    asyncio.run(scenario())
