"""An experiment's config at rest: a column that stores a `PPOConfig` and loads it back typed.

A config is validated once, at the boundary (`app.experiments.service.validate_config`), and
only a `PPOConfig` can be written to the column. Reading it back validates the stored JSON
again (about 15 us): a row written by an older version whose rules were looser, or edited by
hand, loads as a `StaleConfig` that keeps the stored JSON and says which fields fail. Such a
row is still listed and watched, and its job is refused (409) and failed with the reason,
never run on a config nobody validated. Schema changes that retire or tighten a field come
with a data migration that rewrites the stored rows (migrations/versions/0011_*), so a stale
config is the exception, not a state the code is built around.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from app.core.errors import field_errors
from trainer.config import PPOConfig

MAX_REASON_FIELDS = 10


@dataclass(frozen=True)
class StaleConfig:
    """A stored config that no longer validates: the JSON as stored and its field errors
    (`{"field": "config.<path>", "message": ...}`)."""

    raw: Any
    errors: list[dict[str, str]]

    def to_json_dict(self) -> dict[str, Any]:
        """The stored JSON (an object, or {} for anything else), as PPOConfig.to_json_dict."""
        return dict(self.raw) if isinstance(self.raw, dict) else {}

    @property
    def reason(self) -> str:
        """One line for a status reason: the problems, never the stored values."""
        problems = "; ".join(
            f"{e['field']}: {e['message']}" for e in self.errors[:MAX_REASON_FIELDS]
        )
        return f"its stored config no longer validates: {problems}"


StoredConfig = PPOConfig | StaleConfig


def top_level_int(config: StoredConfig, name: str) -> int:
    """An integer field of the config (checkpoint_every, keep_checkpoints): the typed value,
    or for a stale config the stored one where it is a non-negative integer, else the field's
    default (a run whose config went stale is still watched, and its checkpoints kept)."""
    if isinstance(config, PPOConfig):
        return int(getattr(config, name))
    value = config.to_json_dict().get(name)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return int(PPOConfig.model_fields[name].default)


def load_config(raw: Any) -> StoredConfig:
    """The stored JSON as a PPOConfig, or a StaleConfig saying why it is not one."""
    try:
        return PPOConfig.model_validate(raw)
    except ValidationError as exc:
        return StaleConfig(raw, field_errors(exc.errors(), "config"))


class PPOConfigColumn(TypeDecorator[StoredConfig]):
    """JSON in the database, `PPOConfig | StaleConfig` in Python. Binding anything but those
    is a programming error (an unvalidated dict must not reach the table)."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None or isinstance(value, PPOConfig | StaleConfig):
            return None if value is None else value.to_json_dict()
        raise TypeError(
            f"the config column stores a validated PPOConfig, not {type(value).__name__}"
        )

    def process_result_value(self, value: Any, dialect: Dialect) -> StoredConfig | None:
        return None if value is None else load_config(value)
