"""Presets: which one an env id picks, the override order (defaults < preset < user), what the
resolution reports, idempotence, and that every table entry is a valid, cited PPOConfig."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import ValidationError

from trainer.config import PPOConfig, PresetName
from trainer.presets import PRESETS, SB3_PPO_DEFAULTS, from_zoo, zoo_env
from trainer.resolve import (
    deep_merge,
    env_base_name,
    family_of,
    leaf_paths,
    resolve_config,
    zoo_entry,
    zoo_env_kwargs,
)

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
    frames = {"img_height": 64, "img_width": 64}
    assert resolved.config.env_config == {
        "repeat_action_probability": 0.0,
        **frames,
        "num_threads": 4,
    }
    assert "env_config.repeat_action_probability" in resolved.fields
    mine = resolve_config(
        {"env_id": "ALE/Pong-v5", "env_config": {"repeat_action_probability": 0.25}}
    )
    assert mine.config.env_config == {"repeat_action_probability": 0.25, **frames}
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
        ("ALE/Pong-v5", 0.5),  # the MSE itself (a CPU choice, measured: the preset's note)
        ("MountainCarContinuous-v0", 0.19),  # rl-zoo vf_coef, on the MSE
        ("HalfCheetah-v5", 0.58096),  # rl-zoo's tuned entry
        ("Pusher-v5", 0.25),  # no rl-zoo entry: CleanRL's continuous settings
        ("LunarLander-v3", 0.5),  # rl-zoo: SB3 weighs the MSE itself, as PPOConfig does
        ("Pendulum-v1", 0.5),
    ],
)
def test_value_loss_weight_follows_the_sources_convention(env_id: str, weight: float) -> None:
    assert resolve_config({"env_id": env_id}).config.vf_loss_coeff == weight


def test_an_rl_zoo_entry_translates_key_by_key() -> None:
    # rl-zoo ppo.yml HalfCheetah-v3, verbatim.
    entry = {
        "normalize": True,
        "n_envs": 1,
        "policy": "MlpPolicy",
        "n_timesteps": 1e6,
        "batch_size": 64,
        "n_steps": 512,
        "gamma": 0.98,
        "learning_rate": 2.0633e-05,
        "ent_coef": 0.000401762,
        "clip_range": 0.1,
        "n_epochs": 20,
        "gae_lambda": 0.92,
        "max_grad_norm": 0.8,
        "vf_coef": 0.58096,
        "policy_kwargs": {
            "log_std_init": -2,
            "ortho_init": False,
            "activation_fn": "nn.ReLU",
            "net_arch": [{"pi": [256, 256], "vf": [256, 256]}],
        },
    }
    expected = {
        **SB3_PPO_DEFAULTS,
        "num_envs_per_env_runner": 1,
        "train_batch_size_per_learner": 512,
        "minibatch_size": 64,
        "num_epochs": 20,
        "gamma": 0.98,
        "gae_lambda": 0.92,
        "lr": 2.0633e-05,
        "lr_schedule": "constant",
        "clip_param": 0.1,
        "vf_loss_coeff": 0.58096,
        "entropy_coeff": 0.000401762,
        "grad_clip": 0.8,
        "normalize_observations": True,
        "normalize_rewards": True,
        "model": {
            "hidden_sizes": [256, 256],
            "activation": "relu",
            "vf_share_layers": False,
            "ortho_init": False,
            "log_std_init": -2.0,
            "use_sde": False,
        },
        "stop": {"env_steps": 1_000_000},
    }
    assert from_zoo(entry) == expected
    resolved = resolve_config({"env_id": "HalfCheetah-v5"})
    assert resolved.env_settings == "HalfCheetah"
    config = resolved.config
    assert config.model.log_std_init == -2.0 and not config.model.ortho_init
    assert config.model.activation == "relu" and config.model.hidden_sizes == (256, 256)
    assert config.vf_clip_param is None and config.lr_schedule == "constant"


def test_rl_zoo_defaults_and_schedules() -> None:
    # What an entry omits is rl-zoo's (one env) and SB3's (n_steps 2048, batch 64) default.
    ant = from_zoo({"normalize": True, "n_timesteps": 1e6, "policy": "MlpPolicy"})
    assert ant["num_envs_per_env_runner"] == 1 and ant["train_batch_size_per_learner"] == 2048
    assert ant["minibatch_size"] == 64 and ant["num_epochs"] == 10 and ant["lr"] == 3e-4
    linear = from_zoo({"n_timesteps": 1e5, "learning_rate": "lin_0.001"})
    assert linear["lr"] == 0.001 and linear["lr_schedule"] == "linear"
    # batch_size above the rollout: SB3 takes the whole rollout as one minibatch.
    short = from_zoo({"n_timesteps": 1e6, "n_steps": 32, "batch_size": 64})
    assert short["minibatch_size"] == 32


@pytest.mark.parametrize(
    ("entry", "word"),
    [
        ({"n_timesteps": 1e5, "target_kl": 0.01}, "target_kl"),
        ({"n_timesteps": 1e5, "clip_range": "lin_0.2"}, "clip_range"),
        ({"n_timesteps": 1e5, "learning_rate": "exp_0.1"}, "learning_rate"),
        ({"n_timesteps": 1e5, "policy": "CnnPolicy"}, "MlpPolicy"),
        (
            {"n_timesteps": 1e5, "policy_kwargs": {"net_arch": [{"pi": [64], "vf": [256]}]}},
            "net_arch",
        ),
        ({"n_timesteps": 1e5, "policy_kwargs": {"squash_output": True}}, "squash_output"),
    ],
)
def test_rl_zoo_keys_without_an_equivalent_are_refused(entry: dict[str, Any], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        from_zoo(entry)


def test_gsde_entries_keep_their_exploration() -> None:
    pendulum = resolve_config({"env_id": "Pendulum-v1"}).config
    assert pendulum.model.use_sde and pendulum.sde_sample_freq == 4
    # MountainCarContinuous keeps it, held longer and wider, on eight envs.
    car = resolve_config({"env_id": "MountainCarContinuous-v0"}).config
    assert car.model.use_sde and car.sde_sample_freq == 64
    assert car.model.log_std_init == -1.0 and not car.model.ortho_init
    assert not resolve_config({"env_id": "HalfCheetah-v5"}).config.model.use_sde


def test_ant_observes_ant_v4s_numbers_and_keeps_its_entry_verbatim() -> None:
    """Ant's preset is rl-zoo's entry with v4's observation (no contact forces): env_config
    carries it, zoo_env_kwargs hands it to the SB3 side, the zoo entry itself is unchanged, and
    a user's env_config still merges on top key by key."""
    ant = resolve_config({"env_id": "Ant-v5"})
    assert ant.config.env_config == {"include_cfrc_ext_in_observation": False}
    assert "env_config.include_cfrc_ext_in_observation" in ant.fields
    assert zoo_env_kwargs("Ant-v5") == {"include_cfrc_ext_in_observation": False}
    assert zoo_entry("Ant-v5") == {"normalize": True, "n_timesteps": 1e6, "policy": "MlpPolicy"}
    assert zoo_env_kwargs("HalfCheetah-v5") == {} and zoo_env_kwargs("my_envs:Custom-v0") == {}
    mine = resolve_config({"env_id": "Ant-v5", "env_config": {"ctrl_cost_weight": 0.1}})
    assert mine.config.env_config == {
        "include_cfrc_ext_in_observation": False,
        "ctrl_cost_weight": 0.1,
    }
    swimmer = PRESETS["mujoco"].envs["Swimmer"]
    assert swimmer.source.endswith("(commit 208b6fdf): Swimmer-v4")
    assert swimmer.zoo_entry is not None and swimmer.zoo_entry["n_envs"] == 4


