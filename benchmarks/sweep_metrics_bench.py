"""Sweep group metrics speed: GET /api/v1/sweeps/{id}/metrics for 100 members x 10k points
each (target < 200 ms).

Seeds a SQLite database the way the service stores data: a sweep of 20 learning rates x 5
seeds (100 members), each with 10,000 `episode_return_mean` points one PPO iteration (1,000
env steps) apart, written through the metrics ingest path (points + rollups). Then times the
endpoint through the real app (httpx in-process: routing, the read-only session, the reads,
numpy and JSON included) and prints the median and the spread.

    .venv/bin/python -m benchmarks.sweep_metrics_bench [--members 100] [--points 10000]
        [--repeats 15] [--grid 200] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from app.core.config import Settings
from app.core.db import transaction
from app.main import create_app
from app.metrics.service import upsert_points
from app.sweeps import service as sweeps
from app.sweeps.schemas import SweepCreate

TARGET_MS = 200.0
SEEDS = 5
STEP = 1000


def seed_data(client: TestClient, members: int, points: int) -> int:
    groups = max(1, members // SEEDS)
    body = SweepCreate(
        name="bench",
        config={"env_id": "CartPole-v1"},
        grid={"lr": [float(f"{1e-4 * (i + 1):.4g}") for i in range(groups)]},
        seeds=list(range(SEEDS)),
        max_parallel=4,
    )
    sessionmaker = client.app.state.sessionmaker  # type: ignore[attr-defined]
    with transaction(sessionmaker) as session:
        sweep_id = sweeps.create(session, body).id
        ids = [e.id for e in sweeps.members(session, sweep_id)]
    rng = np.random.default_rng(0)
    steps = (np.arange(1, points + 1) * STEP).tolist()
    for exp_id in ids:
        curve = np.cumsum(rng.normal(0.05, 1.0, size=points)).tolist()
        with transaction(sessionmaker) as session:
            upsert_points(
                session,
                exp_id,
                [(s, "episode_return_mean", v) for s, v in zip(steps, curve, strict=True)],
            )
    return sweep_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=100)
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--grid", type=int, default=200, help="steps of the common grid")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp)
        settings = Settings(
            data_dir=data_dir,
            database_url=f"sqlite:///{data_dir / 'rollout.db'}",
            jobs_enabled=False,
            frontend_dir=data_dir / "no-frontend",
            allowed_hosts=["testserver"],  # the in-process client's Host header
        )
        with TestClient(create_app(settings)) as client:
            t0 = time.perf_counter()
            sweep_id = seed_data(client, args.members, args.points)
            print(
                f"seeded {args.members} x {args.points} points in {time.perf_counter() - t0:.1f} s"
            )
            url = f"/api/v1/sweeps/{sweep_id}/metrics"
            params = {"names": "episode_return_mean", "points": args.grid}
            client.get(url, params=params).raise_for_status()  # warm
            times = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                response = client.get(url, params=params)
                times.append((time.perf_counter() - t) * 1000)
                response.raise_for_status()
            body = response.json()["metrics"]["episode_return_mean"]
    median = statistics.median(times)
    result = {
        "members": args.members,
        "points_per_member": args.points,
        "groups": len(body["groups"]),
        "grid_steps": len(body["step"]),
        "median_ms": round(median, 1),
        "min_ms": round(min(times), 1),
        "max_ms": round(max(times), 1),
        "target_ms": TARGET_MS,
        "met": median < TARGET_MS,
    }
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
