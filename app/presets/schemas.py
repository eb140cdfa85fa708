"""Wire models of the presets API."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.core.json_bounds import JsonObject


class EnvSettingsPublic(BaseModel):
    env: str = Field(description="Base name of the env the entry applies to, e.g. 'Acrobot'.")
    source: str
    note: str
    fields: dict[str, Any] = Field(description="Dotted PPOConfig paths -> values.")


class PresetPublic(BaseModel):
    name: str
    title: str
    source: str
    note: str
    members: list[str] = Field(description="Env base names that 'auto' maps to this preset.")
    namespaces: list[str] = Field(description="gymnasium namespaces ('ALE') mapped to it.")
    fields: dict[str, Any] = Field(description="Dotted PPOConfig paths -> values.")
    envs: list[EnvSettingsPublic] = Field(description="Per-env entries on top of `fields`.")


class PresetList(BaseModel):
    items: list[PresetPublic]


class ResolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: JsonObject = Field(
        default_factory=dict, description="A partial PPOConfig, as an experiment would get it."
    )


class ResolvedConfig(BaseModel):
    config: dict[str, Any] = Field(description="The resolved config, as it would be stored.")
    preset: str = Field(description="The preset applied ('none': PPOConfig's defaults).")
    env_settings: str | None = Field(description="The per-env entry applied, if any.")
    sources: list[str]
    preset_fields: list[str] = Field(
        description="Dotted paths whose value came from the preset, not from the request."
    )
