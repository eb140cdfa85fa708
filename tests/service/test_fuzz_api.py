"""Schemathesis fuzzes every route of the app's own OpenAPI schema, on SQLite and PostgreSQL.

Checks, for every generated request (valid ones and deliberately invalid ones): no 5xx; every
4xx has the error envelope; a response the schema documents conforms to it; data the schema
forbids is rejected. Job routes are fuzzed with valid job tokens of a seeded experiment and
evaluation, and ids that the generator picks in range are pointed at the seeded ones, so the
requests reach the handlers instead of stopping at a 404.

Examples are bounded and derandomized (the same cases every run, never a flake); requests go
through our own TestClient on the app whose lifespan the fixtures run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
)

from app.core.db import transaction
from app.evaluations import service as evaluations
from app.evaluations.models import Evaluation
from app.experiments import service as experiments
from app.experiments.models import Experiment
from app.main import API_PREFIX, API_ROUTERS

EXAMPLES_PER_MODE = 10  # valid and invalid data each, per operation
ARCHIVE = b"\x1f\x8b fuzzed checkpoint archive"


@schemathesis.serializer("application/gzip", "video/webm", "video/mp4")
def _binary(ctx: Any, value: Any) -> dict[str, Any]:
    """The upload routes stream raw bytes (archives, videos): send what was generated as is."""
    return {"data": value if isinstance(value, bytes) else str(value).encode()}


@dataclass
class Seed:
    """An experiment with a checkpoint and an evaluation, and their job tokens."""

    experiment_id: int
    evaluation_id: int
    experiment_token: str
    evaluation_token: str


def seed(app: FastAPI, client: TestClient) -> Seed:
    created = client.post("/api/v1/experiments", json={"name": "fuzz", "tags": ["fuzz"]})
    assert created.status_code == 201, created.text
    exp_id = created.json()["id"]
    with transaction(app.state.sessionmaker) as session:
        token = experiments.issue_job_token(session, exp_id)
    auth = {"Authorization": f"Bearer {token}"}
    uploaded = client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params={"iteration": 1, "env_steps": 100, "episode_return_mean": 1.5},
        content=ARCHIVE,
        headers=auth,
    )
    assert uploaded.status_code == 200, uploaded.text
    rows = {"rows": [{"step": 100 * i, "time_s": i, "values": {"a": i}} for i in range(5)]}
    assert client.post(f"/api/v1/jobs/experiments/{exp_id}/metrics", json=rows, headers=auth)
    evaluation = client.post(f"/api/v1/experiments/{exp_id}/evaluations", json={})
    assert evaluation.status_code == 201, evaluation.text
    eval_id = evaluation.json()["id"]
    with transaction(app.state.sessionmaker) as session:
        eval_token = evaluations.issue_job_token(session, eval_id)
    return Seed(exp_id, eval_id, token, eval_token)


class Fuzzer:
    """Keeps a live seed (fuzzed stop / delete / status calls may end or remove it)."""

    def __init__(self, app: FastAPI, client: TestClient) -> None:
        self.app = app
        self.client = client
        self.seed = seed(app, client)

    def current(self) -> Seed:
        with transaction(self.app.state.sessionmaker) as session:
            experiment = session.get(Experiment, self.seed.experiment_id)
            evaluation = session.get(Evaluation, self.seed.evaluation_id)
            alive = experiment is not None and not experiment.status.is_finished
            alive = alive and evaluation is not None and not evaluation.status.is_finished
        if not alive:
            self.seed = seed(self.app, self.client)
        return self.seed

    def prepare(self, case: Any) -> dict[str, str]:
        """Point in-range ids (and half the refs) at the seed; the job token the route needs."""
        current = self.current()
        ids = {"experiment_id": current.experiment_id, "evaluation_id": current.evaluation_id}
        for name, value in ids.items():
            generated = (case.path_parameters or {}).get(name)
            if isinstance(generated, int) and 1 <= generated < 2**31:
                case.path_parameters[name] = value
        ref = (case.path_parameters or {}).get("ref")
        if isinstance(ref, str) and len(ref) % 2 == 0:  # half the refs name a real checkpoint
            case.path_parameters["ref"] = "latest"
        if case.path.startswith("/api/v1/jobs/evaluations"):
            return {"Authorization": f"Bearer {current.evaluation_token}"}
        if case.path.startswith("/api/v1/jobs/"):
            return {"Authorization": f"Bearer {current.experiment_token}"}
        return {}


def error_envelope(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx/5xx body is {"error": {"code", "message", "fields"?}}."""
    if response.status_code < 400:
        return None
    body = response.json()
    error = body.get("error") if isinstance(body, dict) else None
    assert isinstance(error, dict), f"no error envelope: {response.text[:300]}"
    assert set(body) == {"error"} and set(error) <= {"code", "message", "fields"}, body
    assert isinstance(error["code"], str) and isinstance(error["message"], str), body
    for item in error.get("fields", []):
        assert isinstance(item["field"], str) and isinstance(item["message"], str), body
    return True


