"""Text no backend can store (lone UTF-16 surrogates in JSON, NUL in query strings) and JSON
nested past its bound: every write route answers 422 naming the field, stores nothing, and every
list keeps answering 200 (on SQLite and PostgreSQL)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.text_guard import first_bad_string

LONE = "\ud83d"  # the first half of an emoji's surrogate pair, alone


def post_raw(client: TestClient, url: str, body: Any, **headers: str) -> Any:
    """`body` as JSON text with \\u escapes (ensure_ascii), as a hostile client writes it:
    httpx's own encoder would refuse a lone surrogate before sending."""
    return client.post(
        url, content=json.dumps(body), headers={"Content-Type": "application/json", **headers}
    )


def assert_422_naming(response: Any, field: str) -> None:
    assert response.status_code == 422, response.text
    fields = response.json()["error"]["fields"]
    assert [f["field"] for f in fields] == [field], fields
    assert "surrogate" in fields[0]["message"] or "NUL" in fields[0]["message"]


def assert_lists_answer(client: TestClient) -> None:
    for url in ("/api/v1/experiments", "/api/v1/sweeps"):
        response = client.get(url)
        assert response.status_code == 200, response.text


def test_lone_surrogates_are_refused_on_every_write_route(
    client: TestClient,
    create_experiment: Callable[..., dict[str, Any]],
    job_token: Callable[[int], str],
) -> None:
    exp = create_experiment()
    eid = exp["id"]
    job = {"Authorization": f"Bearer {job_token(eid)}"}
    cases: list[tuple[str, str, Any, dict[str, str], str]] = [
        ("POST", "/api/v1/experiments", {"name": "n", "config": {"env_config": {"k": LONE}}}, {},
         "config.env_config.k"),
        ("POST", "/api/v1/experiments", {"name": "n", "config": {"env_config": {LONE: 1}}}, {},
         "config.env_config.\\ud83d"),
        ("POST", "/api/v1/experiments", {"name": f"run {LONE}"}, {}, "name"),
        ("POST", "/api/v1/experiments", {"name": "n", "tags": ["ok", LONE]}, {}, "tags.1"),
        ("PATCH", f"/api/v1/experiments/{eid}", {"notes": LONE}, {}, "notes"),
        ("POST", f"/api/v1/experiments/{eid}/fork", {"overrides": {"env_config": {"k": LONE}}},
         {}, "overrides.env_config.k"),
        ("POST", "/api/v1/sweeps", {"name": "s", "config": {"env_config": {"k": LONE}}}, {},
         "config.env_config.k"),
        ("POST", "/api/v1/sweeps", {"name": "s", "grid": {"env_config.k": ["a", LONE]}}, {},
         "grid.env_config.k.1"),
        ("POST", "/api/v1/presets/resolve", {"config": {"env_id": LONE}}, {}, "config.env_id"),
        ("POST", f"/api/v1/jobs/experiments/{eid}/logs", {"lines": ["ok", LONE]}, job, "lines.1"),
        ("POST", f"/api/v1/jobs/experiments/{eid}/metrics",
         {"rows": [{"step": 1, "time_s": 1, "values": {f"a{LONE}": 1}}]}, job,
         "rows.0.values.a\\ud83d"),
        ("POST", f"/api/v1/jobs/experiments/{eid}/status",
         {"status": "failed", "error": LONE}, job, "error"),
    ]  # fmt: skip
    for method, url, body, headers, field in cases:
        response = client.request(
            method,
            url,
            content=json.dumps(body),
            headers={"Content-Type": "application/json", **headers},
        )
        assert_422_naming(response, field)
        assert_lists_answer(client)
    items = client.get("/api/v1/experiments").json()["items"]
    assert [e["id"] for e in items] == [eid]  # nothing stored
    assert client.get("/api/v1/sweeps").json()["items"] == []
    got = client.get(f"/api/v1/experiments/{eid}").json()
    assert got["status"] == "pending" and got["notes"] == exp["notes"]
    assert client.get(f"/api/v1/experiments/{eid}/logs").status_code == 200


