"""The `rollout` command line for the service: `serve`, and the client commands.

Client commands (app/commands/: submit, list, show, wait, watch, stop, resume, fork, delete,
download, evaluate-remote, sweep, presets) talk to a running service through
`app.client.RolloutClient` (`--url` / ROLLOUT_URL, `--token` / ROLLOUT_API_TOKEN). Failures
print one clear line (and a 422's fields), never a traceback: exit 1 for an error the service
returned, 2 when it cannot be reached or the input is bad.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from app.client import DEFAULT_URL, APIError, RolloutClient, ServiceUnreachable
from app.commands import catalog, evaluations, experiments, sweeps
from app.commands.common import CliError

COMMAND_MODULES = (experiments, evaluations, sweeps, catalog)


# --- serve ----------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.core.config import Settings, is_loopback
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
        log_level="info",
        ws="websockets-sansio",
        timeout_graceful_shutdown=10,
    )
    return 0


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


# --- entry point ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("ROLLOUT_URL", DEFAULT_URL))
    common.add_argument("--token", default=os.environ.get("ROLLOUT_API_TOKEN"))

    parser = argparse.ArgumentParser(
        prog="rollout",
        description="Run and watch PPO experiments.",
        epilog="Training without the service: `rollout train --help`, `rollout evaluate --help`.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="start the service (API, dashboard, jobs)")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument("--data-dir")
    for module in COMMAND_MODULES:
        module.register(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return cmd_serve(args)
        with RolloutClient(args.url, args.token) as client:
            return args.handler(args, client)
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except APIError as exc:
        print(exc.describe(), file=sys.stderr)
        return 1
    except ServiceUnreachable as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
