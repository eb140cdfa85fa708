"""Websockets: backlog since a step, then live messages pushed from the ingest handler."""

from __future__ import annotations

import pytest
from starlette.websockets import WebSocketDisconnect

pytestmark = pytest.mark.timeout(60)


def _job(client, exp_id, token, path, **kwargs):
    return client.post(
        f"/api/v1/jobs/experiments/{exp_id}/{path}",
        headers={"Authorization": f"Bearer {token}"},
        **kwargs,
    )


def _rows(*steps):
    return {"rows": [{"step": s, "time_s": s / 1000, "values": {"r": s * 2.0}} for s in steps]}


def _until(ws, kind):
    seen = []
    while True:
        message = ws.receive_json()
        seen.append(message)
        if message["type"] == kind:
            return message, seen


def test_backlog_since_step_then_live_messages(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    _job(client, exp["id"], token, "status", json={"status": "running"})
    _job(client, exp["id"], token, "metrics", json=_rows(100, 200, 300))
    _job(client, exp["id"], token, "logs", json={"lines": ["it 1", "it 2"]})

    with client.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream?since_step=100") as ws:
        backlog = ws.receive_json()
        assert backlog["type"] == "metrics"
        assert backlog["step"] == [200, 300]
        assert backlog["series"]["r"] == [400.0, 600.0]
        status = ws.receive_json()
        assert status["type"] == "status" and status["status"] == "running"
        logs = ws.receive_json()
        assert logs == {"type": "log", "experiment_id": exp["id"], "lines": ["it 1", "it 2"]}

        _job(client, exp["id"], token, "metrics", json=_rows(400))
        live, _ = _until(ws, "metrics")
        assert live["step"] == [400] and live["series"]["r"] == [800.0]

        _job(client, exp["id"], token, "logs", json={"lines": ["it 3"]})
        assert _until(ws, "log")[0]["lines"] == ["it 3"]

        _job(client, exp["id"], token, "status", json={"status": "succeeded", "reason": "done"})
        finished, _ = _until(ws, "status")
        assert finished["status"] == "succeeded" and finished["reason"] == "done"


def test_checkpoint_messages_are_pushed(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    with client.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream") as ws:
        _until(ws, "status")
        client.put(
            f"/api/v1/jobs/experiments/{exp['id']}/checkpoints",
            params={"iteration": 1, "env_steps": 10, "episode_return_mean": 5.0},
            content=b"archive",
            headers={"Authorization": f"Bearer {token}"},
        )
        message, _ = _until(ws, "checkpoint")
        assert message["checkpoint"]["iteration"] == 1 and message["checkpoint"]["is_best"]


def test_list_stream_announces_status_and_progress(client, create_experiment, job_token):
    with client.websocket_connect("/api/v1/stream") as ws:
        exp = create_experiment("listed")
        created, _ = _until(ws, "experiment")
        assert created["experiment"]["id"] == exp["id"]
        assert created["experiment"]["status"] == "pending"
        token = job_token(exp["id"])
        _job(client, exp["id"], token, "status", json={"status": "running"})
        running, _ = _until(ws, "experiment")
        assert running["experiment"]["status"] == "running"
        _job(client, exp["id"], token, "metrics", json=_rows(5000))
        progressed, _ = _until(ws, "experiment")
        assert progressed["experiment"]["env_steps"] == 5000
        assert progressed["experiment"]["progress"] == 0.5


def test_list_stream_gets_progress_at_most_once_a_period_and_status_changes_at_once(
    client, create_experiment, job_token, monkeypatch
):
    monkeypatch.setattr("app.experiments.service.PROGRESS_ANNOUNCE_S", 60.0)
    with client.websocket_connect("/api/v1/stream") as ws:
        exp = create_experiment("busy")
        _until(ws, "experiment")
        token = job_token(exp["id"])
        _job(client, exp["id"], token, "status", json={"status": "running"})
        _until(ws, "experiment")
        for step in (1000, 2000, 3000):
            assert _job(client, exp["id"], token, "metrics", json=_rows(step)).status_code == 200
        _job(client, exp["id"], token, "status", json={"status": "succeeded"})
        seen = []
        while not seen or seen[-1]["experiment"]["status"] != "succeeded":
            seen.append(_until(ws, "experiment")[0])
    assert [m["experiment"]["env_steps"] for m in seen] == [1000, 3000]
    assert seen[0]["experiment"]["status"] == "running"


def test_unknown_experiment_stream_is_refused(client):
    with (
        pytest.raises(WebSocketDisconnect),
        client.websocket_connect("/api/v1/experiments/999/stream") as ws,
    ):
        ws.receive_json()


def test_backlog_is_bounded_to_the_most_recent_steps(client, create_experiment, app):
    from app.core.db import transaction
    from app.live.router import BACKLOG_MAX_STEPS
    from app.metrics.service import upsert_points

    exp = create_experiment()
    total = BACKLOG_MAX_STEPS + 1500
    points = [(s, n, float(s)) for s in range(1, total + 1) for n in ("time_s", "r")]
    with transaction(app.state.sessionmaker) as session:
        upsert_points(session, exp["id"], points)
    with client.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream") as ws:
        steps: list[int] = []
        _, seen = _until(ws, "status")
        for m in seen:
            if m["type"] == "metrics":
                assert m["series"]["r"] == [float(s) for s in m["step"]]
                steps += m["step"]
    assert steps == list(range(total - BACKLOG_MAX_STEPS + 1, total + 1))


def test_every_message_is_one_of_the_typed_live_messages(client, create_experiment, job_token):
    """What the streams send is exactly what the shared models (app/live/messages.py) write:
    each message parses as one of them, and writing it back gives the same JSON."""
    from app.live.messages import LIST_ADAPTER, STREAM_ADAPTER

    with client.websocket_connect("/api/v1/stream") as listing:
        exp = create_experiment()
        token = job_token(exp["id"])
        _job(client, exp["id"], token, "status", json={"status": "running"})
        _job(client, exp["id"], token, "metrics", json=_rows(100, 200))
        _job(client, exp["id"], token, "logs", json={"lines": ["it 1"]})
        with client.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream") as ws:
            sent = _until(ws, "log")[1]  # the backlog: metrics, status, log
            client.put(
                f"/api/v1/jobs/experiments/{exp['id']}/checkpoints",
                params={"iteration": 1, "env_steps": 200},
                content=b"archive",
                headers={"Authorization": f"Bearer {token}"},
            )
            sent += _until(ws, "checkpoint")[1]
            _job(client, exp["id"], token, "metrics", json=_rows(300))
            sent += _until(ws, "metrics")[1]
            _job(client, exp["id"], token, "status", json={"status": "succeeded"})
            sent += _until(ws, "status")[1]
        assert client.delete(f"/api/v1/experiments/{exp['id']}").status_code == 204
        listed = _until(listing, "deleted")[1]

    typed = [STREAM_ADAPTER.validate_python(m) for m in sent]
    kinds = {type(m).__name__ for m in typed}
    assert kinds == {"MetricsMessage", "StatusMessage", "LogMessage", "CheckpointMessage"}
    assert [m.wire() for m in typed] == sent
    typed_list = [LIST_ADAPTER.validate_python(m) for m in listed]
    assert {type(m).__name__ for m in typed_list} == {"ExperimentMessage", "DeletedMessage"}
    assert [m.wire() for m in typed_list] == listed
