"""Live messages across API processes sharing one PostgreSQL database (LISTEN/NOTIFY)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import transaction
from app.experiments import service
from app.live.pg_notify import MAX_PAYLOAD, notify_payloads, payloads
from app.main import create_app

pytestmark = pytest.mark.timeout(60)


@dataclass(frozen=True)
class TwoProcesses:
    """Two apps (standing in for two API processes) on the same database: a websocket client
    on the first follows an experiment whose job reports to the second."""

    ws: Any
    job: TestClient
    exp_id: int
    token: str

    def ingest(self, rows: list[dict[str, Any]]) -> None:
        response = self.job.post(
            f"/api/v1/jobs/experiments/{self.exp_id}/metrics",
            json={"rows": rows},
            headers={"Authorization": f"Bearer {self.token}"},
        )
        assert response.status_code == 200

    def next_metrics(self) -> dict[str, Any]:
        message = self.ws.receive_json()
        while message["type"] != "metrics":
            message = self.ws.receive_json()
        return message


@contextmanager
def two_processes(postgres_url: str, tmp_path: Path) -> Iterator[TwoProcesses]:
    def settings(name: str) -> Settings:
        return Settings(
            database_url=postgres_url,
            data_dir=tmp_path / name,
            jobs_enabled=False,
            frontend_dir=tmp_path / "none",
        )

    first, second = create_app(settings("a")), create_app(settings("b"))
    with TestClient(first) as a, TestClient(second) as b:
        exp = a.post("/api/v1/experiments", json={"name": "shared", "config": {}}).json()
        with transaction(second.state.sessionmaker) as session:
            token = service.issue_job_token(session, exp["id"])
        with a.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream") as ws:
            while ws.receive_json()["type"] != "status":
                pass
            yield TwoProcesses(ws, b, exp["id"], token)


@pytest.mark.postgres
def test_ingest_on_one_process_reaches_a_client_of_another(postgres_url, tmp_path):
    with two_processes(postgres_url, tmp_path) as pair:
        pair.ingest(
            [
                {"step": s, "time_s": 0.0, "values": {f"m{i}": float(s) for i in range(30)}}
                for s in range(1, 201)
            ]
        )
        steps: list[int] = []
        while len(steps) < 200:
            message = pair.next_metrics()
            assert message["series"]["m7"] == [float(s) for s in message["step"]]
            steps += message["step"]
        assert steps == list(range(1, 201))  # by reference (too large), in order, complete


@pytest.mark.postgres
def test_a_small_batch_reaches_another_process_without_a_read_back(
    postgres_url, tmp_path, monkeypatch
):
    """An iteration's row travels inline in its NOTIFY: no process reads it back."""

    def no_read_back(*args, **kwargs):
        raise AssertionError("a small batch was read back from the database")

    monkeypatch.setattr("app.main.metrics_message_between", no_read_back)
    with two_processes(postgres_url, tmp_path) as pair:
        for step in (1, 2):
            values = {f"m{i}": step / 2 for i in range(40)}
            pair.ingest([{"step": step, "time_s": 0.5, "values": values}])
            message = pair.next_metrics()
            assert message["step"] == [step]
            assert message["series"]["m39"] == [step / 2]
            assert message["series"]["time_s"] == [0.5]


def test_metrics_go_inline_when_they_fit_and_by_reference_when_not():
    small = {
        "type": "metrics",
        "experiment_id": 1,
        "step": [1024],
        "series": {f"metric_{i:02d}": [0.123456789] for i in range(60)},
    }
    [part] = notify_payloads("experiment:1", small)
    assert json.loads(part) == {"t": "experiment:1", "m": small}
    large = {**small, "step": list(range(100)), "series": {f"m{i}": [0.5] * 100 for i in range(20)}}
    [ref] = notify_payloads("experiment:1", large)
    assert json.loads(ref)["m"] == {
        "type": "metrics_ref",
        "experiment_id": 1,
        "step_min": 0,
        "step_max": 99,
    }
    log = {"type": "log", "experiment_id": 1, "lines": ["a"]}
    assert notify_payloads("experiment:1", log) == payloads("experiment:1", log)


def test_large_messages_are_split_under_the_notify_limit():
    message = {
        "type": "metrics",
        "experiment_id": 1,
        "step": list(range(1000)),
        "series": {f"metric_{i}": [0.5] * 1000 for i in range(10)},
    }
    parts = payloads("experiment:1", message)
    assert len(parts) > 1
    assert all(len(p.encode()) <= MAX_PAYLOAD for p in parts)
    steps = [s for p in parts for s in json.loads(p)["m"]["step"]]
    assert steps == list(range(1000))


def test_long_texts_are_shortened_and_log_batches_split():
    status = {"type": "status", "experiment_id": 1, "status": "failed", "error": "x" * 50_000}
    [part] = payloads("experiment:1", status)
    assert len(part.encode()) <= MAX_PAYLOAD
    assert "truncated" in json.loads(part)["m"]["error"]
    logs = {"type": "log", "experiment_id": 1, "lines": [f"line {i} " * 20 for i in range(500)]}
    parts = payloads("experiment:1", logs)
    assert [line for p in parts for line in json.loads(p)["m"]["lines"]] == logs["lines"]