def test_hopper_and_walker_take_tianshous_settings_in_rl_zoo_keys_which_sb3_runs_too() -> None:
    """rl-zoo's Hopper-v3 entry stands still on v5; Hopper's and Walker2d's preset is
    tianshou's MuJoCo PPO, written in rl-zoo's keys (SB3's normalize_advantage included), so
    the SB3 side of the benchmarks runs the very same entry."""
    hopper = PRESETS["mujoco"].envs["Hopper"]
    assert hopper.source.startswith("tianshou examples/mujoco/mujoco_ppo.py")
    assert zoo_entry("Hopper-v5") == hopper.zoo_entry
    assert hopper.zoo_entry is not None and hopper.zoo_entry["normalize_advantage"] is False
    config = resolve_config({"env_id": "Hopper-v5"}).config
    assert not config.normalize_advantages
    assert config.num_envs_per_env_runner == 8 and config.train_batch_size_per_learner == 2048
    assert config.minibatch_size == 64 and config.num_epochs == 10
    assert config.lr == 3e-4 and config.lr_schedule == "linear"
    assert config.vf_loss_coeff == 0.25 and config.vf_clip_param is None
    assert config.model.hidden_sizes == (64, 64) and config.model.activation == "tanh"
    assert config.model.ortho_init and config.model.log_std_init == -0.5
    assert config.normalize_observations and config.normalize_rewards
    assert config.stop.env_steps == 1_000_000
    walker = PRESETS["mujoco"].envs["Walker2d"]
    assert walker.source == hopper.source
    assert zoo_entry("Walker2d-v5") == zoo_entry("Hopper-v5")
    assert resolve_config({"env_id": "Walker2d-v5"}).config == config.model_copy(
        update={"env_id": "Walker2d-v5"}
    )
    # The key translates on its own, and an entry without it keeps SB3's default (on).
    assert (
        from_zoo({"n_timesteps": 1e5, "normalize_advantage": False})["normalize_advantages"]
        is False
    )
    assert from_zoo({"n_timesteps": 1e5})["normalize_advantages"] is True


