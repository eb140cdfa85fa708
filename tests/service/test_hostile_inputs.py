"""Hand-written hostile inputs: whatever a client sends, the answer is a 4xx with the error
envelope, never a 5xx (on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from app.core.body_limit import BodyLimitMiddleware
from app.core.config import Settings
from app.core.db import transaction
from app.evaluations import service as evaluations
from app.experiments import service as experiments
from app.jobs.ray_head import free_ports
from app.main import create_app
from tests.service.conftest import store_raw_config

HUGE = 99999999999999999999  # beyond int64
INT64_MAX = 2**63 - 1
ID_MAX = 2**31 - 1  # ids are INTEGER columns (32-bit on PostgreSQL)


def assert_error(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    """The status, and the one error envelope (naming `field` when given)."""
    request = response.request
    assert response.status_code == status, f"{request.method} {request.url}: {response.text}"
    error = response.json()["error"]
    assert isinstance(error["code"], str) and isinstance(error["message"], str)
    if field is not None:
        names = [f["field"] for f in error.get("fields", [])]
        assert any(name == field or name.endswith("." + field) for name in names), error
    return error


def post_json(client: TestClient, url: str, text: str) -> Any:
    """Raw JSON text (NaN / Infinity literals as Python's json module reads them)."""
    return client.post(url, content=text, headers={"Content-Type": "application/json"})


def upload(client: TestClient, exp_id: int, token: str, data: Any, **params: Any) -> Any:
    """A checkpoint upload as a job sends it."""
    return client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params={"iteration": 1, "env_steps": 100, **params},
        content=data,
        headers={"Authorization": f"Bearer {token}"},
    )


# --- tags ----------------------------------------------------------------------------------


def test_fork_validates_tags_like_create(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    for tags in ([""], ["   "], ["x" * 65], ["t"] * 33):
        response = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"tags": tags})
        assert_error(response, 422, "tags")
        create = client.post("/api/v1/experiments", json={"name": "x", "tags": tags})
        assert_error(create, 422, "tags")


def test_fork_cleans_tags_like_create(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment(tags=["a"])
    response = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"tags": [" b ", "b"]})
    assert response.status_code == 201, response.text
    assert response.json()["tags"] == ["b"]


# --- ids and steps beyond int64 ------------------------------------------------------------

EXPERIMENT_GETS = [
    "/api/v1/experiments/{id}",
    "/api/v1/experiments/{id}/events",
    "/api/v1/experiments/{id}/logs",
    "/api/v1/experiments/{id}/metrics",
    "/api/v1/experiments/{id}/metrics/names",
    "/api/v1/experiments/{id}/checkpoints",
    "/api/v1/experiments/{id}/checkpoints/latest/download",
    "/api/v1/experiments/{id}/evaluations",
    "/api/v1/evaluations/{id}",
    "/api/v1/evaluations/{id}/video",
]
EXPERIMENT_WRITES = [
    ("POST", "/api/v1/experiments/{id}/stop", None),
    ("POST", "/api/v1/experiments/{id}/resume", None),
    ("POST", "/api/v1/experiments/{id}/fork", {}),
    ("POST", "/api/v1/experiments/{id}/evaluations", {}),
    ("DELETE", "/api/v1/experiments/{id}", None),
    ("DELETE", "/api/v1/evaluations/{id}", None),
]
JOB_ROUTES = [
    ("GET", "/api/v1/jobs/experiments/{id}", None),
    ("POST", "/api/v1/jobs/experiments/{id}/status", {"status": "running"}),
    ("POST", "/api/v1/jobs/experiments/{id}/logs", {"lines": ["x"]}),
    ("POST", "/api/v1/jobs/experiments/{id}/metrics", {"rows": []}),
    ("GET", "/api/v1/jobs/experiments/{id}/resume_checkpoint", None),
    ("PUT", "/api/v1/jobs/experiments/{id}/checkpoints?iteration=1&env_steps=1", None),
    ("GET", "/api/v1/jobs/evaluations/{id}", None),
    ("GET", "/api/v1/jobs/evaluations/{id}/checkpoint", None),
    ("POST", "/api/v1/jobs/evaluations/{id}/status", {"status": "running"}),
    ("POST", "/api/v1/jobs/evaluations/{id}/episodes", {"episodes": []}),
]


def test_ids_beyond_their_column_are_a_422(client: TestClient) -> None:
    for path in EXPERIMENT_GETS:
        for value in (HUGE, INT64_MAX + 1, ID_MAX + 1, -HUGE, 0):
            assert_error(client.get(path.format(id=value)), 422)


