"""Live messages across API processes through PostgreSQL LISTEN/NOTIFY.

With several API processes on one PostgreSQL database, a metric ingested by one process must
reach websocket clients of all of them. Messages are then sent with `pg_notify` inside the
transaction that wrote the data (PostgreSQL delivers them at commit, in commit order, and
drops them on rollback), and every process runs a `PgListener` thread that LISTENs and hands
them to its in-process hub. A NOTIFY payload is limited to 8000 bytes, so large messages are
split (logs by lines) and over-long texts are shortened. Metric batches travel as a reference
(`metrics_ref`: experiment and step range); a process with subscribers to that experiment reads
the points back from the database, one that has none does no work at all.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.live.hub import LiveHub

# (experiment_id, step_min, step_max) -> a `metrics` message with the stored points.
MetricsLoader = Callable[[int, int, int], dict[str, Any]]

log = logging.getLogger(__name__)

CHANNEL = "rollout_live"
MAX_PAYLOAD = 7900
TEXT_LIMIT = 2000


def _encode(topic: str, message: dict[str, Any]) -> str:
    return json.dumps({"t": topic, "m": message}, separators=(",", ":"), allow_nan=False)


def _halves(message: dict[str, Any]) -> list[dict[str, Any]] | None:
    """Split a message in two smaller messages of the same type, if it can be split."""
    if message.get("type") == "metrics" and len(message["step"]) > 1:
        mid = len(message["step"]) // 2
        parts = []
        for sl in (slice(0, mid), slice(mid, None)):
            parts.append(
                {
                    **message,
                    "step": message["step"][sl],
                    "series": {n: col[sl] for n, col in message["series"].items()},
                }
            )
        return parts
    if message.get("type") == "log" and len(message["lines"]) > 1:
        mid = len(message["lines"]) // 2
        return [
            {**message, "lines": message["lines"][:mid]},
            {**message, "lines": message["lines"][mid:]},
        ]
    return None


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + " [truncated; see the experiment for the full text]"
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value


def payloads(topic: str, message: dict[str, Any]) -> list[str]:
    """NOTIFY payloads (each under the limit) that together carry `message`."""
    encoded = _encode(topic, message)
    if len(encoded.encode()) <= MAX_PAYLOAD:
        return [encoded]
    parts = _halves(message)
    if parts is not None:
        return [p for part in parts for p in payloads(topic, part)]
    shortened = _shorten(message)
    encoded = _encode(topic, shortened)
    if len(encoded.encode()) <= MAX_PAYLOAD:
        return [encoded]
    if shortened.get("type") == "log":
        return [_encode(topic, {**shortened, "lines": [shortened["lines"][0][:TEXT_LIMIT]]})]
    log.warning("live message of type %s too large for NOTIFY; dropped", message.get("type"))
    return []


def _by_reference(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("type") != "metrics" or not message["step"]:
        return message
    return {
        "type": "metrics_ref",
        "experiment_id": message["experiment_id"],
        "step_min": message["step"][0],
        "step_max": message["step"][-1],
    }


def notify(session: Session, messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Send the messages in the session's transaction (one statement); PostgreSQL delivers
    them to every listener at commit, in order."""
    parts = [p for topic, message in messages for p in payloads(topic, _by_reference(message))]
    if parts:
        session.execute(
            text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:parts AS text[])) AS t(p)"),
            {"channel": CHANNEL, "parts": parts},
        )


def conninfo(engine: Engine) -> str:
    """A libpq URI for psycopg from the engine's SQLAlchemy URL."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgListener:
    """A thread that LISTENs on the channel and publishes what arrives to the local hub."""

    def __init__(
        self, dsn: str, hub: LiveHub, load_metrics: MetricsLoader, poll_s: float = 0.5
    ) -> None:
        self._dsn = dsn
        self._hub = hub
        self._load_metrics = load_metrics
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rollout-pg-listener", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("could not LISTEN on PostgreSQL for live messages")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        backoff = 0.5
        while not self._stop.is_set():
            try:
                with psycopg.connect(self._dsn, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._ready.set()
                    backoff = 0.5
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=self._poll_s):
                            self._deliver(note.payload)
            except psycopg.Error:
                log.exception("live listener lost its PostgreSQL connection; reconnecting")
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _deliver(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            topic, message = data["t"], data["m"]
            if message["type"] == "metrics_ref":
                if not self._hub.subscriber_count(topic):
                    return
                message = self._load_metrics(
                    message["experiment_id"], message["step_min"], message["step_max"]
                )
            self._hub.publish(topic, message)
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed live message")