def test_surrogate_pairs_and_other_text_are_stored(client: TestClient) -> None:
    """A valid pair written as escapes is an ordinary character: it round-trips."""
    body = {"name": "\ud83d\ude00 run", "config": {"env_config": {"k": "\ud83d\ude00"}}}
    created = post_raw(client, "/api/v1/experiments", body)
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "😀 run"
    assert_lists_answer(client)


def test_deep_sweep_configs_and_grids_are_a_422(client: TestClient) -> None:
    for depth in (40, 900):
        deep = "[" * depth + "]" * depth
        for body, field in (
            (f'{{"name": "s", "config": {{"env_config": {{"a": {deep}}}}}}}', "config"),
            (f'{{"name": "s", "grid": {{"env_config.a": [{deep}]}}}}', "grid"),
        ):
            response = client.post(
                "/api/v1/sweeps", content=body, headers={"Content-Type": "application/json"}
            )
            assert response.status_code == 422, response.text
            fields = [f["field"] for f in response.json()["error"]["fields"]]
            assert fields == [field], fields
    assert client.get("/api/v1/sweeps").json()["items"] == []


def test_nul_in_any_query_parameter_is_a_422(client: TestClient) -> None:
    for url in (
        "/api/v1/experiments?q=%00",
        "/api/v1/sweeps?x=a%00b",
        "/api/v1/experiments?a%00=1",
    ):
        response = client.get(url)
        assert response.status_code == 422, response.text
    assert_422_naming(client.get("/api/v1/experiments?q=%00"), "query.q")
    assert client.get("/api/v1/experiments?q=%01").status_code == 200


def test_first_bad_string_names_the_path() -> None:
    assert first_bad_string({"a": [1, {"b": "ok"}, f"x{LONE}"]}) == (
        "a.2",
        first_bad_string(LONE)[1],  # type: ignore[index]
    )
    assert first_bad_string({"a": [json.loads('"\\ud83d\\ude00"')], "b": None}) is None  # a pair
    deep: Any = LONE
    for _ in range(5000):  # deeper than the recursion limit
        deep = [deep]
    assert first_bad_string(deep) is not None


# Lone surrogates and NUL as often as any other code point.
TEXT = st.text(
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
    | st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)
    | st.sampled_from(["\x00", "\U0001f600", "\u202e"]),
    max_size=12,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=TEXT, where=st.sampled_from(["name", "tag", "env_config", "sweep", "notes", "fork"]))
def test_any_unicode_in_any_text_field_never_breaks_a_list(
    client: TestClient, text: str, where: str
) -> None:
    """Arbitrary code points (lone surrogates and NUL included) in each text field of the write
    routes: a 2xx or a 422, never a 5xx, and both lists still answer afterwards."""
    base = client.post("/api/v1/experiments", json={"name": "base"}).json()
    experiments, base_url = "/api/v1/experiments", f"/api/v1/experiments/{base['id']}"
    bodies = {
        "name": ("POST", experiments, {"name": text or "x"}),
        "tag": ("POST", experiments, {"name": "t", "tags": [text]}),
        "env_config": ("POST", experiments, {"name": "e", "config": {"env_config": {text: text}}}),
        "sweep": (
            "POST",
            "/api/v1/sweeps",
            {"name": text or "s", "config": {"env_config": {"k": text}}},
        ),
        "notes": ("PATCH", base_url, {"notes": text}),
        "fork": ("POST", f"{base_url}/fork", {"name": text or "f"}),
    }
    method, url, body = bodies[where]
    response = client.request(
        method, url, content=json.dumps(body), headers={"Content-Type": "application/json"}
    )
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["error"]["fields"], response.text
    assert_lists_answer(client)
    if response.status_code < 300 and method == "POST" and url.endswith("/experiments"):
        got = client.get(f"/api/v1/experiments/{response.json()['id']}")
        assert got.status_code == 200, got.text
