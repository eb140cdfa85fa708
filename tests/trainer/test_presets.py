"""Presets: which one an env id picks, the override order (defaults < preset < user), what the
resolution reports, idempotence, and that every table entry is a valid, cited PPOConfig."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from trainer.config import PPOConfig, PresetName
from trainer.presets import PRESETS
from trainer.resolve import deep_merge, env_base_name, family_of, leaf_paths, resolve_config

# One env id per preset, and one per per-env entry.
FAMILY_IDS = {
    "classic_control": "CartPole-v1",
    "classic_control_continuous": "MountainCarContinuous-v0",
    "box2d": "LunarLander-v3",
    "mujoco": "HalfCheetah-v5",
    "atari": "ALE/Breakout-v5",
}
ENV_IDS = [
    *FAMILY_IDS.values(),
    "Acrobot-v1",
    "MountainCar-v0",
    "Pendulum-v1",
    "LunarLanderContinuous-v3",
    "BipedalWalker-v3",
    "Swimmer-v5",
    "ALE/Pong-v5",
    "my_envs:Custom-v0",
]


def _without_preset(config: PPOConfig) -> dict[str, Any]:
    data = config.to_json_dict()
    data.pop("preset")
    return data


@pytest.mark.parametrize(
    ("env_id", "family"),
    [
        ("CartPole-v1", "classic_control"),
        ("Acrobot-v1", "classic_control"),
        ("Pendulum-v1", "classic_control_continuous"),
        ("LunarLander-v3", "box2d"),
        ("Walker2d-v5", "mujoco"),
        ("ALE/Pong-v5", "atari"),
        ("ale_py:ALE/Pong-v5", "atari"),
        ("my_envs:ShortPole-v0", None),
        ("Pong-v5", None),  # not the ALE namespace: nothing known about it
        ("Other/CartPole-v1", None),  # a namespace that is not gymnasium's own
    ],
)
def test_family_from_env_id(env_id: str, family: str | None) -> None:
    assert family_of(env_id) == family


def test_base_names() -> None:
    assert env_base_name("ale_py:ALE/Pong-v5") == "Pong"
    assert env_base_name("Acrobot-v1") == "Acrobot"
    assert env_base_name("my_envs:ShortPole") == "ShortPole"


def test_preset_names_match_the_config_literal() -> None:
    assert set(get_args(PresetName)) == {"auto", "none", *PRESETS}
    assert set(FAMILY_IDS) == set(PRESETS)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_and_env_entry_is_a_valid_cited_config(name: str) -> None:
    preset = PRESETS[name]
    assert preset.source and preset.title
    PPOConfig.model_validate({**preset.values, "env_id": FAMILY_IDS[name]})
    for base, entry in preset.envs.items():
        assert entry.source and base in preset.members
        PPOConfig.model_validate(deep_merge(preset.values, entry.values))


def test_cartpole_keeps_exactly_the_defaults() -> None:
    """CartPole-v1's time-to-475 is a guarded benchmark: its preset changes nothing."""
    resolved = resolve_config({"env_id": "CartPole-v1"})
    assert resolved.preset == "classic_control" and resolved.fields == ()
    assert _without_preset(resolved.config) == _without_preset(PPOConfig())
    assert _without_preset(resolve_config({}).config) == _without_preset(PPOConfig())


def test_defaults_then_preset_then_user() -> None:
    user = {
        "env_id": "Acrobot-v1",
        "gamma": 0.97,  # the preset says 0.99
        "stop": {"wall_seconds": 60},  # merges with the preset's stop.env_steps
        "model": {"activation": "relu"},
    }
    resolved = resolve_config(user)
    config = resolved.config
    assert resolved.preset == "classic_control" and resolved.env_settings == "Acrobot"
    assert config.gamma == 0.97  # user
    assert config.gae_lambda == 0.94 and config.normalize_rewards  # preset (per-env entry)
    assert config.kl_target == PPOConfig().kl_target  # default (nobody set it)
    assert config.stop.env_steps == 1_000_000 and config.stop.wall_seconds == 60
    assert config.model.activation == "relu" and config.model.hidden_sizes == (64, 64)
    assert "gamma" not in resolved.fields and "model.activation" not in resolved.fields
    assert {"gae_lambda", "stop.env_steps", "model.hidden_sizes"} <= set(resolved.fields)
    assert resolved.sources[-1].endswith("Acrobot-v1")


