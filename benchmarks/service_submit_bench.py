"""Submit -> first metric at a websocket client, through the real service and Ray.

Starts a private Ray head (or uses RAY_ADDRESS), serves the API with uvicorn on a free port
(SQLite in a temp dir), then for each run: POST /experiments, open the experiment's websocket
and time the first `status: running` and the first `metrics` message. Each experiment is a
small serial-mode CartPole run that ends by itself after a few iterations.

With `--local-head` the service starts its own Ray head, as `rollout serve` does, so run 0 is
the first experiment on a fresh head ("cold") and the others are warm; `--no-warmup` turns the
head's background warm-up job off (ROLLOUT_RAY_WARMUP=false) to compare. In that mode the first
submit waits until the warm-up job has ended (its duration is printed).

    .venv/bin/python -m benchmarks.service_submit_bench [--runs 5] [--local-head [--no-warmup]]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from websockets.sync.client import connect

from app.core.config import Settings
from app.jobs.ray_head import LocalRayHead, apply_ray_env, free_ports
from app.main import create_app

CONFIG: dict[str, Any] = {
    "env_id": "CartPole-v1",
    "stop": {"env_steps": 4096},
    "checkpoint_every": 0,
}
TIMEOUT_S = 120.0


def serve(settings: Settings) -> tuple[uvicorn.Server, threading.Thread]:
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=settings.port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT_S
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the service did not start")
        time.sleep(0.1)
    return server, thread


def wait_cluster_ready(api: httpx.Client) -> None:
    """Ray reports its resources a few seconds after start; the queue waits for them."""
    deadline = time.monotonic() + TIMEOUT_S
    while api.get("/cluster").json().get("resources") is None:
        if time.monotonic() > deadline:
            raise RuntimeError("Ray never reported its resources")
        time.sleep(0.5)


def wait_warmup(api: httpx.Client) -> dict[str, Any] | None:
    """The service's head warm-up once it has ended (None when there is none)."""
    deadline = time.monotonic() + TIMEOUT_S
    while (warmup := api.get("/cluster").json().get("warmup")) is not None:
        if warmup["state"] not in ("pending", "running"):
            return warmup
        if time.monotonic() > deadline:
            raise RuntimeError("the Ray warm-up job did not end")
        time.sleep(0.2)
    return None


def evict_page_cache(root: Path) -> int:
    """Drop the files under `root` (this environment's site-packages) from the page cache, as
    after a reboot: the next import of torch or gymnasium reads them from disk. Only these
    files are touched (posix_fadvise DONTNEED), nobody else's; returns how many."""
    count = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file() and not path.is_symlink():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    count += 1
                finally:
                    os.close(fd)
    return count


def ray_job_start_s(api: httpx.Client, exp_id: int, submitted_at: float) -> float:
    """When Ray's job manager started the experiment's job, seconds after the submit."""
    from ray.job_submission import JobSubmissionClient

    ray_job_id = api.get(f"/experiments/{exp_id}").json()["ray_job_id"]
    client = JobSubmissionClient(api.get("/cluster").json()["dashboard_url"])
    return client.get_job_info(ray_job_id).start_time / 1000 - submitted_at


def one_run(api: httpx.Client, ws_base: str, index: int) -> dict[str, float]:
    submitted_at = time.time()
    t0 = time.perf_counter()
    response = api.post("/experiments", json={"name": f"bench {index}", "config": CONFIG})
    response.raise_for_status()
    exp_id = response.json()["id"]
    times = {"created_s": time.perf_counter() - t0}
    with connect(f"{ws_base}/experiments/{exp_id}/stream?since_step=0") as ws:
        while "first_metric_s" not in times:
            remaining = TIMEOUT_S - (time.perf_counter() - t0)
            if remaining <= 0:
                raise TimeoutError(f"no metric for experiment {exp_id} in {TIMEOUT_S}s")
            message = json.loads(ws.recv(timeout=remaining))
            now = time.perf_counter() - t0
            if message["type"] == "status" and message["status"] == "running":
                times.setdefault("running_s", now)
            elif message["type"] == "status" and message["status"] in ("failed", "stopped"):
                raise RuntimeError(f"experiment {exp_id} ended {message['status']}")
            elif message["type"] == "metrics" and message["step"]:
                times["first_metric_s"] = now
    times["job_start_s"] = ray_job_start_s(api, exp_id, submitted_at)
    wait_finished(api, exp_id)
    return times


def wait_finished(api: httpx.Client, exp_id: int) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while api.get(f"/experiments/{exp_id}").json()["status"] not in (
        "succeeded",
        "failed",
        "stopped",
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"experiment {exp_id} did not finish")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--local-head", action="store_true", help="the service starts its own Ray head"
    )
    parser.add_argument("--no-warmup", action="store_true", help="no warm-up job on that head")
    parser.add_argument(
        "--evict-page-cache",
        action="store_true",
        help="first drop this environment's site-packages from the page cache (a cold start)",
    )
    args = parser.parse_args()

    if args.evict_page_cache:
        site = Path(sysconfig.get_paths()["purelib"])
        print(f"evicted {evict_page_cache(site)} files under {site} from the page cache")
    apply_ray_env()
    head = None
    address = None if args.local_head else os.environ.get("RAY_ADDRESS")
    if not address and not args.local_head:
        head = LocalRayHead(num_cpus=4).start()
        address = head.address
    with tempfile.TemporaryDirectory(prefix="rollout-bench-") as tmp:
        settings = Settings(
            data_dir=Path(tmp),
            database_url=f"sqlite:///{Path(tmp) / 'rollout.db'}",
            port=free_ports(1)[0],
            ray_address=address,
            ray_warmup=not args.no_warmup,
            frontend_dir=Path(tmp) / "none",
        )
        started = time.perf_counter()
        server, thread = serve(settings)
        base = f"http://127.0.0.1:{settings.port}/api/v1"
        try:
            with httpx.Client(base_url=base, timeout=30) as api:
                wait_cluster_ready(api)
                warmup = wait_warmup(api)
                if warmup is not None:
                    print(
                        f"warm-up job {warmup['state']} in {warmup['seconds']:.2f} s; first "
                        f"submit {time.perf_counter() - started:.1f} s after the service started"
                    )
                runs = [one_run(api, base.replace("http", "ws"), i) for i in range(args.runs)]
        finally:
            server.should_exit = True
            thread.join(60)
            if head is not None:
                head.stop()
    report(runs)


def report(runs: list[dict[str, float]]) -> None:
    print(
        f"{'run':>4} {'201 (s)':>9} {'running (s)':>12} {'Ray job started (s)':>20} "
        f"{'first metric (s)':>17}"
    )
    for i, r in enumerate(runs):
        print(
            f"{i:>4} {r['created_s']:>9.3f} {r['running_s']:>12.3f} {r['job_start_s']:>20.3f} "
            f"{r['first_metric_s']:>17.3f}"
        )
    firsts = [r["first_metric_s"] for r in runs]
    if len(runs) > 1:
        warm = statistics.median(firsts[1:])
        print(
            f"first run {firsts[0]:.2f} s vs median of the later ones {warm:.2f} s "
            f"(first - warm = {firsts[0] - warm:+.2f} s)"
        )
    print(
        f"submit -> first metric at a websocket client: median {statistics.median(firsts):.2f} s, "
        f"min {min(firsts):.2f} s, max {max(firsts):.2f} s over {len(runs)} runs "
        f"(submit -> running: median {statistics.median(r['running_s'] for r in runs):.2f} s)"
    )


if __name__ == "__main__":
    main()
