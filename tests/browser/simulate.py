"""Simulated trainer jobs: post plausible PPO metrics through the real job-side API.

For dashboard checks that need many or long-running experiments faster than real training
(20 live experiments, a 1M-point series). The browser tests use real Ray jobs instead.
"""

from __future__ import annotations

import math
import random

import httpx

from tests.browser.server import LiveServer
from trainer.wire import API_PREFIX


def metric_values(step: int, time_s: float, rng: random.Random) -> dict[str, float]:
    """One iteration's metrics, shaped like a CartPole run that learns."""
    progress = 1.0 - math.exp(-step / 40_000)
    mean = 20 + 460 * progress + rng.gauss(0, 8)
    return {
        "env_steps": float(step),
        "episode_return_mean": mean,
        "episode_return_min": max(8.0, mean - 40 - rng.random() * 30),
        "episode_return_max": min(500.0, mean + 30 + rng.random() * 30),
        "episode_len_mean": mean,
        "episodes": float(rng.randint(2, 40)),
        "policy_loss": -0.01 + rng.gauss(0, 0.005),
        "vf_loss": 50 * (1 - progress) + rng.random(),
        "entropy": 0.69 - 0.4 * progress + rng.gauss(0, 0.01),
        "kl": abs(rng.gauss(0.006, 0.002)),
        "kl_coeff": 0.0,
        "clip_fraction": abs(rng.gauss(0.08, 0.02)),
        "explained_variance": min(1.0, 0.2 + 0.7 * progress + rng.gauss(0, 0.03)),
        "grad_norm": abs(rng.gauss(0.5, 0.1)),
        "lr": 3e-4,
        "env_steps_per_s": 9000 + rng.gauss(0, 300),
        "time_sample_s": 0.03 + rng.random() * 0.005,
        "time_gae_s": 0.002,
        "time_sgd_s": 0.02 + rng.random() * 0.004,
        "time_weight_sync_s": 0.001,
        "time_iteration_s": 0.055,
    }


class SimulatedJob:
    """Reports like trainer/job.py does: status, metric rows, log lines, with a job token."""

    def __init__(self, server: LiveServer, experiment_id: int, seed: int = 0) -> None:
        self.experiment_id = experiment_id
        token = server.issue_job_token(experiment_id)
        self.client = httpx.Client(
            base_url=f"{server.url}{API_PREFIX}/jobs/experiments/{experiment_id}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30.0,
        )
        self.rng = random.Random(seed)
        self.step = 0
        self.time_s = 0.0

    def status(self, status: str, reason: str, error: str | None = None) -> None:
        body = {"status": status, "reason": reason, "error": error}
        self.client.post("/status", json=body).raise_for_status()

    def iterations(self, n: int, steps_per_iteration: int = 512) -> None:
        rows = []
        for _ in range(n):
            self.step += steps_per_iteration
            self.time_s += 0.055
            values = metric_values(self.step, self.time_s, self.rng)
            rows.append({"step": self.step, "time_s": self.time_s, "values": values})
        for start in range(0, len(rows), 10_000):
            chunk = rows[start : start + 10_000]
            self.client.post("/metrics", json={"rows": chunk}).raise_for_status()

    def log(self, *lines: str) -> None:
        self.client.post("/logs", json={"lines": list(lines)}).raise_for_status()

    def close(self) -> None:
        self.client.close()
