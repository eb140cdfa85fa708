"""A sweep's plan: grid keys checked against PPOConfig, every grid point x seed resolved.

Grid keys are PPOConfig field names, dotted for nested ones ("stop.env_steps",
"model.hidden_sizes", "env_config.<any key>"). Each member's config is the base config with
its grid point merged in (nested keys merge into their section) and its seed, resolved exactly
like a single experiment's (PPOConfig defaults < preset < these fields). Every problem is
collected and reported at once as a 422 naming `grid.<key>`, `grid.<key>.<i>` (the i-th value),
`seeds`, `config.<field>` or `grid` (a combination of values no field owns).
"""

from __future__ import annotations

import itertools
import json
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from app.core.errors import InvalidInput
from app.sweeps.schemas import SweepCreate
from trainer.config import MAX_SEED, PPOConfig
from trainer.env_catalog import unknown_env_message
from trainer.field_names import config_error_message, unknown_field_message
from trainer.resolve import deep_merge, resolve_config

MAX_MEMBERS = 256  # grid points x seeds: a sweep is many experiments, not a hyperband
MAX_KEYS = 8
MAX_VALUES_PER_KEY = 64
FREE_FORM = ("env_config",)  # dict fields: any key below them is the env's own

FieldError = dict[str, str]  # {"field", "message"}, as InvalidInput carries them


@dataclass(frozen=True)
class Member:
    group: int
    point: dict[str, Any]
    seed: int
    config: PPOConfig


@dataclass(frozen=True)
class Plan:
    points: list[dict[str, Any]]  # by group index
    members: list[Member]


def label(point: dict[str, Any]) -> str:
    """'lr=0.001, model.hidden_sizes=[64, 64]' (strings bare)."""
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in point.items())


def nested(point: dict[str, Any]) -> dict[str, Any]:
    """{"stop.env_steps": 5} -> {"stop": {"env_steps": 5}} (merged into the base config)."""
    out: dict[str, Any] = {}
    for key, value in point.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def key_error(key: str) -> str | None:
    """Why `key` cannot be a grid key, or None."""
    parts = key.split(".")
    if any(not p for p in parts):
        return "not a field name"
    if parts[0] == "seed":
        return "seeds are set by `seeds`, not by the grid"
    model: type[BaseModel] = PPOConfig
    for i, part in enumerate(parts):
        here = ".".join(parts[: i + 1])
        if part not in model.model_fields:
            return unknown_field_message(key)
        if i == len(parts) - 1:
            return None
        annotation = model.model_fields[part].annotation
        if i == 0 and part in FREE_FORM:
            return None
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
            continue
        if typing.get_origin(annotation) is dict:
            return None
        return f"{here} has no fields below it"
    return None


def overlap_error(key: str, keys: Iterable[str], what: str) -> str | None:
    """Why `key` cannot stand beside `keys`: it lies inside another one ("model" and
    "model.hidden_sizes" would set one field twice)."""
    inside = (other for other in keys if other != key and key.startswith(other + "."))
    return next((f"overlaps {what} {other!r}" for other in inside), None)


def _check_shape(data: SweepCreate) -> list[FieldError]:
    errors: list[FieldError] = []
    if "seed" in data.config:
        errors.append({"field": "config.seed", "message": "seeds are set by `seeds`"})
    if len(data.grid) > MAX_KEYS:
        errors.append({"field": "grid", "message": f"at most {MAX_KEYS} keys"})
    for key, values in data.grid.items():
        problem = key_error(key) or overlap_error(key, data.grid, "grid key")
        if problem is None and not values:
            problem = "needs at least one value"
        if problem is None and len(values) > MAX_VALUES_PER_KEY:
            problem = f"at most {MAX_VALUES_PER_KEY} values"
        if problem is None and len({json.dumps(v, sort_keys=True) for v in values}) < len(values):
            problem = "values must be distinct"
        if problem:
            errors.append({"field": f"grid.{key}", "message": problem})
    for i, seed in enumerate(data.seeds):
        if seed < 0:
            errors.append({"field": f"seeds.{i}", "message": "must be >= 0"})
        elif seed > MAX_SEED:
            errors.append({"field": f"seeds.{i}", "message": f"must be <= {MAX_SEED}"})
    if len(set(data.seeds)) < len(data.seeds):
        errors.append({"field": "seeds", "message": "seeds must be distinct"})
    size = len(data.seeds)
    for values in data.grid.values():
        size *= max(1, len(values))
    if size > MAX_MEMBERS:
        errors.append(
            {
                "field": "grid",
                "message": f"{size} members (grid points x seeds); at most {MAX_MEMBERS}",
            }
        )
    return errors


def _blame(error: dict[str, Any], point: dict[str, Any], index: dict[str, int]) -> FieldError:
    """Name the grid value (or base config field) a member's validation error comes from."""
    loc = ".".join(str(p) for p in error["loc"])
    message = config_error_message(error)
    for key in point:
        if loc == key or loc.startswith(key + "."):
            detail = message if loc == key else f"{loc}: {message}"
            return {"field": f"grid.{key}.{index[key]}", "message": detail}
    if loc:
        return {"field": f"config.{loc}", "message": message}
    return {"field": "grid", "message": f"{label(point) or 'the base config'}: {message}"}


def plan(data: SweepCreate) -> Plan:
    """Every member's resolved config; InvalidInput naming every bad key, value or field."""
    errors = _check_shape(data)
    if errors:
        raise InvalidInput("the sweep is invalid", fields=errors)
    keys = list(data.grid)
    combos = list(itertools.product(*(range(len(data.grid[k])) for k in keys)))
    points = [{k: data.grid[k][i] for k, i in zip(keys, combo, strict=True)} for combo in combos]
    members: list[Member] = []
    seen: dict[str, FieldError] = {}
    for group, (point, combo) in enumerate(zip(points, combos, strict=True)):
        index = dict(zip(keys, combo, strict=True))
        merged = deep_merge(data.config, nested(point))
        for seed in data.seeds:
            try:
                resolved = resolve_config({**merged, "seed": seed}).config
            except ValidationError as exc:
                errors_ = [dict(error) for error in exc.errors()]
            else:
                why = unknown_env_message(resolved.env_id)
                errors_ = [] if why is None else [{"loc": ("env_id",), "msg": why}]
            if errors_:
                for error in errors_:
                    field = _blame(error, point, index)
                    seen.setdefault(f"{field['field']}|{field['message']}", field)
                break  # the other seeds fail alike
            members.append(Member(group=group, point=point, seed=seed, config=resolved))
    if seen:
        raise InvalidInput("the sweep is invalid", fields=list(seen.values())[:50])
    return Plan(points=points, members=members)
