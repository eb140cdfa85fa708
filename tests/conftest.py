"""Fixtures shared by every test package: one local Ray cluster per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.jobs.ray_head import LocalRayHead, apply_ray_env

# Started the way `rollout serve` starts its local head: from a process whose environment holds
# the service's own credentials. None of them may reach a job (tests/service/test_job_isolation).
SERVICE_SECRETS = {
    "ROLLOUT_API_TOKEN": "service-api-token-never-in-jobs",
    "ROLLOUT_DATABASE_URL": "postgresql://rollout:db-password-never-in-jobs@db/rollout",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run browser tests last: Playwright's sync API keeps an event loop running in this thread
    for as long as its session-scoped browser lives, and `asyncio.run()` refuses to start then."""
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)


@pytest.fixture(scope="session")
def ray_head() -> Iterator[LocalRayHead]:
    """A private Ray head on free ports, shared by all tests, stopped by its own pid.

    4 logical CPUs on a 2-core machine, so a job driver plus its EnvRunner / Learner actors
    fit without a resource deadlock (actor resources never queue a job).
    """
    apply_ray_env()
    head = LocalRayHead(num_cpus=4, object_store_bytes=512 * 1024**2)
    with pytest.MonkeyPatch.context() as env:
        for key, value in SERVICE_SECRETS.items():
            env.setenv(key, value)
        head.start()
    try:
        yield head
    finally:
        head.stop()


@pytest.fixture(scope="session")
def ray_client(ray_head: LocalRayHead) -> Iterator[None]:
    """Connect this test process to the shared cluster as a Ray driver (trainer tests)."""
    import ray

    ray.init(address=ray_head.address, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
