"""What the commands of the groups of runs (`rollout sweep`, `rollout study`) share: reading
their files, their status counts, stop and delete."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.commands.common import Add, Handler
from trainer.inputs import CliError, read_mapping


def read_group_file(
    path: str, fields: frozenset[str], noun: str, hint: str, name: str | None
) -> dict[str, Any]:
    """A sweep or study file's mapping; one holding other keys than `fields` is refused (exit
    2) saying which it may hold. The command line's `name` wins over the file's, and the
    file's stem names it when neither does."""
    body = read_mapping(path)
    unknown = sorted(set(body) - fields)
    if unknown:
        raise CliError(
            f"{path}: unknown keys {', '.join(unknown)} (a {noun} file holds "
            f"{', '.join(sorted(fields))}; {hint})",
            code=2,
        )
    body["name"] = name or body.get("name") or Path(path).stem
    return body


def counts_text(counts: dict[str, int], empty: str = "") -> str:
    """'2 running, 1 succeeded' (runs or trials per state)."""
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or empty


def stop_command(noun: str, stop: Callable[[Any, int], Any], empty: str = "") -> Handler:
    """`rollout <noun> stop ID`: `stop(client, id)`, then the group's status and counts."""

    def handler(args: argparse.Namespace, client: Any) -> int:
        group = stop(client, args.id)
        print(f"{noun} {group.id}: {group.status} ({counts_text(group.counts, empty)})")
        return 0

    return handler


def delete_command(noun: str, delete: Callable[[Any, int], Any]) -> Handler:
    """`rollout <noun> delete ID`: `delete(client, id)`."""

    def handler(args: argparse.Namespace, client: Any) -> int:
        delete(client, args.id)
        print(f"{noun} {args.id}: deleted")
        return 0

    return handler


def add_stop_and_delete(
    add: Add,
    noun: str,
    stop: Callable[[Any, int], Any],
    delete: Callable[[Any, int], Any],
    helps: tuple[str, str],
    empty: str = "",
) -> None:
    """`rollout <noun> stop ID` and `rollout <noun> delete ID` (helps: their help texts)."""
    add("stop", stop_command(noun, stop, empty), helps[0]).add_argument("id", type=int)
    add("delete", delete_command(noun, delete), helps[1]).add_argument("id", type=int)
