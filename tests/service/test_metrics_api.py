"""Metrics: idempotent ingest, queries, spike-preserving downsampling."""

from __future__ import annotations

from sqlalchemy import event, text

from app.core.db import transaction
from app.experiments import service as experiments
from app.metrics import rollups
from app.metrics import service as metrics
from app.metrics.downsample import raw_rows
from trainer.wire import MetricsRow


def _ingest(client, exp_id, token, rows):
    return client.post(
        f"/api/v1/jobs/experiments/{exp_id}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {token}"},
    )


def test_same_batch_twice_stores_no_duplicates(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    rows = [
        {"step": s, "time_s": s / 100, "values": {"episode_return_mean": s / 10, "kl": 0.01}}
        for s in (100, 200, 300)
    ]
    first = _ingest(client, exp["id"], token, rows)
    assert first.status_code == 200
    assert first.json() == {"rows": 3, "points": 9}  # 2 values + time_s per row
    assert _ingest(client, exp["id"], token, rows).status_code == 200
    got = client.get(f"/api/v1/experiments/{exp['id']}/metrics").json()["series"]
    assert got["episode_return_mean"] == {"step": [100, 200, 300], "value": [10.0, 20.0, 30.0]}
    assert got["time_s"]["value"] == [1.0, 2.0, 3.0]
    names = client.get(f"/api/v1/experiments/{exp['id']}/metrics/names").json()["names"]
    assert names == ["episode_return_mean", "kl", "time_s"]


def test_retried_point_overwrites_its_value(client, create_experiment, job_token):
    exp = create_experiment()
    token = job_token(exp["id"])
    _ingest(client, exp["id"], token, [{"step": 5, "time_s": 0, "values": {"kl": 1.0}}])
    _ingest(client, exp["id"], token, [{"step": 5, "time_s": 0, "values": {"kl": 2.0}}])
    got = client.get(f"/api/v1/experiments/{exp['id']}/metrics", params={"names": "kl"}).json()
    assert got["series"]["kl"] == {"step": [5], "value": [2.0]}


def test_non_finite_values_are_rejected_by_field(client, create_experiment, job_token):
    exp = create_experiment()
    body = '{"rows": [{"step": 1, "time_s": 0, "values": {"kl": NaN}}]}'
    response = client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/metrics",
        content=body,
        headers={
            "Authorization": f"Bearer {job_token(exp['id'])}",
            "content-type": "application/json",
        },
    )
    assert response.status_code == 422
    fields = response.json()["error"]["fields"]
    assert fields == [{"field": "rows.0.values.kl", "message": "Input should be a finite number"}]
    # An over-long name is named as such (not as a bad value); nothing of the batch is stored.
    long_name = "m" * 129
    rows = [{"step": 2, "time_s": 0, "values": {"kl": 0.1, long_name: 1.0}}]
    response = client.post(
        f"/api/v1/jobs/experiments/{exp['id']}/metrics",
        json={"rows": rows},
        headers={"Authorization": f"Bearer {job_token(exp['id'])}"},
    )
    assert response.status_code == 422
    (field,) = response.json()["error"]["fields"]
    assert field["message"] == "a metric name is 1 to 128 characters"
    assert field["field"] == f"rows.0.values.{'m' * 128}"
    stored = client.get(f"/api/v1/experiments/{exp['id']}/metrics").json()["series"]
    assert stored == {}


def test_a_row_has_one_clock_its_time_s_field(client, create_experiment, job_token):
    """A `time_s` among the values (an older job sent the clock twice) gives way to the row's."""
    exp = create_experiment()
    rows = [{"step": 3, "time_s": 1.5, "values": {"kl": 0.1, "time_s": 9.0}}]
    assert _ingest(client, exp["id"], job_token(exp["id"]), rows).status_code == 200
    got = client.get(f"/api/v1/experiments/{exp['id']}/metrics").json()["series"]
    assert got["time_s"]["value"] == [1.5]