def test_changed_entry_values_run_on_both_sides_and_are_said() -> None:
    """Pendulum's entry with two measured changes: the preset and the SB3 side run the changed
    values, and the note says what each was in rl-zoo's entry."""
    pendulum = PRESETS["classic_control_continuous"].envs["Pendulum"]
    assert pendulum.note.startswith("changed: gamma 0.9 -> 0.95, learning_rate 0.001 -> lin_1e-3")
    assert zoo_entry("Pendulum-v1") == pendulum.zoo_entry
    assert pendulum.zoo_entry is not None
    assert pendulum.zoo_entry["gamma"] == 0.95 and pendulum.zoo_entry["learning_rate"] == "lin_1e-3"
    config = resolve_config({"env_id": "Pendulum-v1"}).config
    assert config.gamma == 0.95 and config.lr == 1e-3 and config.lr_schedule == "linear"
    assert config.model.use_sde and config.num_envs_per_env_runner == 4
    with pytest.raises(ValueError, match="changed keys the entry does not have: \\['gama'\\]"):
        zoo_env("Pendulum-v1", {"n_timesteps": 1e5, "gamma": 0.9}, changed={"gama": 0.95})


def test_added_entry_keys_run_on_both_sides_and_are_said() -> None:
    """MountainCarContinuous's entry with changed and added keys: the note names each change
    with its published value and each added key, and SB3 runs exactly what the preset runs."""
    car = PRESETS["classic_control_continuous"].envs["MountainCarContinuous"]
    assert car.note.startswith(
        "changed: n_envs 1 -> 8, n_steps 8 -> 256, policy_kwargs {'log_std_init': -3.29, "
        "'ortho_init': False} -> {'log_std_init': -1.0, 'ortho_init': False}; "
        "added: sde_sample_freq 64 (measured"
    )
    assert zoo_entry("MountainCarContinuous-v0") == car.zoo_entry
    assert car.zoo_entry is not None
    assert car.zoo_entry["sde_sample_freq"] == 64 and car.zoo_entry["use_sde"] is True
    assert car.zoo_entry["learning_rate"] == 7.77e-05  # unchanged keys stay as published
    config = resolve_config({"env_id": "MountainCarContinuous-v0"}).config
    assert config.num_envs_per_env_runner == 8 and config.train_batch_size_per_learner == 2048
    assert config.minibatch_size == 256 and config.lr == 7.77e-05
    with pytest.raises(ValueError, match="added keys the entry has \\(change them instead\\)"):
        zoo_env("Pendulum-v1", {"n_timesteps": 1e5, "gamma": 0.9}, added={"gamma": 0.95})