def test_largest_id_is_a_404(client: TestClient) -> None:
    for path in EXPERIMENT_GETS:
        assert_error(client.get(path.format(id=ID_MAX)), 404)


def test_ids_beyond_their_column_on_writes_and_job_routes(client: TestClient) -> None:
    headers = {"Authorization": "Bearer not-a-token"}
    for method, path, body in EXPERIMENT_WRITES + JOB_ROUTES:
        response = client.request(method, path.format(id=HUGE), json=body, headers=headers)
        assert_error(response, 422)


def test_list_cursor_out_of_range_is_a_422(client: TestClient) -> None:
    for cursor in (str(HUGE), str(ID_MAX + 1), str(-HUGE), "0", "1" * 5000, "12abc", "-"):
        response = client.get("/api/v1/experiments", params={"cursor": cursor})
        assert_error(response, 422, "cursor")


def test_metric_steps_beyond_int64_are_a_422(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    url = f"/api/v1/experiments/{exp['id']}/metrics"
    for param in ("step_min", "step_max"):
        assert_error(client.get(url, params={param: HUGE}), 422, param)
        assert_error(client.get(url, params={param: -HUGE}), 422, param)
        assert client.get(url, params={param: INT64_MAX}).status_code == 200


def test_checkpoint_upload_numbers_beyond_columns_are_a_422(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
) -> None:
    exp = create_experiment()
    token = job_token(exp["id"])
    for param, value in (("iteration", 2**31), ("iteration", HUGE), ("env_steps", HUGE)):
        response = upload(client, exp["id"], token, b"x", **{param: value})
        assert_error(response, 422, param)
    response = upload(client, exp["id"], token, b"x", episode_return_mean="nan")
    assert_error(response, 422, "episode_return_mean")


# --- configs past their resource bounds, non-finite numbers ---------------------------------


def test_config_beyond_resource_bounds_is_a_422_naming_the_fields(client: TestClient) -> None:
    body = {
        "name": "huge",
        "config": {
            "train_batch_size_per_learner": 2_000_000_000,
            "model": {"hidden_sizes": [100_000, 100_000], "log_std_init": 5.0},
        },
    }
    error = assert_error(client.post("/api/v1/experiments", json=body), 422)
    fields = {f["field"] for f in error["fields"]}
    assert {
        "config.train_batch_size_per_learner",
        "config.model.hidden_sizes",
        "config.model.log_std_init",
    } <= fields
    assert client.get("/api/v1/experiments").json()["items"] == []  # nothing stored


NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e999")  # all read by Python's JSON parser


def test_non_finite_numbers_in_a_config_are_a_422(client: TestClient) -> None:
    templates = [
        ('"lr": {v}', "config.lr"),
        ('"stop": {{"episode_return_mean": {v}}}', "config.stop.episode_return_mean"),
        ('"env_config": {{"x": {v}}}', "config.env_config"),
    ]
    for literal in NON_FINITE:
        for template, field in templates:
            config = "{" + template.format(v=literal) + "}"
            response = post_json(
                client, "/api/v1/experiments", f'{{"name": "n", "config": {config}}}'
            )
            assert_error(response, 422, field)
            resolve = post_json(client, "/api/v1/presets/resolve", f'{{"config": {config}}}')
            assert_error(resolve, 422, field)
    assert client.get("/api/v1/experiments").json()["items"] == []


def test_non_finite_numbers_in_fork_overrides_are_a_422(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    url = f"/api/v1/experiments/{exp['id']}/fork"
    for literal in NON_FINITE:
        assert_error(post_json(client, url, f'{{"overrides": {{"gamma": {literal}}}}}'), 422)
        body = f'{{"overrides": {{"env_config": {{"a": [{literal}]}}}}}}'
        assert_error(post_json(client, url, body), 422)


# --- request body limits: 413 before anything parses the body -------------------------------

SMALL_BODY = 4096
SMALL_UPLOAD = 64 * 1024


@pytest.fixture
def small_limits_app(make_settings: Callable[..., Any]) -> Any:
    settings = make_settings(max_request_body_bytes=SMALL_BODY, max_upload_bytes=SMALL_UPLOAD)
    return create_app(settings)


@pytest.fixture
def small_limits_client(small_limits_app: Any) -> Iterator[TestClient]:
    with TestClient(small_limits_app) as test_client:
        yield test_client


def chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    """A body without Content-Length (sent chunked)."""
    for start in range(0, total, size):
        yield b" " * min(size, total - start)


def test_declared_body_over_the_limit_is_a_413(small_limits_client: TestClient) -> None:
    body = json.dumps({"name": "x" * SMALL_BODY}).encode()
    response = small_limits_client.post(
        "/api/v1/experiments", content=body, headers={"Content-Type": "application/json"}
    )
    assert assert_error(response, 413)["code"] == "payload_too_large"
    assert small_limits_client.get("/api/v1/experiments").json()["items"] == []


def test_chunked_body_past_the_limit_is_a_413(small_limits_client: TestClient) -> None:
    response = small_limits_client.post(
        "/api/v1/experiments",
        content=chunks(SMALL_BODY * 4),
        headers={"Content-Type": "application/json"},
    )
    assert response.request.headers.get("transfer-encoding") == "chunked"
    assert assert_error(response, 413)["code"] == "payload_too_large"


def test_a_body_under_the_limit_is_served(small_limits_client: TestClient) -> None:
    response = small_limits_client.post("/api/v1/experiments", json={"name": "x" * 100})
    assert response.status_code == 201, response.text


def test_uploads_have_their_own_larger_limit(
    small_limits_app: Any, small_limits_client: TestClient
) -> None:
    client = small_limits_client
    exp = client.post("/api/v1/experiments", json={"name": "u"}).json()
    with transaction(small_limits_app.state.sessionmaker) as session:
        token = experiments.issue_job_token(session, exp["id"])
    settings = small_limits_app.state.settings
    fits = upload(client, exp["id"], token, b"a" * (SMALL_UPLOAD - 1))
    assert fits.status_code == 200, fits.text  # 16x the JSON limit
    declared = upload(client, exp["id"], token, b"a" * (SMALL_UPLOAD + 1), iteration=2)
    assert assert_error(declared, 413)["code"] == "payload_too_large"
    streamed = upload(client, exp["id"], token, chunks(SMALL_UPLOAD * 2), iteration=3)
    assert_error(streamed, 413)
    listed = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json()
    assert [c["iteration"] for c in listed] == [1]
    leftovers = [p.name for p in settings.checkpoints_dir.rglob("*") if p.name.endswith(".part")]
    assert leftovers == []


async def _call_asgi(app: Any, headers: list[tuple[bytes, bytes]], body: bytes) -> list[Any]:
    sent: list[Any] = []
    scope = {"type": "http", "method": "POST", "path": "/api/v1/experiments", "headers": headers}
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Any:
        return messages.pop(0)

    async def send(message: Any) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


@pytest.mark.parametrize(
    ("length", "status"), [(b"99999999999999999999999999", 413), (b"12abc", 400), (b"-1", 400)]
)
def test_bad_content_length_is_answered_without_calling_the_app(length: bytes, status: int) -> None:
    called = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        called.append(scope)

    middleware = BodyLimitMiddleware(app, max_body_bytes=1024, max_upload_bytes=4096)
    sent = asyncio.run(_call_asgi(middleware, [(b"content-length", length)], b"{}"))
    assert called == []
    assert sent[0]["status"] == status
    assert "error" in json.loads(sent[1]["body"])


# --- deep JSON, huge ints, unicode and NUL ---------------------------------------------------


def test_100k_nested_arrays_are_a_4xx(client: TestClient) -> None:
    body = "[" * 100_000 + "]" * 100_000
    for url in ("/api/v1/experiments", "/api/v1/presets/resolve"):
        response = post_json(client, url, body)
        assert 400 <= response.status_code < 500, response.text
        assert_error(response, response.status_code)


def test_deep_json_inside_a_config_is_a_422(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    for depth in (40, 900):  # past the config's bound; just under the interpreter's limit
        deep = "[" * depth + "]" * depth
        for template in (
            '{{"name": "n", "config": {{"env_config": {{"a": {d}}}}}}}',
            '{{"name": "n", "config": {{"unknown": {d}}}}}',
        ):
            assert_error(post_json(client, "/api/v1/experiments", template.format(d=deep)), 422)
        resolve = f'{{"config": {{"env_config": {{"a": {deep}}}}}}}'
        assert_error(post_json(client, "/api/v1/presets/resolve", resolve), 422)
        fork = f'{{"overrides": {{"env_config": {{"a": {deep}}}}}}}'
        assert_error(post_json(client, f"/api/v1/experiments/{exp['id']}/fork", fork), 422)


def test_huge_ints_in_bodies_are_a_4xx(client: TestClient) -> None:
    cases = [
        ('"seed": 1' + "0" * 50, 422, "config.seed"),
        ('"seed": 1' + "0" * 5000, 400, None),  # past Python's int-parsing limit: unreadable
        ('"stop": {"env_steps": 1' + "0" * 30 + "}", 422, "config.stop.env_steps"),
        ('"lr": 1' + "0" * 400, 422, "config.lr"),  # a float too big for a double
    ]
    for config, status, field in cases:
        body = f'{{"name": "n", "config": {{{config}}}}}'
        assert_error(post_json(client, "/api/v1/experiments", body), status, field)


def test_hostile_job_reports_are_a_422(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
) -> None:
    cases = [
        ("metrics", {"rows": [{"step": 10**30, "time_s": 1, "values": {"a": 1}}]}, "step"),
        ("metrics", {"rows": [{"step": 1, "time_s": 1, "values": {"a": 10**400}}]}, None),
        ("metrics", {"rows": [{"step": 1, "time_s": 1, "values": {"a\x00b": 1}}]}, None),
        ("logs", {"lines": ["ok", "a\x00b"]}, "lines.1"),
        ("status", {"status": "failed", "error": "x\x00"}, "error"),
        ("status", {"status": "failed", "reason": "\x00"}, "reason"),
    ]
    exp = create_experiment()
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    for path, body, field in cases:
        url = f"/api/v1/jobs/experiments/{exp['id']}/{path}"
        assert_error(client.post(url, json=body, headers=headers), 422, field)
    assert client.get(f"/api/v1/experiments/{exp['id']}").json()["status"] == "pending"


UNICODE_NAMES = [
    "😀 run 🚀",
    "שלום עולם",  # right to left
    "مرحبا",
    "\u202eevil\u202c",  # right-to-left override
    "e\u0301\u200d",  # combining accent, zero-width joiner
    "\U0001d54f" * 200,  # 200 characters outside the BMP
]


def test_unicode_names_round_trip(client: TestClient) -> None:
    for name in UNICODE_NAMES:
        created = client.post("/api/v1/experiments", json={"name": name, "tags": [name[:64]]})
        assert created.status_code == 201, created.text
        got = client.get(f"/api/v1/experiments/{created.json()['id']}").json()
        assert got["name"] == name and got["tags"] == [name[:64].strip()]
        found = client.get("/api/v1/experiments", params={"name": name}).json()["items"]
        assert [e["id"] for e in found] == [created.json()["id"]]


def test_nul_is_a_422_naming_the_field(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    """PostgreSQL cannot store U+0000: both backends refuse it the same way, by field."""
    exp = create_experiment()
    for body, field in (({"name": "a\x00b"}, "name"), ({"name": "n", "tags": ["t\x00"]}, "tags")):
        error = assert_error(client.post("/api/v1/experiments", json=body), 422, field)
        assert "NUL" in str(error["fields"])
        url = f"/api/v1/experiments/{exp['id']}/fork"
        assert_error(client.post(url, json=body), 422, field)
    for param in ("name", "tag"):
        assert_error(client.get("/api/v1/experiments", params={param: "a\x00"}), 422, param)
    metrics = f"/api/v1/experiments/{exp['id']}/metrics"
    assert_error(client.get(metrics, params={"names": "a\x00"}), 422, "names")


# --- path tricks in checkpoint refs ----------------------------------------------------------

REF_TRICKS = [
    "..",
    "...",
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
    "%2Fetc%2Fpasswd",
    "..%5C..%5Cwindows",
    "1%00",
    "%00",
    "best%2F..%2Flatest",
    "01",
    "+1",
    "1.0",
    "%C2%B9",  # superscript one: a digit to str.isdigit
    "99999999999999999999",
]


@pytest.fixture
def with_checkpoint(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
) -> dict[str, Any]:
    exp = create_experiment()
    token = job_token(exp["id"])
    response = upload(client, exp["id"], token, b"archive")
    assert response.status_code == 200, response.text
    return {"experiment": exp, "checkpoint": response.json()}


def test_path_tricks_in_checkpoint_refs_never_serve_a_file(
    client: TestClient, with_checkpoint: dict[str, Any]
) -> None:
    exp_id = with_checkpoint["experiment"]["id"]
    base = f"/api/v1/experiments/{exp_id}/checkpoints"
    for ref in REF_TRICKS:
        response = client.get(f"{base}/{ref}/download")
        assert_error(response, 404)
        assert response.headers["content-type"].startswith("application/json")
    for path in ("/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "//etc/passwd", "/"):
        response = client.get(f"{base}{path}/download")
        assert 400 <= response.status_code < 500, response.text
        assert_error(response, response.status_code)
    checkpoint_id = with_checkpoint["checkpoint"]["id"]
    assert client.get(f"{base}/{checkpoint_id}/download").content == b"archive"


EVALUATION_REF_TRICKS = [
    "../1", "/etc/passwd", "..", "1/../2", "best/../latest", "1\x00", "", " 1", "\u00b9", -1,
    2**70, "9" * 30, True, 1.5, None, [1],
]  # fmt: skip


def test_path_tricks_in_evaluation_refs_are_a_422(
    client: TestClient, with_checkpoint: dict[str, Any]
) -> None:
    exp_id = with_checkpoint["experiment"]["id"]
    url = f"/api/v1/experiments/{exp_id}/evaluations"
    for ref in EVALUATION_REF_TRICKS:
        assert_error(client.post(url, json={"checkpoint": ref}), 422, "checkpoint")
    assert client.get(url).json() == []


def test_websocket_ids_and_steps_beyond_int64_are_refused(
    client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    for url in (
        f"/api/v1/experiments/{HUGE}/stream",
        f"/api/v1/experiments/{exp['id']}/stream?since_step={HUGE}",
        f"/api/v1/experiments/{exp['id']}/stream?since_step=-{HUGE}",
    ):
        with pytest.raises(WebSocketDisconnect) as info, client.websocket_connect(url) as ws:
            ws.receive_json()
        assert info.value.code == 1008, url  # closed before accept: a real client sees 403
    with client.websocket_connect(f"/api/v1/experiments/{exp['id']}/stream") as ws:
        assert ws.receive_json()["type"] == "status"


def test_a_stored_config_that_no_longer_validates_is_still_listed(
    app: Any, client: TestClient, create_experiment: Callable[..., dict[str, Any]]
) -> None:
    exp = create_experiment()
    odd = {"env_id": 5, "stop": "soon", "train_batch_size_per_learner": 2_000_000_000}
    store_raw_config(app.state.sessionmaker, exp["id"], odd)
    assert client.get(f"/api/v1/experiments/{exp['id']}").json()["config"] == odd
    assert [e["id"] for e in client.get("/api/v1/experiments").json()["items"]] == [exp["id"]]


def test_a_real_server_answers_413_to_a_client_still_sending(tmp_path: Any) -> None:
    """Through uvicorn and a socket: the client reads the 413 (not a reset connection), and
    the server goes on serving."""
    port = free_ports(1)[0]
    settings = Settings(
        data_dir=tmp_path / "data", jobs_enabled=False, frontend_dir=tmp_path / "x", port=port
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "server did not start"
        time.sleep(0.05)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            headers = {"Content-Type": "application/json"}
            declared = client.post(
                "/api/v1/experiments", content=b" " * 64 * 1024**2, headers=headers
            )
            assert assert_error(declared, 413)["code"] == "payload_too_large"
            streamed = client.post(
                "/api/v1/experiments", content=chunks(16 * 1024**2, 1024**2), headers=headers
            )
            assert assert_error(streamed, 413)["code"] == "payload_too_large"
            assert client.get("/api/v1/experiments").json()["items"] == []
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_video_with_a_vanishing_frame_rate_is_a_422(
    app: Any, client: TestClient, with_checkpoint: dict[str, Any]
) -> None:
    """Found by the fuzzer: fps 5e-324 made the video's duration infinite (null in JSON)."""
    exp_id = with_checkpoint["experiment"]["id"]
    created = client.post(f"/api/v1/experiments/{exp_id}/evaluations", json={})
    eval_id = created.json()["id"]
    with transaction(app.state.sessionmaker) as session:
        token = evaluations.issue_job_token(session, eval_id)
    meta = {
        "codec": "vp9", "media_type": "video/webm", "frames": 10, "width": 4, "height": 4,
        "source_frames": 10, "frame_step": 1, "cut": False,
    }  # fmt: skip
    url = f"/api/v1/jobs/evaluations/{eval_id}/video"
    headers = {"Authorization": f"Bearer {token}"}
    for fps in (5e-324, 0, "inf", "nan"):
        response = client.put(url, params={**meta, "fps": fps}, content=b"v", headers=headers)
        assert_error(response, 422, "fps")
    ok = client.put(url, params={**meta, "fps": 0.5}, content=b"v", headers=headers)
    assert ok.status_code == 200, ok.text
    assert ok.json()["duration_s"] == 20.0
