"""`rollout serve`: the service (API, dashboard, jobs) on uvicorn.

A local command: its handler takes the parsed arguments only (no client). The `rollout` tree
(this command, the client commands beside it, `train` and `evaluate` in trainer/cli.py) is
assembled in app/cli.py.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
from pathlib import Path
from typing import Any

from trainer.inputs import CliError

JOB_PATH = "/api/v1/jobs/"

# --- serve ----------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.core.config import Settings, is_loopback
    from app.core.http_server import header_timeout_protocol
    from app.live.deflate import SharedDeflateWebSocketProtocol
    from app.main import create_app

    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    if args.data_dir:
        overrides["data_dir"] = Path(args.data_dir)
    settings = Settings(**overrides)
    if not is_loopback(settings.host) and not settings.api_token_value:
        raise CliError(
            f"refusing to listen on {settings.host} without an API token: anyone who can reach "
            "it could run code on your Ray cluster. Set ROLLOUT_API_TOKEN (clients pass it as "
            "--token) or listen on 127.0.0.1.",
            code=2,
        )
    _guard_secrets(settings, is_loopback(settings.host))
    _refuse_a_shared_head(settings)
    if settings.host in ("0.0.0.0", "::") and not settings.allowed_hosts:
        print(
            f"note: listening on {settings.host}, but only Host headers naming this machine's "
            "loopback addresses are answered; set ROLLOUT_ALLOWED_HOSTS to the names clients "
            "use to reach it (docs/operations.md).",
            file=sys.stderr,
        )
    uvicorn.run(
        create_app(settings, server_gc=True),
        host=settings.host,
        port=settings.port,
        http=header_timeout_protocol(settings.header_timeout_s),
        log_config=log_config(access_log_jobs=settings.access_log_jobs),
        log_level="info",
        ws=SharedDeflateWebSocketProtocol,  # uvicorn's websockets-sansio, deflate shared
        timeout_graceful_shutdown=10,
    )
    return 0


MIN_API_TOKEN_LENGTH = 16


def _guard_secrets(settings: Any, loopback: bool) -> None:
    """Refuse an API token nobody can present (blank) or guess in minutes (short, off
    loopback), then make this process non-dumpable: jobs of the same OS user cannot read its
    /proc/<pid>/environ (the token, the database URL) then (docs/operations.md, Isolation)."""
    from trainer.process_guard import make_undumpable

    token = settings.api_token_value
    if token is not None and not token.strip():
        raise CliError("ROLLOUT_API_TOKEN is blank; set a real token or unset it", code=2)
    if token is not None and not loopback and len(token.strip()) < MIN_API_TOKEN_LENGTH:
        raise CliError(
            f"refusing to listen on {settings.host} with an API token of {len(token.strip())} "
            f"characters: use at least {MIN_API_TOKEN_LENGTH} (e.g. `python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`)",
            code=2,
        )
    make_undumpable()


def log_config(*, access_log_jobs: bool) -> dict[str, Any]:
    """uvicorn's logging, plus the service's own events ("experiment 3 running: ...", at INFO
    on the `app` loggers, in uvicorn's format) and, unless `access_log_jobs`, an access log
    without the jobs' successful calls."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["app"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    if not access_log_jobs:
        config["filters"] = {"no_job_calls": {"()": JobCallsFilter}}
        config["handlers"]["access"]["filters"] = ["no_job_calls"]
    return config


class JobCallsFilter(logging.Filter):
    """Drops the access lines of successful job-side calls (/api/v1/jobs/...): a job posts its
    metrics every few seconds, which made them 85 % of the log. Their errors stay."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args  # uvicorn's: (client, method, path, http version, status)
        if not isinstance(args, tuple) or len(args) != 5:
            return True
        path, status = args[2], args[4]
        return not (str(path).startswith(JOB_PATH) and isinstance(status, int) and status < 400)


def _refuse_a_shared_head(settings: Any) -> None:
    """One local Ray head per data dir: a second service on it would adopt or stop the head
    the first one is using (app/jobs/head_state.py)."""
    from app.jobs import head_state

    if not settings.jobs_enabled or settings.ray_address:
        return
    record = head_state.load(settings.data_dir)
    if record is not None and head_state.owner_alive(record):
        raise CliError(
            f"another `rollout serve` (pid {record.owner_pid}) is running on the data dir "
            f"{settings.data_dir} with its own Ray head; stop it first, or use another "
            "--data-dir",
            code=2,
        )


# --- the command ----------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser(
        "serve",
        help="start the service (API, dashboard, jobs)",
        description=(
            "Start the service: the REST API, the dashboard and, unless "
            "ROLLOUT_JOBS_ENABLED=false, a local Ray head for the jobs (RAY_ADDRESS for an "
            "existing cluster). Every setting "
            "is also read from ROLLOUT_* variables (docs/operations.md); these flags win."
        ),
    )
    serve.set_defaults(handler=cmd_serve)
    serve.add_argument(
        "--host", help="address to listen on (ROLLOUT_HOST; default 127.0.0.1, loopback only)"
    )
    serve.add_argument("--port", type=int, help="port to listen on (ROLLOUT_PORT; default 8000)")
    serve.add_argument(
        "--data-dir",
        help="where the SQLite file, checkpoints and job folders live (ROLLOUT_DATA_DIR)",
    )
