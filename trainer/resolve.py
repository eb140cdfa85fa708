"""Preset resolution: PPOConfig defaults < preset (family, then per-env) < the user's fields.

`resolve_config(raw)` takes what a user wrote (a partial PPOConfig as JSON) and returns the
resolved, validated config plus what the preset did. The resolved config names the preset that
was applied (never "auto") and sets every field, so resolving it again changes nothing. Nested
sections (model, stop, env_config) merge key by key.

Last come the defaults that depend on where the run learns (`derived_defaults`), for fields
neither the user nor the preset set: overlapped sampling when the Learner is on a GPU, and torch
threads for a CNN on a CPU Learner. They are resolved once, on the machine that resolves (the
CLI's, or the API's for submitted experiments), and stored like every other field.

Pure pydantic and dict work: the API imports this module (no torch, gymnasium or Ray).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from trainer.config import PPOConfig
from trainer.presets import PRESETS, ZOO_CARTPOLE, EnvSettings, Preset

_VERSION = re.compile(r"-v\d+$")
# Presets whose envs have image observations, so the module's encoder is the Nature CNN.
_CNN_PRESETS = frozenset({"atari"})
# Hidden width from which a CPU Learner's matmuls are worth a thread per core.
_WIDE_MLP = 256


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, as a container's CPU set)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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


def _auto_env_settings(env_id: str) -> EnvSettings | None:
    """The per-env entry of the preset "auto" picks for `env_id`, if it has one."""
    family = family_of(env_id)
    return None if family is None else PRESETS[family].envs.get(env_base_name(env_id))


def zoo_entry(env_id: str) -> dict[str, Any] | None:
    """The rl-zoo entry (rl-zoo's keys, verbatim) that `env_id`'s preset was ported from, or
    None: what a benchmark runs on the SB3 side to compare like with like."""
    if family_of(env_id) == "classic_control" and env_base_name(env_id) == "CartPole":
        return dict(ZOO_CARTPOLE)
    settings = _auto_env_settings(env_id)
    return None if settings is None or settings.zoo_entry is None else dict(settings.zoo_entry)


def zoo_env_kwargs(env_id: str) -> dict[str, Any]:
    """The gymnasium.make kwargs `env_id`'s preset gives the env alongside its rl-zoo entry
    (rl-zoo's `--env-kwargs`): what the SB3 side of a benchmark must make its envs with."""
    settings = _auto_env_settings(env_id)
    return {} if settings is None else dict(settings.values.get("env_config", {}))


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
    derived: tuple[str, ...] = ()  # paths set by derived_defaults (also listed in fields)

    def summary(self) -> str:
        """One line for logs and the CLI."""
        derived = f"; for this machine: {', '.join(self.derived)}" if self.derived else ""
        if self.preset == "none":
            return f"preset: none (PPOConfig defaults{derived})"
        which = self.preset + (f" + {self.env_settings}" if self.env_settings else "")
        preset_set = len(self.fields) - len(self.derived)
        return f"preset: {which}, set {preset_set} fields ({'; '.join(self.sources)}){derived}"


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
        merged = {**user, "preset": name}
        config = PPOConfig.model_validate(merged)
        config, derived = _with_derived(config, merged, set(user))
        return Resolution(config, str(config.preset), None, (), derived, derived)
    values, env_settings, sources = preset_values(preset, env_id)
    merged = deep_merge(values, user)
    merged["preset"] = preset.name
    config = PPOConfig.model_validate(merged)
    config, derived = _with_derived(config, merged, set(user) | set(values))
    user_paths = set(leaf_paths(user))
    fields = tuple(
        p for p in leaf_paths(values) if p not in user_paths and not _under(p, user_paths)
    )
    return Resolution(config, preset.name, env_settings, tuple(sources), fields + derived, derived)


def derived_defaults(config: PPOConfig, taken: set[str]) -> dict[str, Any]:
    """Defaults that depend on where `config` learns, for top-level fields not in `taken`.

    - overlap_sampling on when the Learner is on a GPU: the SGD runs on the device while the
      CPU samples, so alternating them leaves each side idle half the time (the end-to-end rate
      of an alternating loop is capped near 50 % of the bare env's). On a CPU Learner both
      sides compete for the same cores, and off gives exactly the alternating loop.
    - torch_num_threads for a CNN on a CPU Learner: every core this process may use (serial
      mode), or the CPUs Ray reserves for each Learner actor. PPOConfig's 1 is right for
      CartPole's 64x64 MLP, where threads cost more than they give; a Nature CNN's convolutions
      are ~1.6x faster on two threads than on one. Sampling and learning alternate, so the
      env's threads and torch's share the cores without competing. The same for an MLP with
      hidden layers 256 wide or wider (rl-zoo's MuJoCo policy): the hand-written step's
      64 x 256 x 256 matmuls run ~1.6x faster on two BLAS threads (HalfCheetah's minibatch step
      1.03 -> 0.80 ms); at 64 wide threads gain nothing.
    """
    out: dict[str, Any] = {}
    gpu_learner = config.num_gpus_per_learner > 0
    if gpu_learner and "overlap_sampling" not in taken:
        out["overlap_sampling"] = True
    wide = config.preset in _CNN_PRESETS or max(config.model.hidden_sizes, default=0) >= _WIDE_MLP
    if not gpu_learner and wide and "torch_num_threads" not in taken:
        cores = usable_cores() if config.num_learners == 0 else int(config.num_cpus_per_learner)
        out["torch_num_threads"] = max(1, min(cores, 256))
    return out


def _with_derived(
    config: PPOConfig, merged: dict[str, Any], taken: set[str]
) -> tuple[PPOConfig, tuple[str, ...]]:
    derived = derived_defaults(config, taken)
    if not derived:
        return config, ()
    return PPOConfig.model_validate({**merged, **derived}), tuple(derived)


def _under(path: str, user_paths: set[str]) -> bool:
    """A user value higher up (e.g. a whole "stop" or "env_config") replaced this path."""
    parts = path.split(".")
    return any(".".join(parts[:i]) in user_paths for i in range(1, len(parts)))
