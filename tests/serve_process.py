"""`rollout serve` as a subprocess, the way a user starts it: used by tests and benchmarks.

The server runs in its own process session on a free port; it is stopped by its own process
group id (SIGINT first, which must end it cleanly, then SIGKILL), never by name.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.jobs.ray_head import free_ports

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class ServeProcess:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path


@contextlib.contextmanager
def rollout_serve(
    data_dir: Path,
    *,
    port: int | None = None,
    env: Mapping[str, str | None] | None = None,
    start_timeout_s: float = 60.0,
    stop_timeout_s: float = 30.0,
    python: str = sys.executable,
) -> Iterator[ServeProcess]:
    """Start `rollout serve` (with `python`), wait for /health, yield it, stop it; `env`
    entries set to None are removed from the inherited environment."""
    port = port or free_ports(1)[0]
    full_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    log_path = data_dir / f"server-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "app.cli", "serve", "--port", str(port), "--data-dir",
             str(data_dir)],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    served = ServeProcess(f"http://127.0.0.1:{port}", proc, log_path)
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{served.url}/health", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(log_path.read_text()[-3000:])
            time.sleep(0.2)
        yield served
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=stop_timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
