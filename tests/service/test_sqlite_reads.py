"""SQLite: reads run in deferred, read-only transactions and never take the write lock, so a
long read cannot stall ingest, and no read waits for a writer (WAL). Metric queries are
bounded even without max_points."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import text

from app.core.db import transaction
from app.core.deps import get_session
from app.metrics import service as metrics_service
from app.metrics.service import upsert_points

WAIT_S = 10.0  # far below the 30 s busy timeout a blocked transaction would wait


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = fn()
        except BaseException as exc:  # reported by the test
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def _ingest(client, exp_id, token, step):
    return client.post(
        f"/api/v1/jobs/experiments/{exp_id}/metrics",
        json={"rows": [{"step": step, "time_s": 1.0, "values": {"loss": 0.5}}]},
        headers={"Authorization": f"Bearer {token}"},
    )


@pytest.mark.parametrize("backend", ["sqlite"])
def test_ingest_proceeds_while_a_get_request_holds_its_read_transaction(
    backend, client, app, create_experiment, job_token
):
    """A GET handler's session (a long metrics query, say) is open with its snapshot read;
    meanwhile a job ingests. Before, every transaction was BEGIN IMMEDIATE and the ingest
    waited for the reader's write lock (and failed after the busy timeout)."""
    exp_id = create_experiment()["id"]
    token = job_token(exp_id)
    assert _ingest(client, exp_id, token, 1).status_code == 200
    request = SimpleNamespace(method="GET", app=app)
    sessions = get_session(request)  # exactly what a GET handler's SessionDep gets
    loop = asyncio.new_event_loop()
    session = loop.run_until_complete(anext(sessions))
    try:
        before = session.execute(text("SELECT count(*) FROM metric_points")).scalar()
        writer, result = _in_thread(lambda: _ingest(client, exp_id, token, 2))
        writer.join(WAIT_S)
        assert not writer.is_alive(), "ingest waited for a reader"
        assert result["value"].status_code == 200, result
        # The reader still sees its own snapshot.
        again = session.execute(text("SELECT count(*) FROM metric_points")).scalar()
        assert again == before
    finally:
        loop.run_until_complete(sessions.aclose())
        loop.close()
        writer.join(60)
    steps = client.get(f"/api/v1/experiments/{exp_id}/metrics", params={"names": "loss"}).json()
    assert steps["series"]["loss"]["step"] == [1, 2]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_reads_never_wait_for_a_writer(backend, client, app, settings, create_experiment):
    """Another connection holds the write lock (a long ingest transaction): the dashboard's
    reads, /health and a websocket backlog are all served at once."""
    exp_id = create_experiment()["id"]
    holder = sqlite3.connect(settings.resolved_database_url.removeprefix("sqlite:///"))
    holder.isolation_level = None
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("UPDATE experiments SET name = 'being written' WHERE id = ?", (exp_id,))

    def read_everything() -> list[int]:
        codes = [
            client.get(path).status_code
            for path in (
                "/health",
                "/api/v1/experiments",
                f"/api/v1/experiments/{exp_id}",
                f"/api/v1/experiments/{exp_id}/metrics",
                f"/api/v1/experiments/{exp_id}/checkpoints",
                f"/api/v1/experiments/{exp_id}/logs",
            )
        ]
        with client.websocket_connect(f"/api/v1/experiments/{exp_id}/stream") as ws:
            codes.append(200 if ws.receive_json()["type"] == "status" else 0)
        return codes

    try:
        reader, result = _in_thread(read_everything)
        reader.join(WAIT_S)
        assert not reader.is_alive(), "a read waited for the write lock"
        assert result["value"] == [200] * 7, result
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        reader.join(60)


@pytest.mark.parametrize("backend", ["sqlite"])
def test_a_read_only_session_cannot_write(backend, client, app):
    from app.core.db import read_only

    with read_only(app.state.sessionmaker)() as session, pytest.raises(Exception) as info:
        session.execute(text("DELETE FROM experiments"))
    assert "readonly" in str(info.value).lower() or "read-only" in str(info.value).lower()


def test_a_query_without_max_points_is_bounded(client, app, create_experiment, monkeypatch):
    monkeypatch.setattr(metrics_service, "MAX_POINTS_PER_SERIES", 500)
    exp_id = create_experiment()["id"]
    with transaction(app.state.sessionmaker) as session:
        upsert_points(session, exp_id, [(s * 1000, "loss", float(s % 97)) for s in range(5000)])
    got = client.get(f"/api/v1/experiments/{exp_id}/metrics", params={"names": "loss"}).json()
    assert got["downsampled"]["loss"] is True
    assert 125 <= len(got["series"]["loss"]["step"]) <= 500
    assert max(got["series"]["loss"]["value"]) == 96.0  # spikes survive
    many = ",".join(f"m{i}" for i in range(metrics_service.MAX_NAMES_PER_REQUEST + 1))
    refused = client.get(f"/api/v1/experiments/{exp_id}/metrics", params={"names": many})
    assert refused.status_code == 422
    assert refused.json()["error"]["fields"][0]["field"] == "names"
