"""The service commands of `rollout`: serve, submit, list, watch, stop, download, sweep.

Client commands talk to a running service over HTTP (`--url` / ROLLOUT_URL, `--token` /
ROLLOUT_API_TOKEN). Failures print one clear line (and a 422's fields), never a traceback:
exit 1 for an error the service returned, 2 when it cannot be reached or the input is bad.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
FINISHED = ("succeeded", "failed", "stopped")


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


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
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="info",
        ws="websockets-sansio",
        timeout_graceful_shutdown=10,
    )
    return 0


# --- client ---------------------------------------------------------------------------------------


class Client:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.Client(base_url=f"{self.url}/api/v1", headers=headers, timeout=30)

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(
                f"cannot reach the Rollout service at {self.url} ({exc.__class__.__name__}). "
                "Is `rollout serve` running? Set --url or ROLLOUT_URL.",
                code=2,
            ) from None
        raise_for_error(response)
        return response

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()


def raise_for_error(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        error = response.json()["error"]
        message = f"error {response.status_code}: {error['message']}"
        for field in error.get("fields") or []:
            message += f"\n  {field['field']}: {field['message']}"
    except (ValueError, KeyError, TypeError):
        message = f"error {response.status_code}: {response.text[:500]}"
    raise CliError(message)


def load_config(path: str) -> dict[str, Any]:
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}", code=2) from None
    try:
        if file.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:
        raise CliError(
            f"{path} is not valid {file.suffix.lstrip('.') or 'JSON'}: {exc}", 2
        ) from None
    if not isinstance(data, dict):
        raise CliError(f"{path} must hold a mapping of config fields", code=2)
    return data


def cmd_submit(args: argparse.Namespace, client: Client) -> int:
    body = {
        "name": args.name or Path(args.config).stem,
        "config": load_config(args.config),
        "tags": args.tag or [],
    }
    exp = client.json("POST", "/experiments", json=body)
    print(exp["id"])
    return 0


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def cmd_list(args: argparse.Namespace, client: Client) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.status:
        params["status"] = args.status
    if args.tag:
        params["tag"] = args.tag
    items = client.json("GET", "/experiments", params=params)["items"]
    print(f"{'ID':>5}  {'STATUS':<10} {'PROGRESS':>8}  {'STEPS':>10}  {'RETURN':>8}  NAME")
    for e in items:
        print(
            f"{e['id']:>5}  {e['status']:<10} {e['progress'] * 100:>7.0f}%  "
            f"{e['env_steps'] or 0:>10}  {_fmt(e['episode_return_mean']):>8}  {e['name']}"
        )
    return 0


def cmd_stop(args: argparse.Namespace, client: Client) -> int:
    exp = client.json("POST", f"/experiments/{args.id}/stop")
    print(f"experiment {exp['id']}: {exp['status']}")
    return 0


def cmd_download(args: argparse.Namespace, client: Client) -> int:
    out = Path(args.output or f"experiment-{args.id}-{args.checkpoint}.tar.gz")
    path = f"/experiments/{args.id}/checkpoints/{args.checkpoint}/download"
    try:
        with client.http.stream("GET", path) as response:
            if not response.is_success:
                response.read()
                raise_for_error(response)
            tmp = out.with_name(out.name + ".part")
            with tmp.open("wb") as f:
                for chunk in response.iter_bytes(1 << 20):
                    f.write(chunk)
            tmp.replace(out)
    except httpx.TransportError as exc:
        raise CliError(f"cannot reach the Rollout service at {client.url} ({exc})", 2) from None
    print(out)
    return 0


WATCH_RECONNECTS = 5


def cmd_watch(args: argparse.Namespace, client: Client) -> int:
    """Follow an experiment live until it ends; exit 0 only if it succeeded.

    A dropped stream (service restart, a slow terminal) is resumed from the last step shown.
    """
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    exp = client.json("GET", f"/experiments/{args.id}")
    if exp["status"] in FINISHED:
        print(_status_line(exp["status"], exp.get("error")))
        return 0 if exp["status"] == "succeeded" else 1
    # Live progress only: skip the history older than the experiment's latest step.
    since = max(-1, (exp.get("env_steps") or 0) - 1)
    base = client.url.replace("http", "ws", 1) + f"/api/v1/experiments/{args.id}/stream"
    headers = {"Authorization": f"Bearer {client.token}"} if client.token else None
    target = (exp.get("config") or {}).get("stop", {})
    problem = "the service closed the live stream"
    for attempt in range(WATCH_RECONNECTS + 1):
        if attempt:
            time.sleep(min(2.0**attempt, 10.0))
        try:
            with connect(
                f"{base}?since_step={since}", additional_headers=headers, open_timeout=10
            ) as ws:
                for raw in ws:
                    message = json.loads(raw)
                    if message["type"] == "metrics" and message["step"]:
                        since = max(since, message["step"][-1])
                    status = _show(message, target)
                    if status in FINISHED:
                        return 0 if status == "succeeded" else 1
        except (OSError, WebSocketException) as exc:
            problem = f"lost the live stream from {client.url}: {exc}"
    raise CliError(problem, code=2)


def _status_line(status: str, error: str | None) -> str:
    return f"status: {status}" + (f"\n{error}" if error else "")


def _show(message: dict[str, Any], stop: dict[str, Any]) -> str | None:
    kind = message["type"]
    if kind == "metrics" and message["step"]:
        series = message["series"]
        i = len(message["step"]) - 1
        ret = (series.get("episode_return_mean") or [None] * (i + 1))[i]
        total = stop.get("env_steps")
        steps = f"{message['step'][i]}" + (f"/{total}" if total else "")
        print(f"env_steps {steps}  episode_return_mean {_fmt(ret, 2)}", flush=True)
    elif kind == "status":
        print(_status_line(message["status"], message.get("error")), flush=True)
        return message["status"]
    elif kind == "checkpoint":
        c = message["checkpoint"]
        print(f"checkpoint {c['id']} (iteration {c['iteration']})", flush=True)
    elif kind == "log":
        for line in message["lines"]:
            print(f"| {line}", flush=True)
    return None


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

    submit = sub.add_parser("submit", parents=[common], help="submit an experiment config")
    submit.add_argument("config", help="a PPO config file (.json, .yaml)")
    submit.add_argument("--name")
    submit.add_argument("--tag", action="append")

    lst = sub.add_parser("list", parents=[common], help="list experiments, newest first")
    lst.add_argument("--status")
    lst.add_argument("--tag")
    lst.add_argument("--limit", type=int, default=50)

    watch = sub.add_parser("watch", parents=[common], help="follow an experiment live")
    watch.add_argument("id", type=int)

    stop = sub.add_parser("stop", parents=[common], help="stop an experiment")
    stop.add_argument("id", type=int)

    download = sub.add_parser("download", parents=[common], help="download a checkpoint")
    download.add_argument("id", type=int)
    download.add_argument("--checkpoint", default="best", help="best, latest or an id")
    download.add_argument("-o", "--output")

    from app.sweep_cli import add_parser as add_sweep_parser

    add_sweep_parser(sub, common)
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace, Client], int]] = {
    "submit": cmd_submit,
    "list": cmd_list,
    "watch": cmd_watch,
    "stop": cmd_stop,
    "download": cmd_download,
}


def main(argv: list[str] | None = None) -> int:
    from app.sweep_cli import cmd_sweep

    args = build_parser().parse_args(argv)
    try:
        if args.command == "serve":
            return cmd_serve(args)
        command = cmd_sweep if args.command == "sweep" else COMMANDS[args.command]
        return command(args, Client(args.url, args.token))
    except CliError as exc:
        print(str(exc), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
