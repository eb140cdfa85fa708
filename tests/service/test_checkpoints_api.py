"""Checkpoints: streamed upload -> list -> identical download, best/latest, retention."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading


def _upload(client, exp_id, token, iteration, data, ret=None):
    params = {"iteration": iteration, "env_steps": iteration * 1000}
    if ret is not None:
        params["episode_return_mean"] = ret
    return client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params=params,
        content=data,
        headers={"Authorization": f"Bearer {token}"},
    )


def test_upload_list_download_identical(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    data = os.urandom(3 * 1024 * 1024 + 17)
    response = _upload(client, exp["id"], token, 1, data, ret=12.5)
    assert response.status_code == 200
    meta = response.json()
    assert meta["size_bytes"] == len(data) and meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert meta["is_best"] and meta["is_latest"]
    listed = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json()
    assert [c["id"] for c in listed] == [meta["id"]]
    for ref in (meta["id"], "best", "latest"):
        got = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints/{ref}/download")
        assert got.status_code == 200 and got.content == data
        assert got.headers["content-type"] == "application/gzip"
    missing = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints/999/download")
    assert missing.status_code == 404


def test_upload_is_idempotent_per_iteration(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    first = _upload(client, exp["id"], token, 3, b"one").json()
    second = _upload(client, exp["id"], token, 3, b"two").json()
    assert first["id"] == second["id"]
    assert (
        client.get(f"/api/v1/experiments/{exp['id']}/checkpoints/latest/download").content == b"two"
    )
    assert len(client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json()) == 1


def test_retention_keeps_latest_n_and_the_best(client, create_experiment, job_token, app):
    exp = create_experiment()  # keep_checkpoints = 2
    token = job_token(exp["id"])
    returns = {1: 10.0, 2: 99.0, 3: 20.0, 4: 30.0, 5: 25.0}
    for iteration, ret in returns.items():
        assert (
            _upload(client, exp["id"], token, iteration, f"c{iteration}".encode(), ret).status_code
            == 200
        )
    listed = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json()
    assert [c["iteration"] for c in listed] == [2, 4, 5]
    best = next(c for c in listed if c["is_best"])
    latest = next(c for c in listed if c["is_latest"])
    assert best["iteration"] == 2 and latest["iteration"] == 5
    assert client.get(f"/api/v1/experiments/{exp['id']}/checkpoints/best/download").content == b"c2"
    files = sorted(p.name for p in (app.state.settings.checkpoints_dir / str(exp["id"])).iterdir())
    assert [f.rsplit("-", 1)[0] for f in files] == [f"iteration-{i:08d}" for i in (2, 4, 5)]
    assert all(f.endswith(".tar.gz") for f in files)


def test_best_falls_back_to_latest_without_returns(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    _upload(client, exp["id"], token, 1, b"a")
    _upload(client, exp["id"], token, 2, b"b")
    assert client.get(f"/api/v1/experiments/{exp['id']}/checkpoints/best/download").content == b"b"


def test_empty_upload_is_rejected(client, create_experiment, job_token):
    exp = create_experiment()
    response = _upload(client, exp["id"], job_token(exp["id"]), 1, b"")
    assert response.status_code == 422
    assert client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json() == []


def test_a_download_being_sent_holds_no_database_lock(
    client, app, create_experiment, job_token, transition
):
    """The request's session ends before its response goes out: while a (slow) client still
    receives an archive, jobs can write (on SQLite every transaction takes the write lock)."""
    exp_id = create_experiment()["id"]
    headers = {"Authorization": f"Bearer {job_token(exp_id)}"}
    upload = client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params={"iteration": 1, "env_steps": 10},
        content=b"archive",
        headers=headers,
    )
    assert upload.status_code == 200
    path = f"/api/v1/experiments/{exp_id}/checkpoints/latest/download"
    writer = threading.Thread(target=transition, args=(exp_id, "queued"))
    body = bytearray()
    requests = [{"type": "http.request", "body": b"", "more_body": False}]
    sent = asyncio.Event()

    async def receive() -> dict:
        if requests:
            return requests.pop()
        await sent.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] != "http.response.body":
            return
        if writer.ident is None:
            writer.start()  # a job writes while the response is on its way
            writer.join(5)
        body.extend(message.get("body", b""))
        if not message.get("more_body", False):
            sent.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"testserver")],
        "client": ("testclient", 50000),
        "server": ("testserver", 80),
    }
    client.portal.call(app, scope, receive, send)
    blocked = writer.is_alive()
    writer.join(60)
    assert not blocked, "the write waited for the response to be sent"
    assert bytes(body) == b"archive"
    assert client.get(f"/api/v1/experiments/{exp_id}").json()["status"] == "queued"
