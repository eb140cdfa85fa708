"""Experiments API: create / validate / list / filter / paginate / stop / delete / lifecycle."""

from __future__ import annotations

import contextlib
import threading

from sqlalchemy import event, func, select

from app.core.db import transaction
from app.core.errors import IllegalTransition
from app.core.layout import experiment_job_dir
from app.experiments import service as experiments
from app.experiments.models import Experiment
from tests.service.conftest import SMALL_CONFIG
from trainer.config import PPOConfig


def test_create_returns_the_experiment_with_defaults_filled_in(client, create_experiment):
    exp = create_experiment("cartpole", tags=["b", "a", "a"])
    assert exp["status"] == "pending"
    assert exp["tags"] == ["a", "b"]
    assert exp["config"]["lr"] == PPOConfig().lr  # default filled in
    assert exp["config"]["num_epochs"] == 2
    assert exp["progress"] == 0.0
    assert [e["to_status"] for e in exp["events"]] == ["pending"]
    fetched = client.get(f"/api/v1/experiments/{exp['id']}").json()
    assert fetched["config"] == exp["config"]


def test_invalid_config_names_each_field_and_stores_nothing(client, app):
    body = {
        "name": "bad",
        "config": {"lr": -1, "stop": {"env_steps": 0}, "no_such_key": 1, "minibatch_size": 4096},
    }
    response = client.post("/api/v1/experiments", json=body)
    assert response.status_code == 422
    fields = {f["field"] for f in response.json()["error"]["fields"]}
    assert {"config.lr", "config.stop.env_steps", "config.no_such_key"} <= fields
    with app.state.sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(Experiment)) == 0


def test_cross_field_config_error_is_reported_against_config(client):
    config = {"minibatch_size": 1024, "train_batch_size_per_learner": 512}
    response = client.post("/api/v1/experiments", json={"name": "x", "config": config})
    assert response.status_code == 422
    [field] = response.json()["error"]["fields"]
    assert field["field"] == "config" and "minibatch_size" in field["message"]


def test_missing_name_is_a_422_with_the_field(client):
    response = client.post("/api/v1/experiments", json={"config": {}})
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "name"


def test_unknown_experiment_is_404_json(client):
    for path in ("", "/events", "/metrics", "/checkpoints", "/logs"):
        response = client.get(f"/api/v1/experiments/12345{path}")
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"


def test_list_filters_and_paginates_newest_first(client, create_experiment, transition):
    ids = [
        create_experiment(f"run-{i}", tags=["even" if i % 2 == 0 else "odd"])["id"]
        for i in range(7)
    ]
    create_experiment("other name")
    transition(ids[0], "queued", "running")

    page = client.get("/api/v1/experiments", params={"limit": 3}).json()
    assert [e["name"] for e in page["items"]] == ["other name", "run-6", "run-5"]
    seen = [e["id"] for e in page["items"]]
    while page["next_cursor"]:
        page = client.get(
            "/api/v1/experiments", params={"limit": 3, "cursor": page["next_cursor"]}
        ).json()
        seen += [e["id"] for e in page["items"]]
    assert seen == sorted(seen, reverse=True) and len(seen) == 8

    by_tag = client.get("/api/v1/experiments", params={"tag": "even"}).json()["items"]
    assert {e["name"] for e in by_tag} == {"run-0", "run-2", "run-4", "run-6"}
    by_name = client.get("/api/v1/experiments", params={"name": "RUN-"}).json()["items"]
    assert len(by_name) == 7
    running = client.get("/api/v1/experiments", params={"status": "running"}).json()["items"]
    assert [e["id"] for e in running] == [ids[0]]
    both = client.get(
        "/api/v1/experiments", params=[("status", "running"), ("status", "pending")]
    ).json()["items"]
    assert len(both) == 8
    comma = client.get("/api/v1/experiments", params={"status": "running,pending"}).json()
    assert len(comma["items"]) == 8
    bad = client.get("/api/v1/experiments", params={"status": "nope"})
    assert bad.status_code == 422


def test_name_filter_treats_wildcards_literally(client, create_experiment):
    create_experiment("100% done")
    create_experiment("1000 done")
    items = client.get("/api/v1/experiments", params={"name": "0%"}).json()["items"]
    assert [e["name"] for e in items] == ["100% done"]


