"""Presets: the tables as wire data, and resolution with bad fields as a 422 by field."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.core.errors import InvalidInput, field_errors
from app.presets.schemas import EnvSettingsPublic, PresetPublic, ResolvedConfig
from trainer.env_catalog import unknown_env_message
from trainer.field_names import config_error_message
from trainer.presets import PRESETS
from trainer.resolve import Resolution, deep_merge, leaf_paths, resolve_config


def _flat(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in leaf_paths(values):
        node: Any = values
        for part in path.split("."):
            node = node[part]
        out[path] = node
    return out


def list_presets() -> list[PresetPublic]:
    return [
        PresetPublic(
            name=p.name,
            title=p.title,
            source=p.source,
            note=p.note,
            members=sorted(p.members),
            namespaces=sorted(p.namespaces),
            fields=_flat(p.values),
            envs=[
                EnvSettingsPublic(
                    env=env,
                    source=entry.source,
                    note=entry.note,
                    fields=_flat(deep_merge(p.values, entry.values)),
                )
                for env, entry in sorted(p.envs.items())
            ],
        )
        for p in PRESETS.values()
    ]


def resolve(raw: dict[str, Any]) -> Resolution:
    """Resolve a config's preset and validate it; every bad field is named `config.<path>`,
    an env id that no installed package registers included (trainer/env_catalog.py)."""
    try:
        resolution = resolve_config(raw)
    except ValidationError as exc:
        fields = field_errors(exc.errors(), "config", config_error_message)
        raise InvalidInput("the experiment config is invalid", fields=fields) from None
    if (why := unknown_env_message(resolution.config.env_id)) is not None:
        fields = [{"field": "config.env_id", "message": why}]
        raise InvalidInput("the experiment config is invalid", fields=fields)
    return resolution


def resolved_public(raw: dict[str, Any]) -> ResolvedConfig:
    resolution = resolve(raw)
    return ResolvedConfig(
        config=resolution.config.to_json_dict(),
        preset=resolution.preset,
        env_settings=resolution.env_settings,
        sources=list(resolution.sources),
        preset_fields=list(resolution.fields),
    )
