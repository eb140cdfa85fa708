"""What the client commands share beyond trainer/inputs.py (the CLI's one error type, config
reader and `--set` parser, which `rollout train` uses too): number formatting."""

from __future__ import annotations


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
