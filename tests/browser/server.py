"""A real Rollout service on a free loopback port, run by uvicorn in a background thread.

Used by the browser tests and the dashboard benchmark: the page under test talks to exactly
what `rollout serve` runs (same app factory, real database, real websockets).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import uvicorn
from fastapi import FastAPI

from app.core.config import Settings
from app.main import create_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    app: FastAPI
    url: str

    def issue_job_token(self, experiment_id: int) -> str:
        """A job token for posting metrics as a trainer job would (simulated jobs only)."""
        from app.experiments.service import issue_job_token

        with self.app.state.sessionmaker() as session:
            token = issue_job_token(session, experiment_id)
            session.commit()
        return token


@contextmanager
def live_server(
    settings: Settings, port: int | None = None, startup_timeout_s: float = 60.0
) -> Iterator[LiveServer]:
    """Start the app (on a free port unless given), yield once /health answers, then stop it."""
    port = port or free_port()
    settings = settings.model_copy(update={"host": "127.0.0.1", "port": port})
    app = create_app(settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="rollout-live-server", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + startup_timeout_s
    while True:
        if not thread.is_alive():
            raise RuntimeError("the service exited during start-up")
        try:
            if httpx.get(f"{url}/health", timeout=2.0).status_code < 500:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"the service did not answer on {url} within {startup_timeout_s} s")
        time.sleep(0.1)
    try:
        yield LiveServer(app=app, url=url)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
