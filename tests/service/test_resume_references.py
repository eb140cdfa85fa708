"""A resume always loads the checkpoint it was created from: ids are never reused, and no
checkpoint an unfinished resume needs can be deleted (by retention or by deleting its
experiment) — on SQLite and PostgreSQL, through the API."""

from __future__ import annotations

from sqlalchemy import select, text, update

from app.core.db import downgrade, make_engine, migrate, transaction
from app.experiments.models import Experiment


def _upload(client, exp_id, token, iteration, data, ret=None):
    params = {"iteration": iteration, "env_steps": iteration * 1000}
    if ret is not None:
        params["episode_return_mean"] = ret
    response = client.put(
        f"/api/v1/jobs/experiments/{exp_id}/checkpoints",
        params=params,
        content=data,
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.text
    return response.json()


def _resume_archive(client, exp_id, token):
    return client.get(
        f"/api/v1/jobs/experiments/{exp_id}/resume_checkpoint",
        headers={"Authorization": f"Bearer {token}"},
    )


def test_a_queued_resume_never_loads_another_experiments_weights(
    client, create_experiment, job_token, transition
):
    """The finding: resume A (B waits), delete A, upload a checkpoint of C. Before, SQLite gave
    C's checkpoint the deleted id and B's job would have loaded C's weights."""
    a = create_experiment("source")["id"]
    token_a = job_token(a)
    _upload(client, a, token_a, 1, b"weights of A, iteration 1")
    latest = _upload(client, a, token_a, 2, b"weights of A, iteration 2")
    transition(a, "stopped")

    resumed = client.post(f"/api/v1/experiments/{a}/resume")
    assert resumed.status_code == 201, resumed.text
    b = resumed.json()
    assert b["resume_from_checkpoint_id"] == latest["id"] and b["status"] == "pending"

    refused = client.delete(f"/api/v1/experiments/{a}")
    assert refused.status_code == 409, refused.text
    assert (
        f"experiment {b['id']} (pending) will resume from checkpoint {latest['id']}"
        in (refused.json()["error"]["message"])
    )
    got = _resume_archive(client, b["id"], job_token(b["id"]))
    assert got.status_code == 200 and got.content == b"weights of A, iteration 2"

    # Once the resume has ended, the source may go; the lineage keeps its parent.
    assert client.post(f"/api/v1/experiments/{b['id']}/stop").json()["status"] == "stopped"
    assert client.delete(f"/api/v1/experiments/{a}").status_code == 204
    after = client.get(f"/api/v1/experiments/{b['id']}").json()
    assert after["resume_from_checkpoint_id"] is None and after["parent_id"] == a

    c = create_experiment("newcomer")["id"]
    assert c > b["id"]
    uploaded = _upload(client, c, job_token(c), 1, b"weights of C")
    assert uploaded["id"] > latest["id"]  # never the deleted id again


def test_experiment_ids_are_never_reused(client, create_experiment, transition):
    first = create_experiment("first")["id"]
    last = create_experiment("last")["id"]
    transition(last, "stopped")
    assert client.delete(f"/api/v1/experiments/{last}").status_code == 204
    again = create_experiment("again")["id"]
    assert again > last > first


def test_retention_keeps_the_checkpoint_an_unfinished_resume_needs(
    client, create_experiment, job_token, transition
):
    """A running experiment keeps uploading while a resume of it waits for its turn."""
    a = create_experiment("running source")["id"]  # keep_checkpoints = 2
    transition(a, "queued", "running")
    token_a = job_token(a)
    _upload(client, a, token_a, 1, b"a1")
    needed = _upload(client, a, token_a, 2, b"a2")
    b = client.post(f"/api/v1/experiments/{a}/resume").json()
    assert b["resume_from_checkpoint_id"] == needed["id"]
    for iteration in (3, 4, 5):
        _upload(client, a, token_a, iteration, f"a{iteration}".encode())

    listed = client.get(f"/api/v1/experiments/{a}/checkpoints").json()
    assert [c["iteration"] for c in listed] == [2, 4, 5]  # 2 is pinned beyond keep=2
    got = _resume_archive(client, b["id"], job_token(b["id"]))
    assert got.status_code == 200 and got.content == b"a2"

    transition(b["id"], "queued", "running", "succeeded")
    _upload(client, a, token_a, 6, b"a6")
    listed = client.get(f"/api/v1/experiments/{a}/checkpoints").json()
    assert [c["iteration"] for c in listed] == [5, 6]
    assert client.get(f"/api/v1/experiments/{b['id']}").json()["resume_from_checkpoint_id"] is None


def test_a_resume_refuses_a_checkpoint_of_another_experiment(
    client, app, create_experiment, job_token
):
    """Defence in depth for rows written before the foreign key existed."""
    a = create_experiment("a")["id"]
    _upload(client, a, job_token(a), 1, b"a1")
    b = client.post(f"/api/v1/experiments/{a}/resume").json()
    other = create_experiment("other")["id"]
    foreign = _upload(client, other, job_token(other), 1, b"other")
    with transaction(app.state.sessionmaker) as session:
        session.execute(
            update(Experiment)
            .where(Experiment.id == b["id"])
            .values(resume_from_checkpoint_id=foreign["id"])
        )
    got = _resume_archive(client, b["id"], job_token(b["id"]))
    assert got.status_code == 404
    assert f"checkpoint {foreign['id']} of experiment {a} no longer exists" in got.text


def test_upgrade_settles_wrong_references_and_keeps_every_row(database_url):
    """0002 -> 0003 on a database with a dangling resume reference and data in child tables:
    the waiting resume fails saying why, nothing else is lost (SQLite rebuilds tables)."""
    engine = make_engine(database_url)
    try:
        migrate(engine)
        downgrade(engine, "0002")  # the session's PostgreSQL database is at head already
        with engine.begin() as conn:
            exe = conn.exec_driver_sql
            now = "2026-01-01 00:00:00"
            experiments = ((1, "stopped", None), (2, "pending", 7), (3, "succeeded", 8))
            for exp_id, status, resume in experiments:
                exe(
                    "INSERT INTO experiments (id, name, config, status, created_at, updated_at, "
                    "parent_id, resume_from_checkpoint_id) VALUES "
                    f"({exp_id}, 'e{exp_id}', '{{}}', '{status}', '{now}', '{now}', "
                    f"{1 if resume else 'NULL'}, {resume or 'NULL'})"
                )
            exe(
                "INSERT INTO checkpoints (id, experiment_id, iteration, env_steps, size_bytes, "
                f"sha256, path, created_at) VALUES (5, 1, 1, 10, 3, 'x', '1/a.tar.gz', '{now}')"
            )
            exe("INSERT INTO metric_points VALUES (1, 'loss', 10, 0.5)")
            exe("INSERT INTO experiment_tags VALUES (1, 'keep')")
            exe(f"INSERT INTO log_lines (experiment_id, at, line) VALUES (1, '{now}', 'kept line')")
        migrate(engine)
        with engine.connect() as conn:
            rows = {
                r.id: r
                for r in conn.execute(
                    select(Experiment.id, Experiment.status, Experiment.resume_from_checkpoint_id)
                )
            }
            assert rows[2].status == "failed" and rows[2].resume_from_checkpoint_id is None
            assert rows[3].status == "succeeded" and rows[3].resume_from_checkpoint_id is None
            error = conn.execute(text("SELECT error FROM experiments WHERE id = 2")).scalar()
            assert "checkpoint 7 it was to resume from no longer exists" in error
            events = conn.execute(
                text("SELECT from_status, to_status FROM experiment_events WHERE experiment_id = 2")
            ).all()
            assert [tuple(e) for e in events] == [("pending", "failed")]
            for table in ("metric_points", "experiment_tags", "log_lines", "checkpoints"):
                assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == 1, table
        downgrade(engine, "0002")
        migrate(engine)
    finally:
        engine.dispose()


def test_sqlite_tables_whose_ids_are_shown_never_reuse_them(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'ids.db'}")
    try:
        migrate(engine)
        with engine.connect() as conn:
            sql = dict(conn.exec_driver_sql("SELECT name, sql FROM sqlite_master").all())
        for table in ("experiments", "checkpoints", "experiment_events", "log_lines"):
            assert "AUTOINCREMENT" in sql[table], table
        assert "REFERENCES checkpoints" in sql["experiments"]
        assert "ON DELETE RESTRICT" in sql["experiments"]
    finally:
        engine.dispose()
