"""What the service keeps on disk: uploads are atomic (temp file, row, rename), space limits
refuse an upload with 507 before and while it streams, orphans are swept at start-up, and
logs are bounded per experiment."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.checkpoints import service as checkpoints_service
from app.checkpoints import storage
from app.experiments.models import LogLine
from app.main import create_app

MiB = 1024**2


def _put(client, exp_id, token, iteration, content, headers=None):
    return client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params={"iteration": iteration, "env_steps": iteration * 100},
        content=content,
        headers={"Authorization": f"Bearer {token}", **(headers or {})},
    )


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _logs(client, exp_id) -> list[str]:
    return client.get(f"/api/v1/experiments/{exp_id}/logs", params={"tail": 2000}).json()["lines"]


@pytest.fixture
def quota_client(make_settings):
    """An app whose checkpoint storage holds at most 1 MiB."""
    app = create_app(make_settings(max_storage_bytes=MiB, min_free_bytes=0))
    with TestClient(app) as client:
        yield app, client


def _new(client, app, name="exp"):
    from app.core.db import transaction
    from app.experiments import service as experiments

    body = {"name": name, "config": {"env_id": "CartPole-v1"}}
    exp_id = client.post("/api/v1/experiments", json=body).json()["id"]
    with transaction(app.state.sessionmaker) as session:
        return exp_id, experiments.issue_job_token(session, exp_id)


def test_an_upload_past_the_quota_is_refused_before_it_streams(quota_client):
    app, client = quota_client
    exp_id, token = _new(client, app)
    assert _put(client, exp_id, token, 1, os.urandom(600 * 1024)).status_code == 200
    refused = _put(client, exp_id, token, 2, os.urandom(600 * 1024))  # Content-Length: 614400
    assert refused.status_code == 507
    error = refused.json()["error"]
    assert error["code"] == "insufficient_storage"
    assert "ROLLOUT_MAX_STORAGE_BYTES=1,048,576" in error["message"]
    root = app.state.settings.checkpoints_dir
    listed = client.get(f"/api/v1/experiments/{exp_id}/checkpoints").json()
    assert [c["iteration"] for c in listed] == [1]
    assert _files(root) == [_stored_path(app, listed[0]["id"])]
    assert any(
        "checkpoint of iteration 2 not stored" in line and "job keeps the archive" in line
        for line in _logs(client, exp_id)
    )


def _stored_path(app, checkpoint_id: int) -> str:
    from app.checkpoints.models import Checkpoint

    with app.state.sessionmaker() as session:
        return session.get(Checkpoint, checkpoint_id).path


def test_a_chunked_upload_is_stopped_while_it_streams(quota_client, monkeypatch):
    """No Content-Length: the limit is found while the body streams; nothing stays behind."""
    monkeypatch.setattr(storage, "CHECK_EVERY_BYTES", 256 * 1024)
    app, client = quota_client
    exp_id, token = _new(client, app)

    def body():
        for _ in range(40):
            yield os.urandom(64 * 1024)  # 2.5 MiB in all

    refused = _put(client, exp_id, token, 1, body())
    assert refused.status_code == 507, refused.text
    assert refused.json()["error"]["code"] == "insufficient_storage"
    assert _files(app.state.settings.checkpoints_dir) == []
    assert client.get(f"/api/v1/experiments/{exp_id}/checkpoints").json() == []


def test_an_upload_that_would_fill_the_disk_is_refused(make_settings):
    app = create_app(make_settings())
    with TestClient(app) as client:
        exp_id, token = _new(client, app)  # then the disk fills (a new run would get 507 too)
        app.state.settings = app.state.settings.model_copy(update={"min_free_bytes": 2**62})
        refused = _put(client, exp_id, token, 1, b"archive")
        assert refused.status_code == 507
        assert "ROLLOUT_MIN_FREE_BYTES" in refused.json()["error"]["message"]
        assert _files(app.state.settings.checkpoints_dir) == []


def test_an_upload_whose_experiment_is_deleted_meanwhile_leaves_nothing(
    client, app, create_experiment, job_token, transition
):
    """The experiment ends and is deleted while its checkpoint streams in: the upload fails
    (404) and neither the temp file nor the archive nor the experiment's directory remains."""
    exp_id = create_experiment()["id"]
    token = job_token(exp_id)
    transition(exp_id, "queued", "running")  # a running job's token may upload
    root = app.state.settings.checkpoints_dir
    chunks = [b"first half ", b"second half"]
    status: dict[str, int] = {}

    async def receive() -> dict:
        if len(chunks) == 1:  # between the two chunks: it ends and the user deletes it
            await asyncio.to_thread(transition, exp_id, "stopping", "stopped")
            deleted = await asyncio.to_thread(client.delete, f"/api/v1/experiments/{exp_id}")
            assert deleted.status_code == 204
        body = chunks.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(chunks)}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            status["code"] = message["status"]

    path = f"/api/v1/jobs/experiments/{exp_id}/checkpoints"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "PUT",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"iteration=1&env_steps=100",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("testclient", 50000),
        "server": ("testserver", 80),
    }
    client.portal.call(app, scope, receive, send)
    assert status["code"] == 404
    assert not (root / str(exp_id)).exists()
    assert _files(root) == []


