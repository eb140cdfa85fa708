"""The PostgreSQL live listener survives: a lost connection or a failed delivery is logged,
it reconnects with backoff, subscribers catch up from the database, and /health says so."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from app.core.config import Settings
from app.core.db import make_engine, transaction
from app.experiments import service
from app.live.hub import Lagged, LiveHub
from app.live.pg_notify import APPLICATION_NAME, CHANNEL, PgListener, conninfo
from app.main import create_app

pytestmark = [pytest.mark.postgres, pytest.mark.timeout(90)]


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _terminate_listener(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE application_name = %s AND datname = current_database()",
            (APPLICATION_NAME,),
        ).fetchall()
    return len(rows)


def _metric_steps(ws, until_step: int) -> tuple[list[int], int | None]:
    """Steps received until `until_step` arrives or the server closes (its close code)."""
    steps: list[int] = []
    while until_step not in steps:
        try:
            message = ws.receive_json()
        except WebSocketDisconnect as closed:
            return steps, closed.code
        if message["type"] == "metrics":
            steps += message["step"]
    return steps, None


def test_websocket_clients_keep_receiving_after_the_listener_connection_is_killed(
    postgres_url, tmp_path
):
    settings = Settings(
        database_url=postgres_url,
        data_dir=tmp_path / "data",
        jobs_enabled=False,
        frontend_dir=tmp_path / "none",
    )
    app = create_app(settings)
    with TestClient(app) as client:
        exp_id = client.post("/api/v1/experiments", json={"name": "live", "config": {}}).json()[
            "id"
        ]
        with transaction(app.state.sessionmaker) as session:
            token = service.issue_job_token(session, exp_id)

        def ingest(step: int) -> None:
            row = {"step": step, "time_s": 0.0, "values": {"loss": float(step)}}
            response = client.post(
                f"/api/v1/jobs/experiments/{exp_id}/metrics",
                json={"rows": [row]},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 200

        dsn = conninfo(app.state.engine)
        received: list[int] = []
        stream = f"/api/v1/experiments/{exp_id}/stream"
        with client.websocket_connect(stream) as ws:
            while ws.receive_json()["type"] != "status":
                pass
            ingest(1)
            steps, _ = _metric_steps(ws, 1)
            received += steps
            assert _terminate_listener(dsn) == 1
            ingest(2)  # most likely while nobody listens: lost to NOTIFY, not to the client
            _wait(lambda: client.get("/health").json()["live"]["reconnects"] == 1, 30, "relisten")
            steps, code = _metric_steps(ws, 999)  # until the server asks us to catch up
            received += steps
            assert code == 1013
        # Reconnect from the last step held, as the dashboard does.
        with client.websocket_connect(f"{stream}?since_step={max(received)}") as ws:
            ingest(3)
            steps, code = _metric_steps(ws, 3)
            assert code is None
            received += steps
        assert sorted(set(received)) == [1, 2, 3]
        health = client.get("/health").json()
        assert health["status"] == "ok"
        assert health["live"] == {
            "backend": "postgres",
            "connected": True,
            "reconnects": 1,
            "last_error": health["live"]["last_error"],
        }
        assert health["live"]["last_error"]  # the kind of error that broke the connection


def test_a_delivery_that_fails_does_not_kill_the_listener(postgres_url):
    """The batch behind a `metrics_ref` cannot be read (the database is briefly unavailable):
    its subscribers are told to catch up, and later messages still arrive."""
    engine = make_engine(postgres_url)
    dsn = conninfo(engine)
    engine.dispose()
    calls: list[int] = []

    def load(experiment_id: int, step_min: int, step_max: int) -> dict[str, Any]:
        calls.append(step_min)
        if len(calls) == 1:
            raise RuntimeError("the database is unavailable")
        return {"type": "metrics", "experiment_id": experiment_id, "step": [step_min]}

    def notify(step: int) -> None:
        message = {"type": "metrics_ref", "experiment_id": 1, "step_min": step, "step_max": step}
        payload = json.dumps({"t": "experiment:1", "m": message})
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    async def scenario() -> dict[str, Any]:
        hub = LiveHub()
        await hub.start()
        listener = PgListener(dsn, hub, load)
        await asyncio.to_thread(listener.start)
        try:
            async with hub.subscribe("experiment:1") as first:
                await asyncio.to_thread(notify, 1)
                with pytest.raises(Lagged):
                    await asyncio.wait_for(first.get(), 20)
            async with hub.subscribe("experiment:1") as second:
                await asyncio.to_thread(notify, 2)
                return (await asyncio.wait_for(second.get(), 20)).data
        finally:
            await asyncio.to_thread(listener.stop)
            await hub.stop()

    assert asyncio.run(scenario())["step"] == [2]
    assert calls == [1, 2]
    assert not any(t.name == "rollout-pg-listener" for t in threading.enumerate())
