"""Evaluations API on SQLite and PostgreSQL: create (and its 404/409/422s), list, get, the job
routes an evaluation job calls (spec, checkpoint, episodes, video, status), the video download
with Range requests, delete, and the live `evaluation` messages."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.checkpoints.models import Checkpoint
from app.core.db import transaction
from app.evaluations import service as evaluations
from app.evaluations.files import VIDEO_MAX_BYTES
from tests.service.conftest import SMALL_CONFIG
from trainer.video import VideoWriter

API = "/api/v1"


def _upload_checkpoint(client, exp_id, token, iteration, data, ret=None, final=False):
    params = {"iteration": iteration, "env_steps": iteration * 1000, "final": final}
    if ret is not None:
        params["episode_return_mean"] = ret
    response = client.put(
        f"{API}/jobs/experiments/{exp_id}/checkpoints",
        params=params,
        content=data,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def experiment(client, create_experiment, job_token) -> dict[str, Any]:
    """An experiment with checkpoints at iterations 1 (best, return 50) and 2 (latest)."""
    exp = create_experiment()
    token = job_token(exp["id"])
    exp["checkpoints"] = [
        _upload_checkpoint(client, exp["id"], token, 1, b"archive-1", ret=50.0),
        _upload_checkpoint(client, exp["id"], token, 2, b"archive-2", ret=20.0),
    ]
    return exp


@pytest.fixture
def launch(app: FastAPI) -> Callable[[int], str]:
    """Do what the scheduler does at launch: a job token, then `running`."""

    def start(evaluation_id: int) -> str:
        with transaction(app.state.sessionmaker) as session:
            token = evaluations.issue_job_token(session, evaluation_id)
            evaluations.transition(session, evaluation_id, "running", "test: submitted")
        return token

    return start


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _evaluate(client: TestClient, exp_id: int, **body: Any) -> Any:
    return client.post(f"{API}/experiments/{exp_id}/evaluations", json=body)


def _fields(response) -> set[str]:
    assert response.status_code == 422, response.text
    return {f["field"] for f in response.json()["error"]["fields"]}


def _webm(path: Path, frames: int = 12) -> Path:
    writer = VideoWriter(path, fps=10)
    for i in range(frames):
        frame = np.zeros((40, 60, 3), np.uint8)
        frame[:, : (i + 1) * 5] = 200
        writer.add(frame)
    info = writer.close()
    assert info is not None and info.frames == frames
    return path


VIDEO_META = {
    "codec": "vp9",
    "media_type": "video/webm",
    "frames": 12,
    "fps": 10.0,
    "width": 60,
    "height": 40,
    "source_frames": 12,
    "frame_step": 1,
    "cut": False,
}


# --- create / list / get ------------------------------------------------------------------------


def test_create_resolves_best_latest_and_ids(client, experiment) -> None:
    exp_id = experiment["id"]
    first, second = experiment["checkpoints"]
    response = _evaluate(client, exp_id, checkpoint="best", episodes=5, seed=7)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["status"] == "pending" and body["experiment_id"] == exp_id
    assert (body["checkpoint"], body["checkpoint_id"]) == ("best", first["id"])
    assert body["checkpoint_iteration"] == 1 and body["checkpoint_env_steps"] == 1000
    assert (body["episodes"], body["seed"], body["deterministic"], body["record_video"]) == (
        5,
        7,
        True,
        True,
    )
    assert body["returns"] == [] and body["episodes_done"] == 0 and body["video"] is None

    latest = _evaluate(client, exp_id, checkpoint="latest").json()
    assert latest["checkpoint_id"] == second["id"] and latest["episodes"] == 10  # default
    by_id = _evaluate(client, exp_id, checkpoint=second["id"], deterministic=False).json()
    assert by_id["checkpoint_id"] == second["id"] and by_id["deterministic"] is False
    as_text = _evaluate(client, exp_id, checkpoint=str(first["id"]), record_video=False).json()
    assert as_text["checkpoint_id"] == first["id"] and as_text["record_video"] is False

    listed = client.get(f"{API}/experiments/{exp_id}/evaluations").json()
    assert [e["id"] for e in listed] == [as_text["id"], by_id["id"], latest["id"], body["id"]]
    assert "returns" not in listed[0]  # the list carries summaries
    got = client.get(f"{API}/evaluations/{body['id']}").json()
    assert got["id"] == body["id"] and got["returns"] == [] and got["lengths"] == []


def test_bad_requests_name_their_fields(client, experiment) -> None:
    exp_id = experiment["id"]
    assert _fields(_evaluate(client, exp_id, episodes=0)) == {"episodes"}
    assert _fields(_evaluate(client, exp_id, episodes=1001)) == {"episodes"}
    assert _fields(_evaluate(client, exp_id, seed=-1)) == {"seed"}
    assert _fields(_evaluate(client, exp_id, checkpoint="newest")) == {"checkpoint"}
    assert _fields(_evaluate(client, exp_id, checkpoint=True)) == {"checkpoint"}
    assert _fields(_evaluate(client, exp_id, frames=3)) == {"frames"}
    assert _fields(_evaluate(client, exp_id, episodes="many", seed=1.5)) == {"episodes", "seed"}
    # A checkpoint id this experiment does not have: 422 on the field (the URL's experiment
    # exists; the body names something that does not).
    unknown = _evaluate(client, exp_id, checkpoint=99_999)
    assert _fields(unknown) == {"checkpoint"}
    assert "no checkpoint 99999" in unknown.json()["error"]["fields"][0]["message"]
    assert client.get(f"{API}/experiments/{exp_id}/evaluations").json() == []  # nothing stored


def test_unknown_experiment_and_experiment_without_checkpoints(client, create_experiment) -> None:
    missing = _evaluate(client, 424242)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert client.get(f"{API}/experiments/424242/evaluations").status_code == 404
    exp = create_experiment()
    conflict = _evaluate(client, exp["id"])
    assert conflict.status_code == 409
    assert "no checkpoint" in conflict.json()["error"]["message"]
    assert client.get(f"{API}/evaluations/777").status_code == 404
    assert client.get(f"{API}/evaluations/777/video").status_code == 404
    assert client.delete(f"{API}/evaluations/777").status_code == 404


# --- the job's side -------------------------------------------------------------------------------


def test_a_job_runs_an_evaluation_end_to_end(client, experiment, launch, tmp_path) -> None:
    exp_id = experiment["id"]
    evaluation = _evaluate(client, exp_id, checkpoint="best", episodes=4, seed=3).json()
    eid = evaluation["id"]
    token = launch(eid)
    job = f"{API}/jobs/evaluations/{eid}"

    spec = client.get(job, headers=_auth(token)).json()
    assert spec["checkpoint_id"] == experiment["checkpoints"][0]["id"]
    assert (spec["episodes"], spec["seed"], spec["deterministic"]) == (4, 3, True)
    assert spec["video_max_bytes"] == VIDEO_MAX_BYTES and spec["record_video"] is True
    archive = client.get(f"{job}/checkpoint", headers=_auth(token))
    assert archive.status_code == 200 and archive.content == b"archive-1"

    running = client.post(f"{job}/status", json={"status": "running"}, headers=_auth(token))
    assert running.status_code == 200 and running.json()["job_started_at"] is not None

    returns, lengths = [10.0, 30.5, 20.0, 7.25], [10, 31, 20, 8]
    batch = [
        {"index": i, "episode_return": r, "length": n}
        for i, (r, n) in enumerate(zip(returns, lengths, strict=True))
    ]
    assert client.post(
        f"{job}/episodes", json={"episodes": batch[:2]}, headers=_auth(token)
    ).json() == {"episodes": 2}
    # A retried batch (its reply was lost) replaces the same rows.
    assert (
        client.post(
            f"{job}/episodes", json={"episodes": batch[:3]}, headers=_auth(token)
        ).status_code
        == 200
    )
    partial = client.get(f"{API}/evaluations/{eid}").json()
    assert partial["episodes_done"] == 3 and partial["returns"] == returns[:3]
    early = client.post(f"{job}/status", json={"status": "succeeded"}, headers=_auth(token))
    assert early.status_code == 409  # not every episode is in
    client.post(f"{job}/episodes", json={"episodes": batch[3:]}, headers=_auth(token))

    video = _webm(tmp_path / "v.webm")
    uploaded = client.put(
        f"{job}/video", params=VIDEO_META, content=video.read_bytes(), headers=_auth(token)
    )
    assert uploaded.status_code == 200, uploaded.text
    assert uploaded.json()["url"] == f"{API}/evaluations/{eid}/video"
    done = client.post(
        f"{job}/status", json={"status": "succeeded", "reason": "4 episodes"}, headers=_auth(token)
    )
    assert done.status_code == 200 and done.json()["status"] == "succeeded"

    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["returns"] == returns and got["lengths"] == lengths
    assert got["return_mean"] == pytest.approx(np.mean(returns))
    assert got["return_std"] == pytest.approx(np.std(returns))  # population std, as numpy
    assert (got["return_min"], got["return_max"]) == (7.25, 30.5)
    assert got["reason"] == "4 episodes" and got["finished_at"] is not None
    info = got["video"]
    assert info["media_type"] == "video/webm" and info["codec"] == "vp9"
    assert info["size_bytes"] == video.stat().st_size and info["frames"] == 12
    assert info["duration_s"] == pytest.approx(1.2)
    assert info["subsampled"] is False and info["cut"] is False

    file = client.get(info["url"])
    assert file.status_code == 200 and file.content == video.read_bytes()
    assert file.headers["content-type"] == "video/webm"
    part = client.get(info["url"], headers={"Range": "bytes=0-99"})
    assert part.status_code == 206 and part.content == video.read_bytes()[:100]
    assert part.headers["content-range"].startswith("bytes 0-99/")

    # Once ended, the token opens nothing but a repeat of the final report.
    again = client.post(f"{job}/status", json={"status": "succeeded"}, headers=_auth(token))
    assert again.status_code == 200
    late = client.post(f"{job}/episodes", json={"episodes": batch[:1]}, headers=_auth(token))
    assert late.status_code == 403
    assert client.get(job, headers=_auth(token)).status_code == 403


def test_job_tokens_open_only_their_own_evaluation(client, experiment, launch, job_token) -> None:
    exp_id = experiment["id"]
    first = _evaluate(client, exp_id).json()["id"]
    second = _evaluate(client, exp_id).json()["id"]
    token = launch(first)
    launch(second)
    assert client.get(f"{API}/jobs/evaluations/{first}").status_code == 401
    assert client.get(f"{API}/jobs/evaluations/{second}", headers=_auth(token)).status_code == 403
    experiment_token = job_token(exp_id)
    assert (
        client.get(f"{API}/jobs/evaluations/{first}", headers=_auth(experiment_token)).status_code
        == 403
    )
    assert client.get(f"{API}/jobs/experiments/{exp_id}", headers=_auth(token)).status_code == 403


def test_bad_job_uploads_are_rejected(client, experiment, launch) -> None:
    eid = _evaluate(client, experiment["id"], episodes=2).json()["id"]
    token = launch(eid)
    job = f"{API}/jobs/evaluations/{eid}"
    out_of_range = [{"index": 2, "episode_return": 1.0, "length": 1}]
    assert _fields(
        client.post(f"{job}/episodes", json={"episodes": out_of_range}, headers=_auth(token))
    ) == {"episodes.index"}
    not_finite = '{"episodes": [{"index": 0, "episode_return": NaN, "length": 1}]}'
    response = client.post(
        f"{job}/episodes",
        content=not_finite,
        headers={**_auth(token), "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    too_big = client.put(
        f"{job}/video",
        params=VIDEO_META,
        content=b"x" * (VIDEO_MAX_BYTES + 1),
        headers=_auth(token),
    )
    assert too_big.status_code == 422 and "larger than" in too_big.json()["error"]["message"]
    bad_meta = client.put(
        f"{job}/video",
        params={**VIDEO_META, "media_type": "image/gif"},
        content=b"x",
        headers=_auth(token),
    )
    assert bad_meta.status_code == 422
    assert client.get(f"{API}/evaluations/{eid}").json()["video"] is None


def test_failure_and_missing_video_are_explained(client, experiment, launch) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id, episodes=1).json()["id"]
    token = launch(eid)
    job = f"{API}/jobs/evaluations/{eid}"
    client.post(
        f"{job}/episodes",
        json={"episodes": [{"index": 0, "episode_return": 3.0, "length": 3}]},
        headers=_auth(token),
    )
    message = "NoRender-v0 does not support render_mode='rgb_array'"
    body = {"status": "succeeded", "video_message": message}
    assert client.post(f"{job}/status", json=body, headers=_auth(token)).status_code == 200
    got = client.get(f"{API}/evaluations/{eid}").json()
    assert got["status"] == "succeeded" and got["returns"] == [3.0]
    assert got["video"] is None and got["video_message"] == message
    missing = client.get(f"{API}/evaluations/{eid}/video")
    assert missing.status_code == 404 and message in missing.json()["error"]["message"]

    failed_id = _evaluate(client, exp_id).json()["id"]
    token = launch(failed_id)
    report = {"status": "failed", "error": "RuntimeError: boom", "log_tail": "Traceback\nboom"}
    client.post(f"{API}/jobs/evaluations/{failed_id}/status", json=report, headers=_auth(token))
    failed = client.get(f"{API}/evaluations/{failed_id}").json()
    assert failed["status"] == "failed" and failed["error"] == "RuntimeError: boom"
    assert failed["log_tail"] == "Traceback\nboom"


def _iterations(client: TestClient, exp_id: int) -> list[int]:
    return [c["iteration"] for c in client.get(f"{API}/experiments/{exp_id}/checkpoints").json()]


def test_retention_keeps_a_checkpoint_until_its_evaluation_ends(
    client, app, experiment, launch, job_token
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id, checkpoint="latest").json()["id"]  # iteration 2
    token = launch(eid)
    experiment_token = job_token(exp_id)
    for iteration in (3, 4):  # keep_checkpoints=2 keeps 3, 4, the best (1) and 2 (evaluated)
        _upload_checkpoint(client, exp_id, experiment_token, iteration, b"later")
    assert sorted(_iterations(client, exp_id)) == [1, 2, 3, 4]
    response = client.get(f"{API}/jobs/evaluations/{eid}/checkpoint", headers=_auth(token))
    assert response.status_code == 200 and response.content == b"archive-2"

    with transaction(app.state.sessionmaker) as session:
        evaluations.transition(session, eid, "failed", "test: ended")
    _upload_checkpoint(client, exp_id, experiment_token, 5, b"later")
    assert sorted(_iterations(client, exp_id)) == [1, 4, 5]
    response = client.get(f"{API}/jobs/evaluations/{eid}/checkpoint", headers=_auth(token))
    assert response.status_code in (403, 404)  # ended: its token no longer opens anything


def test_a_checkpoint_removed_by_retention_is_a_clear_404_for_the_job(
    client, app, experiment, launch, job_token
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id, checkpoint="latest").json()["id"]  # iteration 2
    token = launch(eid)
    with transaction(app.state.sessionmaker) as session:  # as a retention of older code did
        session.execute(sa.delete(Checkpoint).where(Checkpoint.iteration == 2))
    response = client.get(f"{API}/jobs/evaluations/{eid}/checkpoint", headers=_auth(token))
    assert response.status_code == 404
    assert "retention removed it" in response.json()["error"]["message"]


def test_evaluation_every_schedules_video_evaluations_as_checkpoints_arrive(
    client, create_experiment, job_token
) -> None:
    """Every 2nd periodic checkpoint (iterations 4, 8) and the final one (9) get a scheduled
    one-episode video evaluation; a re-upload gets no second one; retention keeps them."""
    config = {**SMALL_CONFIG, "checkpoint_every": 2, "keep_checkpoints": 1}
    exp = create_experiment(config=config, evaluation_every=2)
    assert exp["evaluation_every"] == 2 and "evaluation_every" not in exp["config"]
    token = job_token(exp["id"])
    for iteration in (2, 4, 4, 6, 8):
        _upload_checkpoint(client, exp["id"], token, iteration, b"x")
    _upload_checkpoint(client, exp["id"], token, 9, b"x", final=True)
    items = client.get(f"{API}/experiments/{exp['id']}/evaluations").json()
    assert [e["checkpoint_iteration"] for e in items] == [9, 8, 4]  # newest first
    assert all(e["scheduled"] and e["status"] == "pending" for e in items)
    assert all(e["episodes"] == 1 and e["record_video"] and e["deterministic"] for e in items)
    assert "final checkpoint" in items[0]["reason"]
    assert sorted(_iterations(client, exp["id"])) == [4, 8, 9]  # 2 and 6 went (keep 1)
    user = _evaluate(client, exp["id"], checkpoint="latest").json()
    assert user["scheduled"] is False


# --- delete ---------------------------------------------------------------------------------------


def test_delete_removes_the_evaluation_and_its_video(
    client, app, experiment, launch, tmp_path
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id).json()["id"]
    token = launch(eid)
    client.put(
        f"{API}/jobs/evaluations/{eid}/video",
        params=VIDEO_META,
        content=_webm(tmp_path / "v.webm").read_bytes(),
        headers=_auth(token),
    )
    stored = app.state.settings.data_dir / "evaluations" / str(exp_id) / f"{eid}.webm"
    assert stored.is_file()
    assert client.delete(f"{API}/evaluations/{eid}").status_code == 204  # even while running
    assert not stored.exists()
    assert client.get(f"{API}/evaluations/{eid}").status_code == 404
    assert client.get(f"{API}/jobs/evaluations/{eid}", headers=_auth(token)).status_code == 404


def test_deleting_the_experiment_removes_its_evaluations(
    client, app, experiment, launch, transition, tmp_path
) -> None:
    exp_id = experiment["id"]
    eid = _evaluate(client, exp_id).json()["id"]
    token = launch(eid)
    client.put(
        f"{API}/jobs/evaluations/{eid}/video",
        params=VIDEO_META,
        content=_webm(tmp_path / "v.webm").read_bytes(),
        headers=_auth(token),
    )
    client.post(
        f"{API}/jobs/evaluations/{eid}/episodes",
        json={"episodes": [{"index": 0, "episode_return": 1.0, "length": 1}]},
        headers=_auth(token),
    )
    transition(exp_id, "stopped")
    assert client.delete(f"{API}/experiments/{exp_id}").status_code == 204
    assert client.get(f"{API}/evaluations/{eid}").status_code == 404
    assert not (app.state.settings.data_dir / "evaluations" / str(exp_id)).exists()


# --- live -----------------------------------------------------------------------------------------


def test_changes_are_published_on_the_experiment_stream(client, experiment, launch) -> None:
    exp_id = experiment["id"]
    with client.websocket_connect(f"{API}/experiments/{exp_id}/stream") as ws:
        while ws.receive_json()["type"] != "status":  # the backlog ends with the status
            pass
        created = _evaluate(client, exp_id, episodes=2).json()
        message = ws.receive_json()
        assert message["type"] == "evaluation" and message["evaluation_id"] == created["id"]
        assert message["evaluation"]["status"] == "pending"
        token = launch(created["id"])
        assert ws.receive_json()["evaluation"]["status"] == "running"
        episodes = [{"index": i, "episode_return": 2.0 * (i + 1), "length": 5} for i in range(2)]
        client.post(
            f"{API}/jobs/evaluations/{created['id']}/episodes",
            json={"episodes": episodes},
            headers=_auth(token),
        )
        progress = ws.receive_json()["evaluation"]
        assert progress["episodes_done"] == 2 and progress["return_mean"] == 3.0
        assert "returns" not in progress  # a summary: small enough for a PostgreSQL NOTIFY
        client.delete(f"{API}/evaluations/{created['id']}")
        deleted = ws.receive_json()
        assert deleted["type"] == "evaluation" and deleted["evaluation"] is None
        assert math.isfinite(progress["return_std"])