def test_a_failed_record_leaves_no_file_and_keeps_the_committed_archive(
    app, create_experiment, job_token, monkeypatch
):
    exp_id = create_experiment()["id"]
    token = job_token(exp_id)
    root = app.state.settings.checkpoints_dir
    with TestClient(app, raise_server_exceptions=False) as client:
        assert _put(client, exp_id, token, 1, b"committed").status_code == 200
        before = _files(root)

        def broken(*args, **kwargs):
            raise RuntimeError("the database went away")

        monkeypatch.setattr(checkpoints_service, "register", broken)
        assert _put(client, exp_id, token, 1, b"re-upload").status_code == 500
        assert _put(client, exp_id, token, 2, b"new").status_code == 500
        assert _files(root) == before
        download = f"/api/v1/experiments/{exp_id}/checkpoints/latest/download"
        assert client.get(download).content == b"committed"


def test_the_start_up_sweep_removes_orphans_only(make_settings):
    settings = make_settings()
    app = create_app(settings)
    root, jobs = settings.checkpoints_dir, settings.data_dir / "jobs"
    with TestClient(app) as client:
        exp_id, token = _new(client, app)
        assert _put(client, exp_id, token, 1, b"kept").status_code == 200
    kept = _files(root)
    old = time.time() - 3600
    orphans = [
        root / str(exp_id) / "iteration-00000009-000000000000.tar.gz",  # its row never committed
        root / str(exp_id) / ".upload-abandoned.part",
        root / "424242" / "iteration-00000001-aaaaaaaaaaaa.tar.gz",  # experiment deleted
        jobs / "424242" / "metrics.jsonl",
    ]
    fresh = [root / str(exp_id) / ".upload-in-flight.part", jobs / str(exp_id) / "metrics.jsonl"]
    for path in orphans + fresh:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    for path in orphans:
        os.utime(path, (old, old))
        os.utime(path.parent, (old, old))

    with TestClient(create_app(settings)):
        pass
    assert _files(root) == sorted([*kept, str(fresh[0].relative_to(root))])
    assert not (root / "424242").exists() and not (jobs / "424242").exists()
    assert fresh[1].exists()


def test_logs_keep_the_newest_lines_per_experiment(make_settings):
    app = create_app(make_settings(max_log_lines_per_experiment=5))
    with TestClient(app) as client:
        first, token = _new(client, app, "first")
        other, other_token = _new(client, app, "other")

        def post(exp_id, tok, lines):
            response = client.post(
                f"/api/v1/jobs/experiments/{exp_id}/logs",
                json={"lines": lines},
                headers={"Authorization": f"Bearer {tok}"},
            )
            assert response.status_code == 200

        post(other, other_token, ["other 1", "other 2"])
        post(first, token, [f"line {i}" for i in range(3)])
        post(first, token, [f"line {i}" for i in range(3, 7)])
        post(first, token, ["x" * 50_000])
        assert _logs(client, first)[:-1] == [f"line {i}" for i in range(3, 7)]
        assert _logs(client, first)[-1].endswith("[truncated]")
        assert _logs(client, other) == ["other 1", "other 2"]
        with app.state.sessionmaker() as session:
            counts = dict(
                session.execute(
                    select(LogLine.experiment_id, func.count()).group_by(LogLine.experiment_id)
                ).all()
            )
        assert counts == {first: 5, other: 2}


@pytest.fixture
def tiny_data_dir(tmp_path: Path):
    """A 1 MiB tmpfs as the data dir (needs root and mount; the database lives outside)."""
    import shutil
    import subprocess

    mount = tmp_path / "data"
    mount.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True, timeout=30)


def test_a_disk_that_really_fills_up_mid_upload_gives_507(make_settings, tiny_data_dir):
    """No limit configured; the filesystem itself runs out of space (ENOSPC) mid-stream."""
    app = create_app(make_settings(data_dir=tiny_data_dir, min_free_bytes=0))
    with TestClient(app) as client:
        exp_id, token = _new(client, app)

        def body():
            for _ in range(32):
                yield os.urandom(64 * 1024)  # 2 MiB into a 1 MiB filesystem

        refused = _put(client, exp_id, token, 1, body())
        assert refused.status_code == 507, refused.text
        assert refused.json()["error"]["code"] == "insufficient_storage"
        assert _files(app.state.settings.checkpoints_dir) == []
        assert _put(client, exp_id, token, 1, os.urandom(100 * 1024)).status_code == 200
