"""Preset resolution: PPOConfig defaults < preset (family, then per-env) < the user's fields.

`resolve_config(raw)` takes what a user wrote (a partial PPOConfig as JSON) and returns the
resolved, validated config plus what the preset did. The resolved config names the preset that
was applied (never "auto") and sets every field, so resolving it again changes nothing. Nested
sections (model, stop, env_config) merge key by key.

Pure pydantic and dict work: the API imports this module (no torch, gymnasium or Ray).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trainer.config import PPOConfig
from trainer.presets import PRESETS, Preset

_VERSION = re.compile(r"-v\d+$")


def env_name(env_id: str) -> str:
    """The registered name of an id: "ale_py:ALE/Pong-v5" -> "ALE/Pong-v5"."""
    return env_id.partition(":")[2] if ":" in env_id else env_id


def env_namespace(env_id: str) -> str | None:
    """gymnasium's namespace of an id: "ALE/Pong-v5" -> "ALE"; None without one."""
    name = env_name(env_id)
    return name.split("/", 1)[0] if "/" in name else None


def env_base_name(env_id: str) -> str:
    """The id without module, namespace and version: "ALE/Pong-v5" -> "Pong"."""
    return _VERSION.sub("", env_name(env_id).rsplit("/", 1)[-1])


def family_of(env_id: str) -> str | None:
    """The preset "auto" picks for `env_id`, or None (unknown env: PPOConfig's defaults)."""
    namespace, base = env_namespace(env_id), env_base_name(env_id)
    for preset in PRESETS.values():
        if namespace in preset.namespaces or (namespace is None and base in preset.members):
            return preset.name
    return None


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` on top of `base`; dicts on both sides merge key by key, anything else replaces."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def leaf_paths(data: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of the values in a nested dict ("stop.env_steps"); env_config keys too. An
    empty dict has none (it merges into, and so keeps, what is under it)."""
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from leaf_paths(value, f"{path}.")
        else:
            yield path


@dataclass(frozen=True)
class Resolution:
    """A resolved config and what its preset contributed."""

    config: PPOConfig
    preset: str  # the applied preset's name, or "none"
    env_settings: str | None  # base name of the per-env entry applied ("Acrobot"), if any
    sources: tuple[str, ...]  # family source, then the per-env entry's
    fields: tuple[str, ...]  # dotted paths whose value came from the preset (not the user)

    def summary(self) -> str:
        """One line for logs and the CLI."""
        if self.preset == "none":
            return "preset: none (PPOConfig defaults)"
        which = self.preset + (f" + {self.env_settings}" if self.env_settings else "")
        return f"preset: {which}, set {len(self.fields)} fields ({'; '.join(self.sources)})"


def preset_values(preset: Preset, env_id: str) -> tuple[dict[str, Any], str | None, list[str]]:
    """The preset's values for `env_id` (family values, then the env's own entry)."""
    values = copy.deepcopy(preset.values)
    sources = [preset.source]
    entry = preset.envs.get(env_base_name(env_id))
    if entry is None:
        return values, None, sources
    sources.append(entry.source)
    return deep_merge(values, entry.values), env_base_name(env_id), sources


def resolve_config(raw: Mapping[str, Any]) -> Resolution:
    """Validate a (partial) config with its preset applied. Raises pydantic's ValidationError
    for bad user fields, named by their own paths, as PPOConfig.model_validate does."""
    user = dict(raw)
    requested = user.get("preset", "auto")
    env_id = user.get("env_id", PPOConfig.model_fields["env_id"].default)
    if requested == "auto" and isinstance(env_id, str):
        name = family_of(env_id) or "none"
    else:
        name = requested
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None or not isinstance(env_id, str):
        # "none", or a value PPOConfig will reject with a proper field error.
        config = PPOConfig.model_validate({**user, "preset": name})
        return Resolution(config, str(config.preset), None, (), ())
    values, env_settings, sources = preset_values(preset, env_id)
    merged = deep_merge(values, user)
    merged["preset"] = preset.name
    config = PPOConfig.model_validate(merged)
    user_paths = set(leaf_paths(user))
    fields = tuple(
        p for p in leaf_paths(values) if p not in user_paths and not _under(p, user_paths)
    )
    return Resolution(config, preset.name, env_settings, tuple(sources), fields)


def _under(path: str, user_paths: set[str]) -> bool:
    """A user value higher up (e.g. a whole "stop" or "env_config") replaced this path."""
    parts = path.split(".")
    return any(".".join(parts[:i]) in user_paths for i in range(1, len(parts)))