def test_env_config_merges_key_by_key() -> None:
    resolved = resolve_config({"env_id": "ALE/Pong-v5", "env_config": {"num_threads": 4}})
    assert resolved.config.env_config == {"repeat_action_probability": 0.0, "num_threads": 4}
    assert "env_config.repeat_action_probability" in resolved.fields
    mine = resolve_config(
        {"env_id": "ALE/Pong-v5", "env_config": {"repeat_action_probability": 0.25}}
    )
    assert mine.config.env_config == {"repeat_action_probability": 0.25}
    assert "env_config.repeat_action_probability" not in mine.fields


def test_a_preset_named_explicitly_and_none() -> None:
    atari_on_cartpole = resolve_config({"env_id": "CartPole-v1", "preset": "atari"})
    assert atari_on_cartpole.preset == "atari" and atari_on_cartpole.config.clip_rewards == 1.0
    plain = resolve_config({"env_id": "Pendulum-v1", "preset": "none"})
    assert plain.preset == "none" and plain.fields == ()
    assert _without_preset(plain.config) == _without_preset(PPOConfig(env_id="Pendulum-v1"))
    unknown = resolve_config({"env_id": "my_envs:Custom-v0"})
    assert unknown.config.preset == "none"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_resolving_a_resolved_config_changes_nothing(env_id: str) -> None:
    first = resolve_config({"env_id": env_id, "seed": 3, "stop": {"wall_seconds": 30}})
    assert first.config.preset != "auto"
    again = resolve_config(first.config.to_json_dict())
    assert again.config == first.config and again.preset == first.preset
    assert again.fields == ()  # every field is now the user's own
    assert resolve_config(again.config.to_json_dict()).config == first.config


def test_fields_are_exactly_the_preset_paths_the_user_left_alone() -> None:
    resolved = resolve_config({"env_id": "Pendulum-v1", "lr": 0.01})
    values = deep_merge(PRESETS["classic_control_continuous"].values,
                        PRESETS["classic_control_continuous"].envs["Pendulum"].values)  # fmt: skip
    assert set(resolved.fields) == set(leaf_paths(values)) - {"lr"}


def test_bad_user_fields_are_named_by_their_path() -> None:
    with pytest.raises(ValidationError) as info:
        resolve_config({"env_id": "Pendulum-v1", "lr": -1, "stop": {"env_steps": 0}})
    locs = {".".join(map(str, e["loc"])) for e in info.value.errors()}
    assert locs == {"lr", "stop.env_steps"}
    with pytest.raises(ValidationError) as info:
        resolve_config({"preset": "fastest"})
    assert [e["loc"] for e in info.value.errors()] == [("preset",)]
    with pytest.raises(ValidationError):
        resolve_config({"env_id": 5})


@pytest.mark.parametrize(
    ("env_id", "weight"),
    [
        ("ALE/Pong-v5", 0.25),  # CleanRL vf_coef 0.5 on 0.5 * MSE
        ("MountainCarContinuous-v0", 0.25),  # the CleanRL continuous settings
        ("HalfCheetah-v5", 0.25),
        ("LunarLander-v3", 0.5),  # rl-zoo: SB3 weighs the MSE itself, as PPOConfig does
        ("Pendulum-v1", 0.5),
    ],
)
def test_value_loss_weight_follows_the_sources_convention(env_id: str, weight: float) -> None:
    assert resolve_config({"env_id": env_id}).config.vf_loss_coeff == weight