def test_query_by_names_and_step_range(client, create_experiment, job_token):
    exp = create_experiment()
    rows = [{"step": s, "time_s": 0, "values": {"a": s, "b": -s}} for s in range(0, 100, 10)]
    _ingest(client, exp["id"], job_token(exp["id"]), rows)
    got = client.get(
        f"/api/v1/experiments/{exp['id']}/metrics",
        params={"names": "a", "step_min": 20, "step_max": 50},
    ).json()
    assert list(got["series"]) == ["a"]
    assert got["series"]["a"]["step"] == [20, 30, 40, 50]


def test_a_single_spike_survives_1000x_reduction(client, create_experiment, app):
    """100,000 points down to 100: every bucket keeps its min and max point, spikes included."""
    exp = create_experiment()
    n, spike_at, dip_at = 100_000, 61_237, 7_001
    with transaction(app.state.sessionmaker) as session:
        record = experiments.get(session, exp["id"])
        batch = []
        for i in range(n):
            value = 1.0 + (i % 7) * 0.01
            if i == spike_at:
                value = 1000.0
            if i == dip_at:
                value = -500.0
            batch.append(MetricsRow(step=i * 10, time_s=0.0, values={"loss": value}))
        metrics.ingest(session, record, batch)
    got = client.get(
        f"/api/v1/experiments/{exp['id']}/metrics", params={"names": "loss", "max_points": 100}
    ).json()
    series = got["series"]["loss"]
    assert got["downsampled"]["loss"] is True
    assert 25 <= len(series["step"]) <= 100
    assert series["step"] == sorted(series["step"])
    assert max(series["value"]) == 1000.0
    assert series["step"][series["value"].index(1000.0)] == spike_at * 10
    assert min(series["value"]) == -500.0
    assert series["step"][series["value"].index(-500.0)] == dip_at * 10
    # the first and last points of the range are inside the first and last buckets
    assert series["step"][0] < 10 * n // 25 and series["step"][-1] > 10 * n * 24 // 25


