"""Each request's session gives its connection back when the handler ends, whether it read,
wrote, or failed; and the dependencies that do no I/O stay off the thread pool."""

from __future__ import annotations

import inspect

from app.core import auth, deps


def test_every_request_returns_its_connection(client, app, create_experiment, job_token):
    pool = app.state.engine.pool
    exp = create_experiment()
    token = job_token(exp["id"])
    requests = [
        ("GET", "/api/v1/experiments", {}),
        ("GET", f"/api/v1/experiments/{exp['id']}/metrics", {}),
        ("GET", "/api/v1/experiments/999999/metrics", {}),  # 404 raised in the handler
        ("GET", f"/api/v1/experiments/{exp['id']}/checkpoints", {}),
        ("POST", f"/api/v1/experiments/{exp['id']}/stop", {}),
        ("POST", f"/api/v1/experiments/{exp['id']}/stop", {}),  # 409: it already ended
        (
            "POST",
            f"/api/v1/jobs/experiments/{exp['id']}/metrics",
            {"json": {"rows": [{"step": 1, "time_s": 0, "values": {"a": 1.0}}]}},
        ),
    ]
    statuses = []
    for method, path, kwargs in requests:
        headers = {"Authorization": f"Bearer {token}"} if "/jobs/" in path else {}
        statuses.append(client.request(method, path, headers=headers, **kwargs).status_code)
        assert pool.checkedout() == 0, (method, path)
    assert statuses == [200, 200, 404, 200, 200, 409, 403]  # a stopped run's token is revoked


def test_dependencies_without_io_are_coroutines():
    """FastAPI runs a plain `def` dependency in its thread pool: two thread switches per
    request for reading a header."""
    for dependency in (
        auth.require_api_token,
        auth.job_token,
        deps.get_session,
        deps.get_settings,
        deps.get_sessionmaker,
        deps.get_jobs,
    ):
        assert inspect.iscoroutinefunction(dependency) or inspect.isasyncgenfunction(dependency)
