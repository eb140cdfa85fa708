"""The `rollout` command line: one command tree, `rollout [--url U] [--token T] COMMAND ...`.

    serve                                  app/commands/serve.py   (the service itself)
    submit list show logs metrics ...      app/commands/           (clients of a running service)
    train evaluate                         trainer/cli.py          (the trainer, locally)

Every command is registered here, so `rollout --help` lists them all. The global flags work
before or after the command (`rollout --url X list` = `rollout list --url X`). Parsing loads
neither torch nor gymnasium: `train` and `evaluate` import the trainer when they run.

Errors are one line on stderr, never a traceback: `trainer.inputs.CliError` (bad input: exit
2, a wait that timed out: 3), the service's error envelope (exit 1, with a 422's fields), a
service that cannot be reached (exit 2). Output cut short by a closed pipe (`| head`) ends
quietly.
"""

from __future__ import annotations

import argparse
import os
import sys

from app.client import DEFAULT_URL, APIError, RolloutClient, ServiceUnreachable
from app.commands import catalog, evaluations, experiments, metrics, serve, studies, sweeps
from trainer import cli as trainer_cli
from trainer.inputs import CliError

CLIENT_MODULES = (experiments, metrics, evaluations, sweeps, studies, catalog)
LOCAL_COMMANDS = frozenset({"serve", "train", "evaluate"})
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a writer cut off by `| head`


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rollout",
        description="Run and watch PPO experiments: a service with a dashboard, its clients, "
        "and the trainer on its own.",
    )
    global_flags(parser)
    # The same flags after the command; SUPPRESS keeps a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    global_flags(common, suppress=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.register(sub)
    for module in CLIENT_MODULES:
        module.register(sub, common)
    trainer_cli.register(sub)
    return parser


def global_flags(parser: argparse.ArgumentParser, suppress: bool = False) -> None:
    url = os.environ.get("ROLLOUT_URL", DEFAULT_URL)
    token = os.environ.get("ROLLOUT_API_TOKEN")
    parser.add_argument(
        "--url",
        default=argparse.SUPPRESS if suppress else url,
        help=f"the service's address (ROLLOUT_URL; default {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=argparse.SUPPRESS if suppress else token,
        help="the service's API token (ROLLOUT_API_TOKEN)",
    )


def main(argv: list[str] | None = None) -> int:
    try:
        code = _run(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()  # here, where a closed pipe is still ours to handle
        return code
    except BrokenPipeError:
        # The reader went away (`rollout show 1 | head`): say nothing, and keep the
        # interpreter's last flush of stdout from raising again on its way out.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _run(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse printed the usage error (or the help)
        return 2 if exc.code else 0
    try:
        if args.command in LOCAL_COMMANDS:
            return args.handler(args)
        with RolloutClient(args.url, args.token) as client:
            return args.handler(args, client)
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
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
