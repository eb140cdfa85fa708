"""What a user writes on the command line: config files, `--set` assignments, and the one
error type of every `rollout` command.

Both halves of the CLI read their input here: `rollout train` (trainer/cli.py, which must run
without the service's packages) and the client commands (app/commands/, which must not load
torch). So this module is pure: json, pyyaml on demand, nothing else.

A config file is JSON or YAML (by its suffix; anything else is read as JSON). It holds either a
bare PPOConfig mapping or a submission document `{name, tags, evaluation_every, config}`, the
two forms the browser's form loads too (frontend/src/form/configFile.ts). An empty file is
refused in both forms and everywhere (`{}` says "all defaults" on purpose).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUBMISSION_KEYS = frozenset({"name", "tags", "evaluation_every", "config"})


class CliError(Exception):
    """One clear line for the user, no traceback. `code`: 2 bad input or arguments (the
    default), 1 an error the service returned, 3 a wait that timed out."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


def read_mapping(path: str | Path) -> dict[str, Any]:
    """The mapping a .json, .yaml or .yml file holds; CliError for anything else."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise CliError(f"cannot read {file}: {exc.strerror}") from None
    if not text.strip():
        raise CliError(f"{file} is empty (write {{}} for a config of defaults)")
    try:
        if file.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as exc:  # yaml.YAMLError, json.JSONDecodeError, their many subclasses
        kind = "YAML" if file.suffix in (".yaml", ".yml") else "JSON"
        raise CliError(f"cannot parse {file} as {kind}: {exc}") from None
    if not isinstance(data, dict):
        raise CliError(f"{file} must hold a mapping of config fields")
    return data


@dataclass(frozen=True)
class Submission:
    """A config file read: the config, and the name, tags and evaluation_every (the run's
    videos as it trains) a submission document gave."""

    config: dict[str, Any]
    name: str | None = None
    tags: list[str] = field(default_factory=list)
    evaluation_every: int = 0


def read_submission(path: str | Path) -> Submission:
    """A bare config, or `{name, tags, config}` (told apart by a mapping under `config`)."""
    data = read_mapping(path)
    if not isinstance(data.get("config"), dict):
        return Submission(config=data)
    unknown = sorted(set(data) - SUBMISSION_KEYS)
    if unknown:
        raise CliError(
            f"{path}: unknown keys {', '.join(unknown)} next to `config` (a submission file "
            "holds name, tags, evaluation_every and config; PPO fields go under `config`)"
        )
    name, tags = data.get("name"), data.get("tags", [])
    if name is not None and not isinstance(name, str):
        raise CliError(f"{path}: name must be text")
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise CliError(f"{path}: tags must be a list of text")
    every = data.get("evaluation_every", 0)
    if not isinstance(every, int) or isinstance(every, bool) or every < 0:
        raise CliError(f"{path}: evaluation_every must be a whole number, 0 or more")
    return Submission(config=data["config"], name=name, tags=tags, evaluation_every=every)


def read_config(path: str | Path) -> dict[str, Any]:
    """The PPOConfig fields of a config file, in either form."""
    return read_submission(path).config


def parse_assignments(items: list[str], flag: str = "--set") -> dict[str, Any]:
    """`--set lr=0.001 --set stop.env_steps=5000` -> a nested dict; values are parsed as JSON
    (numbers, null, lists, true), anything else is taken as text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliError(f"{flag} {item!r}: expected FIELD=VALUE (e.g. lr=0.001)")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        set_dotted(out, key, value, what=f"{flag} {item!r}")
    return out


def set_dotted(data: dict[str, Any], key: str, value: Any, what: str | None = None) -> None:
    """`data["stop"]["env_steps"] = value` for key "stop.env_steps" (sections are created)."""
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise CliError(f"{what or key!r}: {part} is set to a value and a section")
        node = child
    node[leaf] = value


# The stop criteria as flags, for `rollout train` and `rollout resume` alike.
STOP_FLAGS = (
    ("--stop-steps", "stop_steps", int, "env_steps", "env steps in all (a resumed run counts on)"),
    ("--stop-return", "stop_return", float, "episode_return_mean", "mean return of 100 episodes"),
    ("--stop-seconds", "stop_seconds", float, "wall_seconds", "seconds of this run"),
)


def add_stop_flags(parser: Any) -> None:
    """--stop-steps, --stop-return, --stop-seconds on an argparse parser."""
    for flag, dest, kind, name, text in STOP_FLAGS:
        parser.add_argument(flag, dest=dest, type=kind, help=f"stop.{name}: {text}")


def stop_overrides(args: Any) -> dict[str, Any]:
    """The stop fields the flags of `add_stop_flags` set ({} when none was given)."""
    return {
        name: getattr(args, dest)
        for _, dest, _, name, _ in STOP_FLAGS
        if getattr(args, dest, None) is not None
    }