def _brute_force(points, lo, hi, width):
    """Min and max point of each absolute bucket of `width` steps inside [lo, hi]."""
    buckets = {}
    for step, value in points:
        if lo <= step <= hi:
            cur = buckets.setdefault(step // width, [step, value, step, value])
            if (value, step) < (cur[1], cur[0]):
                cur[0], cur[1] = step, value
            if value > cur[3] or (value == cur[3] and step < cur[2]):
                cur[2], cur[3] = step, value
    out = {}
    for b in buckets.values():
        out[b[0]] = b[1]
        out[b[2]] = b[3]
    return sorted(out.items())


def test_rollup_query_equals_brute_force_min_max(client, create_experiment, app):
    """Random series, random ranges: the rollup answer is exactly min/max per bucket."""
    import random

    rng = random.Random(7)
    exp = create_experiment()
    step, points = 0, []
    for _ in range(30_000):
        step += rng.choice((1, 7, 64, 500))
        points.append((step, round(rng.gauss(0, 1), 6)))
    with transaction(app.state.sessionmaker) as session:
        # two batches, the second overlapping the first's buckets
        metrics.upsert_points(session, exp["id"], [(s, "x", v) for s, v in points[:17_000]])
    with transaction(app.state.sessionmaker) as session:
        metrics.upsert_points(session, exp["id"], [(s, "x", v) for s, v in points[17_000:]])
    compared = 0
    for _ in range(8):
        lo = rng.randrange(0, step // 2)
        hi = rng.randrange(lo + 1, step + 1)
        max_points = rng.choice((20, 100, 400))
        got = client.get(
            f"/api/v1/experiments/{exp['id']}/metrics",
            params={"names": "x", "max_points": max_points, "step_min": lo, "step_max": hi},
        ).json()["series"]["x"]
        in_range = [p for p in points if lo <= p[0] <= hi]
        if len(in_range) <= max_points:
            assert got["step"] == [p[0] for p in in_range]
            continue
        real_lo, real_hi = in_range[0][0], in_range[-1][0]
        width = 1 << rollups.level_shift(rollups.choose_level(real_lo, real_hi, max_points))
        if real_hi - real_lo + 1 < width:
            continue  # too short for the rollups: bucketed from raw points instead
        assert list(zip(got["step"], got["value"], strict=True)) == _brute_force(
            points, real_lo, real_hi, width
        )
        assert len(got["step"]) <= max_points
        compared += 1
    assert compared >= 4


def test_short_series_is_returned_whole(client, create_experiment, job_token):
    exp = create_experiment()
    rows = [{"step": s, "time_s": 0, "values": {"a": float(s)}} for s in range(10)]
    _ingest(client, exp["id"], job_token(exp["id"]), rows)
    got = client.get(
        f"/api/v1/experiments/{exp['id']}/metrics", params={"names": "a", "max_points": 10}
    ).json()
    assert got["series"]["a"]["step"] == list(range(10)) and got["downsampled"]["a"] is False


def test_one_read_for_all_series_answers_like_a_read_per_series(
    client, create_experiment, job_token, app
):
    """The batched read (every series at once, when the range holds few enough steps) gives
    exactly what the per-series read gives, for every mix of names, budgets and ranges."""
    exp = create_experiment()
    rows = [
        {
            "step": 100 * s,
            "time_s": s / 10,
            "values": {
                "loss": ((s * 7919) % 101) / 10,
                **({"sparse": float(s)} if s % 3 == 0 else {}),
                **({"late": -float(s)} if s > 250 else {}),
            },
        }
        for s in range(1, 301)
    ]
    assert _ingest(client, exp["id"], job_token(exp["id"]), rows).status_code == 200
    cases = [
        {},
        {"max_points": 1000},
        {"max_points": 300},
        {"max_points": 299},  # one step too many for one read: per series, bucketed
        {"max_points": 40},
        {"names": "sparse,late,missing", "max_points": 400},
        {"names": "late,loss,late"},
        {"step_min": 5_000, "step_max": 9_000, "max_points": 50},
        {"step_min": 5_000, "step_max": 9_000, "max_points": 20},
        {"step_min": 29_500},
        {"step_max": 50, "names": "loss"},
    ]
    for params in cases:
        got = client.get(f"/api/v1/experiments/{exp['id']}/metrics", params=params)
        assert got.status_code == 200, got.text
        body = got.json()
        wanted = (
            list(dict.fromkeys(params["names"].split(",")))
            if "names" in params
            else ["late", "loss", "sparse", "time_s"]
        )
        assert list(body["series"]) == wanted, params
        budget = metrics.point_budget(params.get("max_points"), len(wanted))
        with app.state.sessionmaker() as session:
            for name in wanted:
                series, reduced = metrics.series(
                    session,
                    exp["id"],
                    name,
                    max_points=budget,
                    step_min=params.get("step_min"),
                    step_max=params.get("step_max"),
                )
                assert body["series"][name] == series.model_dump(), (params, name)
                assert body["downsampled"][name] is reduced, (params, name)


def test_a_dashboard_query_costs_a_few_statements_whatever_the_series_count(
    client, create_experiment, job_token, app, monkeypatch
):
    exp = create_experiment()
    rows = [
        {"step": s, "time_s": s, "values": {f"metric_{i:02d}": float(i) for i in range(40)}}
        for s in range(1, 51)
    ]
    assert _ingest(client, exp["id"], job_token(exp["id"]), rows).status_code == 200
    statements: list[str] = []

    def count(conn, cursor, statement, *args):
        statements.append(statement)

    raw_reads: list[object] = []  # reads that go to the driver's cursor, past the events

    def counted(connection, stmt):
        raw_reads.append(stmt)
        return raw_rows(connection, stmt)

    monkeypatch.setattr(metrics, "raw_rows", counted)
    engine = app.state.engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        got = client.get(f"/api/v1/experiments/{exp['id']}/metrics", params={"max_points": 500})
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert got.status_code == 200
    assert len(got.json()["series"]) == 41
    # exists + names + step count, then one read of all points (not two reads per series)
    selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 3, selects
    assert len(raw_reads) == 1


def _row_writes(session, backend: str) -> int:
    """Rows written so far: on SQLite by this connection (the point's own insert included),
    on PostgreSQL by this transaction to the rollups table."""
    if backend == "sqlite":
        return session.connection().connection.driver_connection.total_changes
    return session.execute(
        text(
            "SELECT n_tup_ins + n_tup_upd FROM pg_stat_xact_user_tables "
            "WHERE relname = 'metric_rollups'"
        )
    ).scalar_one()


def test_a_point_inside_a_buckets_range_leaves_the_rollup_rows_alone(
    client, create_experiment, app, backend
):
    """Only widened buckets are rewritten (no dead row versions for coarse buckets)."""
    exp = create_experiment()
    with transaction(app.state.sessionmaker) as session:
        metrics.upsert_points(session, exp["id"], [(1, "x", 0.0), (2, "x", 1.0)])

    def writes(step: int, value: float) -> int:
        with transaction(app.state.sessionmaker) as session:
            before = _row_writes(session, backend)
            metrics.upsert_points(session, exp["id"], [(step, "x", value)])
            return _row_writes(session, backend) - before

    point = 1 if backend == "sqlite" else 0
    assert writes(3, 0.5) == point  # inside [0, 1] at every level
    assert writes(4, 2.0) == point + rollups.LEVELS  # a new maximum at every level


def test_metric_summaries_give_last_min_and_max_per_run(client, create_experiment, job_token):
    first, second, silent = create_experiment(), create_experiment(), create_experiment()
    _ingest(
        client,
        first["id"],
        job_token(first["id"]),
        [
            {"step": s, "time_s": s, "values": {"vf_loss": v, "kl": 0.1}}
            for s, v in ((100, 5.0), (200, 0.5), (300_000_000, 2.0))  # far apart: many buckets
        ],
    )
    _ingest(
        client,
        second["id"],
        job_token(second["id"]),
        [{"step": 10, "time_s": 1, "values": {"vf_loss": -1.0}}],
    )
    ids = f"{first['id']},{second['id']},{silent['id']},999999"
    response = client.get("/api/v1/metric-summaries", params={"ids": ids, "names": "vf_loss,nope"})
    assert response.status_code == 200, response.text
    got = response.json()["summaries"]
    assert got == {
        str(first["id"]): {"vf_loss": {"last": 2.0, "min": 0.5, "max": 5.0}},
        str(second["id"]): {"vf_loss": {"last": -1.0, "min": -1.0, "max": -1.0}},
    }
    # A later point of another series only: vf_loss has no value at the latest step.
    _ingest(
        client,
        second["id"],
        job_token(second["id"]),
        [{"step": 20, "time_s": 2, "values": {"kl": 0.3}}],
    )
    got = client.get(
        "/api/v1/metric-summaries", params={"ids": str(second["id"]), "names": "vf_loss,kl"}
    ).json()["summaries"][str(second["id"])]
    assert got == {
        "vf_loss": {"last": None, "min": -1.0, "max": -1.0},
        "kl": {"last": 0.3, "min": 0.3, "max": 0.3},
    }


def test_metric_summaries_refuse_bad_ids_and_too_many_names(client):
    for ids in ("1,x", "0", "1,-2", "99999999999", "\u0661"):  # an Arabic-Indic digit
        response = client.get("/api/v1/metric-summaries", params={"ids": ids, "names": "kl"})
        assert response.status_code == 422, (ids, response.text)
        assert response.json()["error"]["fields"][0]["field"] == "ids"
    names = ",".join(f"m{i}" for i in range(metrics.MAX_SUMMARY_NAMES + 1))
    response = client.get("/api/v1/metric-summaries", params={"ids": "1", "names": names})
    assert response.status_code == 422
    assert response.json()["error"]["fields"][0]["field"] == "names"
    missing = client.get("/api/v1/metric-summaries", params={"ids": "1"})
    assert missing.status_code == 422