def test_tag_contains_matches_part_of_a_tag_ignoring_case(client, create_experiment):
    create_experiment("a", tags=["Baseline-v2"])
    create_experiment("b", tags=["tuned", "base_x"])
    create_experiment("c", tags=["other"])

    def names(part: str) -> list[str]:
        page = client.get("/api/v1/experiments", params={"tag_contains": part}).json()
        return sorted(e["name"] for e in page["items"])

    assert names("BASE") == ["a", "b"]
    assert names("line-V") == ["a"]
    assert names("e_") == ["b"]  # LIKE's `_` is literal
    assert names("nope") == []
    assert client.get("/api/v1/experiments", params={"tag": "base"}).json()["items"] == []


def test_stop_pending_ends_it_at_once(client, create_experiment):
    exp = create_experiment()
    stopped = client.post(f"/api/v1/experiments/{exp['id']}/stop").json()
    assert stopped["status"] == "stopped" and stopped["finished_at"]
    again = client.post(f"/api/v1/experiments/{exp['id']}/stop")
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "conflict"


def test_stop_running_goes_through_stopping(client, create_experiment, transition, job_token):
    exp = create_experiment()
    transition(exp["id"], "queued", "running")
    response = client.post(f"/api/v1/experiments/{exp['id']}/stop").json()
    assert response["status"] == "stopping"
    # a second stop while in flight is harmless
    assert client.post(f"/api/v1/experiments/{exp['id']}/stop").json()["status"] == "stopping"
    token = job_token(exp["id"])
    headers = {"Authorization": f"Bearer {token}"}
    late = client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/status", json={"status": "running"}, headers=headers
    )
    assert late.json()["status"] == "stopping"
    done = client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/status",
        json={"status": "stopped", "reason": "stopped on request"},
        headers=headers,
    )
    assert done.json()["status"] == "stopped"
    events = client.get(f"/api/v1/experiments/{exp['id']}/events").json()
    assert [(e["from_status"], e["to_status"]) for e in events] == [
        (None, "pending"),
        ("pending", "queued"),
        ("queued", "running"),
        ("running", "stopping"),
        ("stopping", "stopped"),
    ]
    assert events[-1]["reason"] == "stopped on request"


