"""Service speed: ingest throughput, ingest -> websocket latency, experiment list, long queries.

Serves the API in a subprocess (`rollout serve`, jobs disabled) on SQLite and on PostgreSQL (a
fresh database on 127.0.0.1:5432, or a throwaway server) and measures over real HTTP:

- ingest: metric batches (100 rows x 20 metrics) POSTed back to back by one job client;
- latency: one row per POST while a websocket client listens; time from just before the POST
  to the websocket message (p50, p99);
- list: GET /experiments (first page of 50, and a name filter) with 10,000 experiments stored;
- query: one 1,000,000-point series downsampled to 2,000 points (GET .../metrics).

    .venv/bin/python -m benchmarks.service_bench [--write docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert, text
from websockets.sync.client import connect

from app.core.db import make_engine, make_sessionmaker, transaction
from app.experiments import service as experiments
from app.experiments.models import Experiment
from app.experiments.schemas import ExperimentCreate
from app.metrics.service import upsert_points
from benchmarks.docs_section import write_section
from tests.serve_process import rollout_serve

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ".venv/bin/python -m benchmarks.service_bench --write docs/benchmarks.md"
START, END = "<!-- service_bench:start -->", "<!-- service_bench:end -->"


@contextlib.contextmanager
def serve(database_url: str, data_dir: Path) -> Iterator[str]:
    """`rollout serve` (jobs off) in its own process group, stopped by pid."""
    env = {
        "ROLLOUT_DATABASE_URL": database_url,
        "ROLLOUT_JOBS_ENABLED": "false",
        "ROLLOUT_API_TOKEN": None,
    }
    with rollout_serve(data_dir, env=env) as served:
        yield served.url


def _new_experiment(sessionmaker: Any, name: str) -> tuple[int, str]:
    with transaction(sessionmaker) as session:
        exp = experiments.create(session, ExperimentCreate(name=name, config={}))
    with transaction(sessionmaker) as session:
        experiments.transition(session, exp.id, "running", "benchmark")
        return exp.id, experiments.issue_job_token(session, exp.id)


def bench_ingest(url: str, sessionmaker: Any, batches: int = 60, repeats: int = 3) -> float:
    """Median points/s over `repeats` passes of new points (one pass is noisy here)."""
    exp_id, token = _new_experiment(sessionmaker, "ingest")
    names = [f"metric_{i:02d}" for i in range(20)]

    def body(b: int) -> str:
        rows = [
            {
                "step": (b * 100 + r) * 512,
                "time_s": float(b),
                "values": {n: random.random() for n in names},
            }
            for r in range(100)
        ]
        return json.dumps({"rows": rows})

    passes = [[body(p * batches + b + 1) for b in range(batches)] for p in range(repeats)]
    points = batches * 100 * 21  # + time_s
    headers = {"Authorization": f"Bearer {token}", "content-type": "application/json"}
    rates = []
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        path = f"/api/v1/jobs/experiments/{exp_id}/metrics"
        client.post(path, content=body(0)).raise_for_status()  # warm-up
        for bodies in passes:
            start = time.perf_counter()
            for content in bodies:
                client.post(path, content=content).raise_for_status()
            rates.append(points / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_latency(url: str, sessionmaker: Any, samples: int = 300) -> tuple[float, float]:
    exp_id, token = _new_experiment(sessionmaker, "latency")
    ws_url = url.replace("http", "ws", 1) + f"/api/v1/experiments/{exp_id}/stream"
    sent: dict[int, float] = {}
    latencies: list[float] = []
    with connect(ws_url, open_timeout=10) as ws:
        while json.loads(ws.recv(timeout=10))["type"] != "status":
            pass

        def send() -> None:
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                for i in range(samples):
                    sent[i + 1] = time.perf_counter()
                    row = {"step": i + 1, "time_s": 0.0, "values": {"loss": 1.0}}
                    client.post(f"/api/v1/jobs/experiments/{exp_id}/metrics", json={"rows": [row]})
                    time.sleep(0.01)

        sender = threading.Thread(target=send)
        sender.start()
        while len(latencies) < samples:
            message = json.loads(ws.recv(timeout=30))
            if message["type"] == "metrics":
                now = time.perf_counter()
                latencies.extend(now - sent[s] for s in message["step"])
        sender.join(timeout=60)
    latencies.sort()
    return statistics.median(latencies) * 1000, latencies[int(0.99 * (len(latencies) - 1))] * 1000


def _timed_get(client: httpx.Client, path: str, params: dict[str, Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        client.get(path, params=params).raise_for_status()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def bench_list(url: str, engine: Any, count: int = 10_000) -> tuple[float, float]:
    from app.core.db import utcnow

    config = ExperimentCreate(name="x", config={}).config
    from trainer.config import PPOConfig

    full = PPOConfig.model_validate(config).to_json_dict()
    now = utcnow()
    rows = [
        {
            "name": f"sweep-{i:05d}",
            "config": full,
            "status": "succeeded",
            "created_at": now,
            "updated_at": now,
            "env_steps": 100_000,
            "best_return": 500.0,
        }
        for i in range(count)
    ]
    with engine.begin() as conn:
        conn.execute(insert(Experiment), rows)
    with httpx.Client(base_url=url, timeout=60) as client:
        client.get("/api/v1/experiments").raise_for_status()
        first_page = _timed_get(client, "/api/v1/experiments", {"limit": 50}, 20)
        filtered = _timed_get(client, "/api/v1/experiments", {"limit": 50, "name": "sweep-09"}, 20)
    return first_page, filtered


def bench_query(url: str, sessionmaker: Any, engine: Any, points: int = 1_000_000) -> float:
    exp_id, _ = _new_experiment(sessionmaker, "long series")
    rng = random.Random(0)
    chunk = 100_000
    for start in range(0, points, chunk):
        batch = [(i * 512, "loss", rng.gauss(0, 1)) for i in range(start, start + chunk)]
        with transaction(sessionmaker) as session:
            upsert_points(session, exp_id, batch)
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("ANALYZE"))
    with httpx.Client(base_url=url, timeout=60) as client:
        path = f"/api/v1/experiments/{exp_id}/metrics"
        params = {"names": "loss", "max_points": 2000}
        got = client.get(path, params=params).json()["series"]["loss"]
        assert 500 <= len(got["step"]) <= 2000, len(got["step"])
        return _timed_get(client, path, params, 20)


def run_backend(name: str, database_url: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="rollout-bench-") as tmp:
        data_dir = Path(tmp)
        engine = make_engine(database_url)
        with serve(database_url, data_dir) as url:
            sessionmaker = make_sessionmaker(engine)
            result: dict[str, float] = {}
            result["ingest_points_per_s"] = bench_ingest(url, sessionmaker)
            print(f"[{name}] ingest: {result['ingest_points_per_s']:,.0f} points/s", flush=True)
            p50, p99 = bench_latency(url, sessionmaker)
            result["latency_p50_ms"], result["latency_p99_ms"] = p50, p99
            print(f"[{name}] ingest -> websocket: p50 {p50:.1f} ms, p99 {p99:.1f} ms", flush=True)
            first, filtered = bench_list(url, engine)
            result["list_ms"], result["list_filtered_ms"] = first, filtered
            print(
                f"[{name}] GET /experiments (10k stored): {first:.1f} ms, "
                f"name filter {filtered:.1f} ms",
                flush=True,
            )
            result["query_ms"] = bench_query(url, sessionmaker, engine)
            print(
                f"[{name}] 1M-point series -> 2000 points: {result['query_ms']:.1f} ms", flush=True
            )
        engine.dispose()
    return result


def markdown(results: dict[str, dict[str, float]]) -> str:
    def row(label: str, key: str, fmt: str, target: str) -> str:
        cells = " | ".join(format(results[b][key], fmt) for b in results)
        return f"| {label} | {cells} | {target} |"

    head = " | ".join(results)
    lines = [
        START,
        "### API (benchmarks/service_bench.py)",
        "",
        f"`{COMMAND}` — {dt.date.today().isoformat()}, {platform.machine()}, "
        f"{os.cpu_count()} cores shared with other work (load average "
        f"{os.getloadavg()[1]:.1f} over the last 5 minutes; numbers vary about 2x between runs "
        "on this machine). The API "
        "runs as `rollout serve` (one uvicorn process, jobs disabled); the client is a separate "
        "process.",
        "",
        f"| measure | {head} | target |",
        "|---|" + "---|" * len(results) + "---|",
        row(
            "ingest, 100 rows x 21 points per POST (points/s, median of 3 passes)",
            "ingest_points_per_s",
            ",.0f",
            "> 50,000",
        ),
        row("ingest -> websocket client, p50 (ms)", "latency_p50_ms", ".1f", ""),
        row("ingest -> websocket client, p99 (ms)", "latency_p99_ms", ".1f", "< 100"),
        row("GET /experiments, 10,000 stored, first page of 50 (ms)", "list_ms", ".1f", ""),
        row("GET /experiments?name=..., 10,000 stored (ms)", "list_filtered_ms", ".1f", ""),
        row(
            "1,000,000-point series -> 2,000 points (ms, median of 20)", "query_ms", ".1f", "< 100"
        ),
        "",
        "On PostgreSQL live messages go through LISTEN/NOTIFY (the default there, so that "
        "several API processes can share the database); each ingest then also sends a NOTIFY "
        "and the process's listener reads the batch back for its websocket clients. "
        "Long queries read per-bucket min/max rollups kept at ingest (app/metrics/rollups.py) "
        "instead of scanning the points. On PostgreSQL the query is measured after `ANALYZE` "
        "(autovacuum runs it shortly after a bulk load; with stale statistics right after "
        "loading a million rows the planner may scan the whole series once).",
        END,
    ]
    return "\n".join(lines)


def write(path: Path, section: str) -> None:
    write_section(path, START, END, section, anchor="## Service", heading="## Service")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, help="update this markdown file's Service section")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for backend in args.backends.split(","):
        if backend == "sqlite":
            with tempfile.TemporaryDirectory(prefix="rollout-bench-db-") as tmp:
                results["SQLite"] = run_backend("SQLite", f"sqlite:///{tmp}/rollout.db")
        else:
            from tests.service.postgres import fresh_database

            with fresh_database() as url:
                results["PostgreSQL"] = run_backend("PostgreSQL", url)
    section = markdown(results)
    print(section)
    if args.write:
        write(args.write, section)


if __name__ == "__main__":
    main()
