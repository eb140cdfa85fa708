"""Live messages across API processes through PostgreSQL LISTEN/NOTIFY.

With several API processes on one PostgreSQL database, a metric ingested by one process must
reach websocket clients of all of them. Messages are then sent with `pg_notify` inside the
transaction that wrote the data (PostgreSQL delivers them at commit, in commit order, and
drops them on rollback), and every process runs a `PgListener` thread that LISTENs and hands
them to its in-process hub. A NOTIFY payload is limited to 8000 bytes, so large messages are
split (logs by lines) and over-long texts are shortened. A metric batch that fits one payload
(a trainer iteration's row of a few dozen metrics does) travels inline, so no process reads it
back; a larger one (a backlog flushed after an outage) travels as a reference (`metrics_ref`:
experiment and step range), and only a process with subscribers to that experiment reads the
points back from the database.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import psycopg
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.live.hub import FeedStatus, LiveHub

# (experiment_id, step_min, step_max) -> a `metrics` message with the stored points.
MetricsLoader = Callable[[int, int, int], dict[str, Any]]

log = logging.getLogger(__name__)

CHANNEL = "rollout_live"
APPLICATION_NAME = "rollout-live-listener"
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
    return {
        "type": "metrics_ref",
        "experiment_id": message["experiment_id"],
        "step_min": message["step"][0],
        "step_max": message["step"][-1],
    }


def notify_payloads(topic: str, message: dict[str, Any]) -> list[str]:
    """The NOTIFY payloads for one message: metrics inline when they fit one payload (every
    listener then has them without a read-back), else by reference; others via `payloads`."""
    if message.get("type") == "metrics" and message["step"]:
        encoded = _encode(topic, message)
        if len(encoded.encode()) <= MAX_PAYLOAD:
            return [encoded]
        return payloads(topic, _by_reference(message))
    return payloads(topic, message)


def notify(session: Session, messages: list[tuple[str, dict[str, Any]]]) -> None:
    """Send the messages in the session's transaction (one statement); PostgreSQL delivers
    them to every listener at commit, in order."""
    parts = [p for topic, message in messages for p in notify_payloads(topic, message)]
    if parts:
        session.execute(
            text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:parts AS text[])) AS t(p)"),
            {"channel": CHANNEL, "parts": parts},
        )


def conninfo(engine: Engine) -> str:
    """A libpq URI for psycopg from the engine's SQLAlchemy URL."""
    return engine.url.set(drivername="postgresql").render_as_string(hide_password=False)


class PgListener:
    """A thread that LISTENs on the channel and publishes what arrives to the local hub.

    It never dies while the service runs: any error (the connection was lost, the database
    restarted, a batch could not be read back) is logged and the thread reconnects with
    exponential backoff. Messages sent while it was not listening are lost to it, so once it
    listens again it makes every subscriber reconnect and catch up from the database (the
    websocket's `since_step` backlog), and one whose batch could not be read does the same.
    Its state is the hub's `feed` (shown by /health). Notifications arrive at once; `poll_s`
    only bounds how long `stop()` waits for the thread (a service's shutdown, each test's app).
    """

    def __init__(
        self,
        dsn: str,
        hub: LiveHub,
        load_metrics: MetricsLoader,
        poll_s: float = 0.1,
        backoff_s: tuple[float, float] = (0.2, 10.0),
    ) -> None:
        self._dsn = dsn
        self._hub = hub
        self._load_metrics = load_metrics
        self._poll_s = poll_s
        self._backoff_s = backoff_s
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._status = FeedStatus(backend="postgres", connected=False)
        self._hub.set_feed(self._status)
        self._thread = threading.Thread(target=self._run, name="rollout-pg-listener", daemon=True)

    def start(self, timeout_s: float = 30.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("could not LISTEN on PostgreSQL for live messages")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _report(self, **changes: Any) -> None:
        self._status = replace(self._status, **changes)
        self._hub.set_feed(self._status)

    def _run(self) -> None:
        backoff = self._backoff_s[0]
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = self._backoff_s[0]
            except Exception as exc:
                # /health needs no token: it shows the error's kind, the log has the message.
                self._report(connected=False, last_error=type(exc).__name__)
                log.warning("live listener: %s; reconnecting in %.1fs", exc, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self._backoff_s[1])

    def _listen(self) -> None:
        with psycopg.connect(
            self._dsn, autocommit=True, application_name=APPLICATION_NAME, connect_timeout=10
        ) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            if self._ready.is_set():
                # A reconnect: what was sent meanwhile never reached us; clients catch up.
                self._report(connected=True, reconnects=self._status.reconnects + 1)
                log.warning("live listener: listening again; subscribers resynchronise")
                self._hub.resync()
            else:
                self._report(connected=True)
            self._ready.set()
            while not self._stop.is_set():
                for note in conn.notifies(timeout=self._poll_s):
                    self._deliver(note.payload)

    def _deliver(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            topic, message = data["t"], data["m"]
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed live message")
            return
        try:
            if message["type"] == "metrics_ref":
                if not self._hub.subscriber_count(topic):
                    return
                message = self._load_metrics(
                    message["experiment_id"], message["step_min"], message["step_max"]
                )
            self._hub.publish(topic, message)
        except Exception:
            log.exception("live listener: could not deliver a message on %s; resync", topic)
            self._hub.resync(topic)