def test_job_status_reports_are_idempotent_and_guarded(client, create_experiment, job_token):
    exp = create_experiment()
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    url = f"/api/v1/jobs/experiments/{exp['id']}/status"
    first = client.post(url, json={"status": "running"}, headers=headers)
    second = client.post(url, json={"status": "running"}, headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.json()["started_at"] == second.json()["started_at"]
    failed = client.post(
        url,
        json={"status": "failed", "error": "ValueError: boom", "log_tail": "line1\nline2"},
        headers=headers,
    ).json()
    assert failed["status"] == "failed"
    assert failed["error"] == "ValueError: boom" and failed["log_tail"] == "line1\nline2"
    assert client.post(url, json={"status": "failed"}, headers=headers).status_code == 200
    late = client.post(url, json={"status": "running"}, headers=headers)
    assert late.status_code == 403  # the end revoked the job token
    assert late.json()["error"]["code"] == "forbidden"
    events = client.get(f"/api/v1/experiments/{exp['id']}/events").json()
    assert [e["to_status"] for e in events] == ["pending", "running", "failed"]


def test_delete_only_finished_and_removes_everything(
    client, create_experiment, transition, job_token, app
):
    exp = create_experiment()
    assert client.delete(f"/api/v1/experiments/{exp['id']}").status_code == 409
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    base = f"/api/v1/jobs/experiments/{exp['id']}"
    client.post(f"{base}/status", json={"status": "running"}, headers=headers)
    rows = {"rows": [{"step": 100, "time_s": 1.0, "values": {"episode_return_mean": 9.0}}]}
    assert client.post(f"{base}/metrics", json=rows, headers=headers).status_code == 200
    client.post(f"{base}/logs", json={"lines": ["hello"]}, headers=headers)
    upload = client.put(
        f"{base}/checkpoints",
        params={"iteration": 1, "env_steps": 100},
        content=b"x" * 10,
        headers=headers,
    )
    assert upload.status_code == 200
    archive_dir = app.state.settings.checkpoints_dir / str(exp["id"])
    assert any(archive_dir.iterdir())
    local_files = experiment_job_dir(
        app.state.settings.data_dir, exp["id"]
    )  # what a job on this machine leaves
    (local_files / "checkpoints").mkdir(parents=True)
    (local_files / "metrics.jsonl").write_text('{"step": 100}\n')
    transition(exp["id"], "succeeded")

    assert client.delete(f"/api/v1/experiments/{exp['id']}").status_code == 204
    assert client.get(f"/api/v1/experiments/{exp['id']}").status_code == 404
    assert not archive_dir.exists()
    assert not local_files.exists()
    with app.state.sessionmaker() as session:
        from app.metrics.models import MetricPoint

        assert session.scalar(select(func.count()).select_from(MetricPoint)) == 0


def test_progress_tracks_the_most_advanced_stop_criterion(client, create_experiment, job_token):
    config = {**SMALL_CONFIG, "stop": {"env_steps": 1000, "episode_return_mean": 200.0}}
    exp = create_experiment(config=config)
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    base = f"/api/v1/jobs/experiments/{exp['id']}"
    client.post(f"{base}/status", json={"status": "running"}, headers=headers)
    rows = [
        {"step": 100, "time_s": 1.0, "values": {"episode_return_mean": 150.0}},
        {"step": 250, "time_s": 2.0, "values": {"episode_return_mean": 40.0}},
    ]
    client.post(f"{base}/metrics", json={"rows": rows}, headers=headers)
    got = client.get(f"/api/v1/experiments/{exp['id']}").json()
    assert got["env_steps"] == 250
    assert got["episode_return_mean"] == 40.0
    assert got["best_return"] == 150.0
    assert got["progress"] == 0.75  # best return 150 of 200 beats 250 of 1000 steps


def test_fork_merges_overrides_and_validates(client, create_experiment):
    exp = create_experiment("base", tags=["t"])
    fork = client.post(
        f"/api/v1/experiments/{exp['id']}/fork",
        json={"overrides": {"lr": 0.001, "stop": {"env_steps": 5000}}},
    )
    assert fork.status_code == 201
    body = fork.json()
    assert body["config"]["lr"] == 0.001 and body["config"]["stop"]["env_steps"] == 5000
    assert body["config"]["num_epochs"] == 2 and body["parent_id"] == exp["id"]
    assert body["tags"] == ["t"] and body["name"] == "base (fork)"
    bad = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={"overrides": {"lr": 5}})
    assert bad.status_code == 422
    assert bad.json()["error"]["fields"][0]["field"] == "config.lr"


def test_resume_needs_a_checkpoint_and_points_at_the_latest(client, create_experiment, job_token):
    exp = create_experiment("src")
    assert client.post(f"/api/v1/experiments/{exp['id']}/resume").status_code == 409
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    base = f"/api/v1/jobs/experiments/{exp['id']}"
    for iteration in (1, 2):
        client.put(
            f"{base}/checkpoints",
            params={"iteration": iteration, "env_steps": iteration * 10},
            content=f"ckpt{iteration}".encode(),
            headers=headers,
        )
    latest = client.get(f"/api/v1/experiments/{exp['id']}/checkpoints").json()[-1]
    resumed = client.post(f"/api/v1/experiments/{exp['id']}/resume")
    assert resumed.status_code == 201
    new = resumed.json()
    assert new["resume_from_checkpoint_id"] == latest["id"] and new["parent_id"] == exp["id"]
    assert new["config"] == exp["config"]
    new_headers = {"Authorization": f"Bearer {job_token(new['id'])}"}
    job_view = client.get(f"/api/v1/jobs/experiments/{new['id']}", headers=new_headers).json()
    assert job_view["resume_from_checkpoint_id"] == latest["id"]
    archive = client.get(
        f"/api/v1/jobs/experiments/{new['id']}/resume_checkpoint", headers=new_headers
    )
    assert archive.content == b"ckpt2"
    # The source's page links the runs made from it: the resume, then a fork.
    fork = client.post(f"/api/v1/experiments/{exp['id']}/fork", json={}).json()
    children = client.get(f"/api/v1/experiments/{exp['id']}").json()["children"]
    assert children == [
        {"id": new["id"], "name": "src (resumed)", "status": "pending", "kind": "resumed"},
        {"id": fork["id"], "name": fork["name"], "status": "pending", "kind": "forked"},
    ]
    assert client.get(f"/api/v1/experiments/{new['id']}").json()["children"] == []


