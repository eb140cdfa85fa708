"""Faults in the job upload routes: a client that disconnects mid-upload (one WARNING line, no
ERROR traceback, nothing left on disk), and a video re-uploaded in another format (the old
file goes)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.service.test_evaluations_api import (  # noqa: F401  (fixtures)
    API,
    VIDEO_META,
    _auth,
    _evaluate,
    experiment,
    launch,
)


def _put_then_disconnect(
    client: TestClient, app: FastAPI, path: str, query: str, token: str
) -> list[dict[str, Any]]:
    """PUT `path` declaring 1 MB, send 64 kB of it, then disconnect; the ASGI messages sent."""
    sent: list[dict[str, Any]] = []
    messages = [
        {"type": "http.request", "body": b"x" * 65_536, "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-length", b"1000000"),
            (b"content-type", b"application/octet-stream"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    assert client.portal is not None
    client.portal.call(app, scope, receive, send)
    return sent


def _status(sent: list[dict[str, Any]]) -> int:
    return next(m["status"] for m in sent if m["type"] == "http.response.start")


def _assert_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
    assert len(warnings) == 1 and "client disconnected after 65536 bytes" in warnings[0].message
    assert warnings[0].exc_info is None


def test_a_checkpoint_upload_cut_off_logs_one_warning_and_leaves_nothing(
    client: TestClient,
    app: FastAPI,
    create_experiment: Any,
    job_token: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    exp_id = create_experiment()["id"]
    token = job_token(exp_id)
    caplog.set_level(logging.INFO)
    sent = _put_then_disconnect(
        client,
        app,
        f"{API}/jobs/experiments/{exp_id}/checkpoints",
        "iteration=1&env_steps=10",
        token,
    )
    assert _status(sent) == 400
    _assert_one_warning(caplog)
    root = app.state.settings.checkpoints_dir / str(exp_id)
    assert not root.exists() or list(root.iterdir()) == []
    assert client.get(f"{API}/experiments/{exp_id}/checkpoints").json() == []


def test_a_video_upload_cut_off_logs_one_warning_and_leaves_nothing(
    client: TestClient,
    app: FastAPI,
    experiment: dict[str, Any],  # noqa: F811
    launch: Any,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id).json()["id"]
    token = launch(eid)
    caplog.set_level(logging.INFO)
    query = "&".join(f"{k}={str(v).lower()}" for k, v in VIDEO_META.items())
    sent = _put_then_disconnect(client, app, f"{API}/jobs/evaluations/{eid}/video", query, token)
    assert _status(sent) == 400
    _assert_one_warning(caplog)
    videos = app.state.settings.data_dir / "evaluations" / str(exp_id)
    assert not videos.exists() or list(videos.iterdir()) == []
    assert client.get(f"{API}/evaluations/{eid}").json()["video"] is None


def test_a_video_reuploaded_in_another_format_replaces_the_old_file(
    client: TestClient,
    app: FastAPI,
    experiment: dict[str, Any],  # noqa: F811
    launch: Any,  # noqa: F811
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id).json()["id"]
    token = launch(eid)
    job = f"{API}/jobs/evaluations/{eid}/video"
    webm = client.put(job, params=VIDEO_META, content=b"webm bytes", headers=_auth(token))
    assert webm.status_code == 200, webm.text
    mp4_meta = {**VIDEO_META, "media_type": "video/mp4", "codec": "h264"}
    mp4 = client.put(job, params=mp4_meta, content=b"mp4 bytes!", headers=_auth(token))
    assert mp4.status_code == 200, mp4.text
    videos: Path = app.state.settings.data_dir / "evaluations" / str(exp_id)
    assert sorted(p.name for p in videos.iterdir()) == [f"{eid}.mp4"]
    got = client.get(f"{API}/evaluations/{eid}").json()["video"]
    assert got["media_type"] == "video/mp4" and got["size_bytes"] == len(b"mp4 bytes!")
    assert client.get(f"{API}/evaluations/{eid}/video").content == b"mp4 bytes!"
