"""A study's search space checked against PPOConfig, and each trial's config from its params.

Keys are PPOConfig field names, dotted for nested ones, as a sweep's grid keys are
(app/sweeps/grid.py). A range's field must be numeric (an int range an integer field), its
bounds ordered (log scale above zero), and the config must resolve at both ends and at every
categorical choice, so a trial never fails validation at launch. Every problem is collected and
reported at once as a 422 naming `space.<key>[.low|.high|.choices.<i>]`, `config.<field>`,
`objective.metric` or `pruner.interval_env_steps`.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from app.core.errors import InvalidInput
from app.studies.schemas import Categorical, FloatRange, IntRange, StudyCreate
from app.sweeps.grid import FREE_FORM, key_error, nested, overlap_error
from trainer.config import PPOConfig
from trainer.env_catalog import unknown_env_message
from trainer.field_names import config_error_message
from trainer.resolve import deep_merge, resolve_config
from trainer.wire import STUDY_METRICS

FieldError = dict[str, str]
Spec = FloatRange | IntRange | Categorical
INTERVALS_PER_BUDGET = 10  # default: ten intermediate values over a trial's budget
MAX_INTERVALS = 1_000  # intermediate values are recomputed each tick: keep them few


@dataclass(frozen=True)
class Checked:
    """What creating the study needs beyond the request: the pruner's interval."""

    interval_env_steps: int


def _leaf_annotation(key: str) -> Any:
    """The field's annotation (None inside free-form dicts such as env_config)."""
    parts = key.split(".")
    if parts[0] in FREE_FORM:
        return None
    model: type[BaseModel] = PPOConfig
    annotation: Any = None
    for part in parts:
        annotation = model.model_fields[part].annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        elif typing.get_origin(annotation) is dict:
            return None
    return annotation


def _kinds(annotation: Any) -> set[type]:
    """The plain types an annotation admits: `float | None` -> {float, NoneType}."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return {a for arg in typing.get_args(annotation) for a in _kinds(arg)}
    if typing.get_origin(annotation) is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    return {annotation} if isinstance(annotation, type) else {object}


def _range_problems(key: str, spec: FloatRange | IntRange) -> list[FieldError]:
    field = f"space.{key}"
    annotation = _leaf_annotation(key)
    if annotation is not None:
        kinds = _kinds(annotation) - {type(None)}
        if isinstance(spec, FloatRange) and not kinds & {float}:
            why = "an integer field: use an int range" if kinds == {int} else "not a number"
            return [{"field": f"{field}.type", "message": f"{key} is {why}"}]
        if isinstance(spec, IntRange) and not kinds & {int, float}:
            return [{"field": f"{field}.type", "message": f"{key} is not a number"}]
    problems = []
    if spec.low > spec.high:
        problems.append({"field": f"{field}.low", "message": f"low {spec.low} > high {spec.high}"})
    if spec.log and spec.low <= 0:
        problems.append({"field": f"{field}.low", "message": "a log scale needs low > 0"})
    stepped = spec.step is not None if isinstance(spec, FloatRange) else spec.step != 1
    if spec.log and stepped:
        problems.append({"field": f"{field}.step", "message": "a log scale takes no step"})
    return problems


def _shape_problems(data: StudyCreate) -> list[FieldError]:
    errors: list[FieldError] = []
    for key, spec in data.space.items():
        problem = key_error(key) or overlap_error(key, data.space, "key")
        if problem:
            errors.append({"field": f"space.{key}", "message": problem})
        elif isinstance(spec, FloatRange | IntRange):
            errors.extend(_range_problems(key, spec))
        elif len({json.dumps(c, sort_keys=True) for c in spec.choices}) < len(spec.choices):
            errors.append({"field": f"space.{key}.choices", "message": "must be distinct"})
    if data.objective.metric not in STUDY_METRICS:
        known = ", ".join(STUDY_METRICS)
        errors.append(
            {"field": "objective.metric", "message": f"not a metric trials log; one of: {known}"}
        )
    return errors


def _ends(key: str, spec: Spec) -> list[tuple[str, Any]]:
    """(field name, value) of the values that must resolve: both bounds, every choice."""
    if isinstance(spec, Categorical):
        return [(f"space.{key}.choices.{i}", c) for i, c in enumerate(spec.choices)]
    return [(f"space.{key}.low", spec.low), (f"space.{key}.high", spec.high)]


def _resolve(raw: dict[str, Any]) -> tuple[PPOConfig | None, list[dict[str, Any]]]:
    try:
        config = resolve_config(raw).config
    except ValidationError as exc:
        return None, [dict(e) for e in exc.errors()]
    why = unknown_env_message(config.env_id)
    return (config, []) if why is None else (None, [{"loc": ("env_id",), "msg": why}])


def _corner(data: StudyCreate) -> dict[str, Any]:
    """Every parameter at its first end (low, or the first choice)."""
    return {key: _ends(key, spec)[0][1] for key, spec in data.space.items()}


def check(data: StudyCreate) -> Checked:
    """The study's interval; InvalidInput naming every bad key, bound, choice or field."""
    errors = _shape_problems(data)
    if errors:
        raise InvalidInput("the study is invalid", fields=errors)
    corner = _corner(data)
    base, problems = _resolve(deep_merge(data.config, nested(corner)))
    for error in problems:
        loc = ".".join(str(p) for p in error["loc"])
        owner = next((k for k in data.space if loc == k or loc.startswith(k + ".")), None)
        field = _ends(owner, data.space[owner])[0][0] if owner else f"config.{loc}"
        errors.append({"field": field, "message": config_error_message(error)})
    if errors or base is None:
        raise InvalidInput("the study is invalid", fields=errors)
    for key, spec in data.space.items():
        for field, value in _ends(key, spec)[1:]:
            _, problems = _resolve(deep_merge(data.config, nested({**corner, key: value})))
            errors.extend(
                {"field": field, "message": config_error_message(e)} for e in problems[:1]
            )
    budgets = [base.stop.env_steps]
    if "stop.env_steps" in data.space:
        spec = data.space["stop.env_steps"]
        budgets = [v for _, v in _ends("stop.env_steps", spec) if isinstance(v, int)]
    if None in budgets or not budgets:
        errors.append(
            {
                "field": "config.stop.env_steps",
                "message": "a study's trials need an env-step budget (stop.env_steps)",
            }
        )
    if errors:
        raise InvalidInput("the study is invalid", fields=errors[:50])
    interval = data.pruner.interval_env_steps
    if interval is None:
        interval = max(1, min(b for b in budgets if b is not None) // INTERVALS_PER_BUDGET)
    most = max(b for b in budgets if b is not None) // interval
    if most > MAX_INTERVALS:
        message = f"{most:,} intervals in a budget; at most {MAX_INTERVALS:,}"
        raise InvalidInput(
            "the study is invalid",
            fields=[{"field": "pruner.interval_env_steps", "message": message}],
        )
    return Checked(interval_env_steps=interval)


def trial_config(data_config: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The trial's resolved config: the base config with its params merged in."""
    return resolve_config(deep_merge(data_config, nested(params))).config.to_json_dict()
