"""What the client commands share beyond trainer/inputs.py (the CLI's one error type, config
reader and `--set` parser, which `rollout train` uses too): number formatting, and how a
command or a group of commands (`rollout sweep ...`) is added to the tree."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

# A command's handler: (parsed arguments, RolloutClient) -> exit status.
Handler = Callable[[argparse.Namespace, Any], int]
Add = Callable[[str, Handler, str], argparse.ArgumentParser]


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def adder(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> Add:
    """`add(name, handler, help)`: a command of `sub` that runs `handler`, with the flags every
    command takes (`common`: --url, --token)."""

    def add(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        parser = sub.add_parser(name, parents=[common], help=help)
        parser.set_defaults(handler=handler)
        return parser

    return add


def command_group(
    sub: argparse._SubParsersAction, common: argparse.ArgumentParser, name: str, help: str
) -> Add:
    """`rollout NAME ACTION ...`: the group's parser, and `add` for its actions."""
    group = sub.add_parser(name, parents=[common], help=help)
    actions = group.add_subparsers(dest=f"{name}_command", required=True, metavar="ACTION")
    return adder(actions, common)