def test_resume_at_the_budget_is_refused_with_the_reason(client, create_experiment, job_token):
    exp = create_experiment("done", config={"env_id": "CartPole-v1", "stop": {"env_steps": 2048}})
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    client.put(
        f"/api/v1/jobs/experiments/{exp['id']}/checkpoints",
        params={"iteration": 4, "env_steps": 2048},
        content=b"final",
        headers=headers,
    )
    refused = client.post(f"/api/v1/experiments/{exp['id']}/resume")
    assert refused.status_code == 422, refused.text
    [field] = refused.json()["error"]["fields"]
    assert field["field"] == "stop.env_steps" and "2,048" in field["message"]
    assert len(client.get("/api/v1/experiments").json()["items"]) == 1  # nothing created
    more = client.post(
        f"/api/v1/experiments/{exp['id']}/resume", json={"stop": {"env_steps": 4096}}
    )
    assert more.status_code == 201, more.text
    assert more.json()["config"]["stop"]["env_steps"] == 4096


def test_logs_tail(client, create_experiment, job_token):
    exp = create_experiment()
    headers = {"Authorization": f"Bearer {job_token(exp['id'])}"}
    lines = [f"iteration {i}" for i in range(30)]
    client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/logs", json={"lines": lines}, headers=headers
    )
    tail = client.get(f"/api/v1/experiments/{exp['id']}/logs", params={"tail": 5}).json()
    assert tail["lines"] == lines[-5:]


def test_health_and_cluster_without_jobs(client):
    health = client.get("/health").json()
    assert {k: health[k] for k in ("status", "database", "ray")} == {
        "status": "ok",
        "database": True,
        "ray": None,
    }
    assert health["live"]["connected"] is True
    assert client.get("/api/v1/health").status_code == 200
    cluster = client.get("/api/v1/cluster")  # a state, not an outage
    assert cluster.status_code == 200
    assert cluster.json()["jobs_enabled"] is False and "disabled" in cluster.json()["message"]
    assert client.get("/redoc").status_code == 404  # no page that needs a CDN offline


def test_conflicting_transitions_from_two_threads_cannot_both_succeed(app, create_experiment):
    """Two workers end the same running experiment differently at the same moment: the second
    must see the first one's outcome (its locking read waits) and get IllegalTransition."""
    exp_id = create_experiment()["id"]
    sessionmaker = app.state.sessionmaker
    for target in ("queued", "running"):
        with transaction(sessionmaker) as session:
            experiments.transition(session, exp_id, target, "test")
    # Without a lock both workers would read `running` before either writes. Each waits here
    # (briefly) for the other before writing; with the lock the other is still blocked.
    both_read = threading.Barrier(2, timeout=1.0)
    workers: set[threading.Thread] = set()

    def before_write(session, flush_context, instances) -> None:  # type: ignore[no-untyped-def]
        if threading.current_thread() in workers:
            with contextlib.suppress(threading.BrokenBarrierError):
                both_read.wait()

    outcomes: dict[str, str] = {}

    def end_as(target: str) -> None:
        try:
            with transaction(sessionmaker) as session:
                experiments.transition(session, exp_id, target, f"worker: {target}")
            outcomes[target] = "ok"
        except IllegalTransition:
            outcomes[target] = "illegal"

    workers.update(threading.Thread(target=end_as, args=(t,)) for t in ("succeeded", "failed"))
    event.listen(sessionmaker, "before_flush", before_write)
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
    finally:
        event.remove(sessionmaker, "before_flush", before_write)
    assert sorted(outcomes.values()) == ["illegal", "ok"], outcomes
    [winner] = [t for t, outcome in outcomes.items() if outcome == "ok"]
    with sessionmaker() as session:
        assert experiments.get(session, exp_id).status.value == winner
        assert [e.to_status for e in experiments.events(session, exp_id)][-1:] == [winner]
        assert len(experiments.events(session, exp_id)) == 4