def no_server_error(ctx: Any, response: Any, case: Any) -> bool | None:
    """No 5xx, except the honest 503 of the Ray cluster view on a service without jobs."""
    if (case.method, case.path) == ("GET", "/api/v1/cluster") and response.status_code == 503:
        assert response.json()["error"]["code"] == "unavailable"
        return True
    return not_a_server_error(ctx, response, case)


CHECKS = [
    no_server_error,
    error_envelope,
    response_schema_conformance,
    content_type_conformance,
    negative_data_rejection,
]


@pytest.fixture
def fuzzer(app: FastAPI, client: TestClient) -> Fuzzer:
    return Fuzzer(app, client)


@pytest.fixture
def api_schema(client: TestClient) -> Any:
    return schemathesis.openapi.from_dict(client.get("/openapi.json").json())


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_MODE,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the failure is reported as found
    suppress_health_check=list(HealthCheck),
)


def test_api_never_fails_on_any_input(api_schema: Any, client: TestClient, fuzzer: Fuzzer) -> None:
    """Every operation, valid and invalid data; all failures are reported together."""
    failures: list[str] = []
    operations = [result.ok() for result in api_schema.get_all_operations()]
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @FUZZ_SETTINGS
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                headers = fuzzer.prepare(case)
                kwargs = case.as_transport_kwargs(base_url="http://testserver", headers=headers)
                response = client.request(**to_httpx(kwargs))
                case.validate_response(response, checks=CHECKS, headers=kwargs.get("headers"))

            try:
                run()
            except Unsatisfiable:
                continue  # no parameters and no body: nothing to make invalid
            except (Exception, BaseExceptionGroup) as exc:  # a check failed: report them all
                failures.append(f"{operation.label} ({mode.value}): {exc}"[:3000])
    assert len(operations) >= 25
    assert not failures, "\n\n".join(failures)


def to_httpx(kwargs: dict[str, Any]) -> dict[str, Any]:
    """requests-style transport kwargs -> httpx.Client.request kwargs."""
    out: dict[str, Any] = {
        "method": kwargs["method"],
        "url": kwargs["url"],
        "headers": kwargs.get("headers"),
        "params": kwargs.get("params"),
        "cookies": kwargs.get("cookies"),
    }
    if "json" in kwargs:
        out["json"] = kwargs["json"]
    data = kwargs.get("data")
    if isinstance(data, (bytes, str)):
        out["content"] = data
    elif data is not None:
        out["data"] = data
    if kwargs.get("files"):
        out["files"] = kwargs["files"]
    return out


def test_every_route_is_in_the_fuzzed_schema(api_schema: Any) -> None:
    """No API route is left out of the schema (and so out of the fuzzer)."""
    in_schema = {
        (method.upper(), path)
        for path, item in api_schema.raw_schema["paths"].items()
        for method in item
        if method in ("get", "post", "put", "delete", "patch")
    }
    declared = {
        (method, API_PREFIX + route.path)
        for router in API_ROUTERS
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods
    }
    assert len(declared) >= 30
    assert declared == in_schema
