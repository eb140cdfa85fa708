"""PPOConfig's resource bounds and finite floats: a config no machine can run is refused with
the field named, while every preset and benchmark config stays valid."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from trainer import presets
from trainer.config import (
    MAX_HIDDEN_WIDTH,
    MAX_TRAIN_BATCH,
    PPOConfig,
)


def error_fields(raw: dict[str, Any]) -> set[str]:
    with pytest.raises(ValidationError) as info:
        PPOConfig.model_validate(raw)
    return {".".join(str(p) for p in err["loc"]) for err in info.value.errors()}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"train_batch_size_per_learner": 2_000_000_000}, "train_batch_size_per_learner"),
        ({"train_batch_size_per_learner": MAX_TRAIN_BATCH + 1}, "train_batch_size_per_learner"),
        ({"minibatch_size": MAX_TRAIN_BATCH + 1}, "minibatch_size"),
        ({"model": {"hidden_sizes": [100_000, 100_000]}}, "model.hidden_sizes"),
        ({"model": {"hidden_sizes": [MAX_HIDDEN_WIDTH + 1]}}, "model.hidden_sizes"),
        ({"model": {"hidden_sizes": [8192, 8192]}}, "model.hidden_sizes"),  # 67M weights
        ({"model": {"hidden_sizes": [0]}}, "model.hidden_sizes"),
        ({"model": {"cnn_channels": [4096]}}, "model.cnn_channels"),
        ({"num_envs_per_env_runner": 5000}, "num_envs_per_env_runner"),
        ({"num_env_runners": 1000}, "num_env_runners"),
        ({"num_learners": 100}, "num_learners"),
        ({"num_epochs": 10_000}, "num_epochs"),
        ({"num_cpus_per_env_runner": 1e6}, "num_cpus_per_env_runner"),
        ({"num_gpus_per_learner": 100}, "num_gpus_per_learner"),
        ({"seed": 2**40}, "seed"),
        ({"stop": {"env_steps": 2**60}}, "stop.env_steps"),
        ({"stop": {"wall_seconds": 1e12}}, "stop.wall_seconds"),
        ({"checkpoint_every": 10**9}, "checkpoint_every"),
        ({"keep_checkpoints": 10**6}, "keep_checkpoints"),
        ({"env_id": "x" * 201}, "env_id"),
        ({"model": {"log_std_init": 3.0}}, "model.log_std_init"),
        ({"model": {"log_std_init": -11.0}}, "model.log_std_init"),
        ({"model": {"ortho_init": "sometimes"}}, "model.ortho_init"),
        ({"normalize_advantages_over": "epoch"}, "normalize_advantages_over"),
    ],
)
def test_sizes_beyond_their_bound_are_refused_by_name(raw: dict[str, Any], field: str) -> None:
    assert field in error_fields(raw)


FLOAT_FIELDS = [
    "gamma",
    "gae_lambda",
    "lr",
    "clip_param",
    "vf_clip_param",
    "vf_loss_coeff",
    "entropy_coeff",
    "kl_coeff",
    "kl_target",
    "grad_clip",
    "clip_rewards",
    "num_cpus_per_env_runner",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
]


def test_every_float_field_is_listed() -> None:
    floats = {
        name for name, info in PPOConfig.model_fields.items() if "float" in str(info.annotation)
    }
    assert floats == set(FLOAT_FIELDS)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
@pytest.mark.parametrize("field", FLOAT_FIELDS)
def test_non_finite_floats_are_refused(field: str, literal: str) -> None:
    raw = json.loads(f'{{"{field}": {literal}}}')  # as the API's JSON parser reads it
    assert field in error_fields(raw)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"stop": {"episode_return_mean": float("nan")}}, "stop.episode_return_mean"),
        ({"stop": {"wall_seconds": float("inf")}}, "stop.wall_seconds"),
        ({"env_config": {"x": float("nan")}}, "env_config"),
        ({"env_config": {"x": [{"y": float("-inf")}]}}, "env_config"),
        ({"env_config": {"x": "a\x00b"}}, "env_config"),
    ],
)
def test_nested_non_finite_values_are_refused(raw: dict[str, Any], field: str) -> None:
    assert field in error_fields(raw)


def test_deeply_nested_env_config_is_refused() -> None:
    value: Any = 1
    for _ in range(40):
        value = [value]
    assert "env_config" in error_fields({"env_config": {"deep": value}})


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_log_std_init_is_refused(literal: str) -> None:
    raw = json.loads(f'{{"model": {{"log_std_init": {literal}}}}}')
    assert "model.log_std_init" in error_fields(raw)


@pytest.mark.parametrize("name", sorted(presets.PRESETS))
def test_every_preset_stays_valid(name: str) -> None:
    PPOConfig.model_validate(presets.PRESETS[name].values)


@pytest.mark.parametrize(
    "raw",
    [
        # the Atari benchmark's largest run: 64 envs x 128 steps
        {"num_envs_per_env_runner": 64, "train_batch_size_per_learner": 8192},
        {"num_envs_per_env_runner": 4096, "train_batch_size_per_learner": MAX_TRAIN_BATCH},
        {"model": {"hidden_sizes": [4096, 4096, 4096]}},  # 2 x 16.8M weights: the limit
        {"model": {"hidden_sizes": [MAX_HIDDEN_WIDTH, 64]}},
        {"env_config": {"frameskip": 4, "full_action_space": False, "x": [1.5, None, "a"]}},
    ],
)
def test_large_but_sane_configs_stay_valid(raw: dict[str, Any]) -> None:
    PPOConfig.model_validate(raw)
