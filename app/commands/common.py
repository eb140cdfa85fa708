"""What the client commands share: the CLI's error type, config files, number formatting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class CliError(Exception):
    """One clear line for the user; `code` 1 for an error from the service, 2 otherwise."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def load_config(path: str) -> dict[str, Any]:
    """A mapping of config fields from a .json, .yaml or .yml file."""
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


def parse_assignments(items: list[str]) -> dict[str, Any]:
    """`--set lr=0.001 --set stop.env_steps=5000` -> nested dict; values are JSON, else text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set {item!r}: expected FIELD=VALUE (e.g. lr=0.001)", code=2)
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        node = out
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise CliError(f"--set {item!r}: {part} is set to a value and a section", code=2)
        node[leaf] = value
    return out


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
