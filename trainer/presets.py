"""Presets: PPOConfig settings per env family, as data, each with its source.

A preset maps an env family to PPOConfig field values (nested sections as nested dicts), with
per-env entries where the source tunes single envs (keyed by the env's base name: "Acrobot" for
"Acrobot-v1"). trainer/resolve.py applies them: PPOConfig defaults < family values < per-env
values < the user's own fields. Nothing here is code the trainer branches on; the trainer only
ever sees the resolved fields.

Translating the sources' names (stable-baselines3 / rl-baselines3-zoo / CleanRL -> PPOConfig):
n_envs / num_envs -> num_envs_per_env_runner; n_steps * n_envs -> train_batch_size_per_learner;
batch_size (SB3) or batch / num_minibatches (CleanRL) -> minibatch_size; n_epochs /
update_epochs -> num_epochs; learning_rate -> lr ("lin_" or anneal_lr -> lr_schedule "linear");
clip_range / clip_coef -> clip_param; CleanRL's clip_vloss -> vf_clip_param = clip_coef;
ent_coef -> entropy_coeff; vf_coef -> vf_loss_coeff (SB3: both weigh the MSE; CleanRL weighs
0.5 * MSE, so its vf_coef is halved); max_grad_norm -> grad_clip;
normalize (VecNormalize) -> normalize_observations + normalize_rewards; n_timesteps /
total_timesteps -> stop.env_steps.

Options the sources use that PPOConfig does not have are left out and said so in the entry's
`note` (gSDE, log_std_init, ortho_init=False); such envs get their family's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ZOO = "rl-baselines3-zoo hyperparams/ppo.yml"
CLEANRL_CONTINUOUS = "CleanRL cleanrl/ppo_continuous_action.py defaults"
# CleanRL's vf_coef weighs 0.5 * MSE (`v_loss = 0.5 * v_loss_max.mean()`); PPOConfig's
# vf_loss_coeff weighs the MSE itself (SB3's convention), so a CleanRL entry's weight is halved.
CLEANRL_VF_COEF = 0.5

# stable-baselines3 PPO constructor defaults (stable_baselines3/ppo/ppo.py) and MlpPolicy
# (separate 64-64 tanh actor and critic): what an rl-zoo entry means for every key it omits.
SB3_PPO_DEFAULTS: dict[str, Any] = {
    "lr": 3e-4,
    "lr_schedule": "constant",
    "minibatch_size": 64,
    "num_epochs": 10,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_param": 0.2,
    "vf_clip_param": None,
    "vf_loss_coeff": 0.5,
    "entropy_coeff": 0.0,
    "grad_clip": 0.5,
    "normalize_advantages": True,
    "normalize_observations": False,
    "normalize_rewards": False,
    "model": {"hidden_sizes": [64, 64], "activation": "tanh", "vf_share_layers": False},
}


@dataclass(frozen=True)
class EnvSettings:
    """Settings for one env inside a family (on top of the family's own values)."""

    values: dict[str, Any]
    source: str
    note: str = ""


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    source: str
    values: dict[str, Any]
    members: frozenset[str] = frozenset()  # env base names that "auto" maps to this preset
    namespaces: frozenset[str] = frozenset()  # gymnasium namespaces ("ALE" of "ALE/Pong-v5")
    envs: dict[str, EnvSettings] = field(default_factory=dict)
    note: str = ""


CLASSIC_CONTROL = Preset(
    name="classic_control",
    title="Classic control, discrete actions (CartPole, Acrobot, MountainCar)",
    source=(
        "PPOConfig's defaults: gamma 0.98 / gae_lambda 0.8 from "
        f"{ZOO} CartPole-v1, batch sizes, epochs and lr tuned for wall-clock time on CartPole"
    ),
    values={},  # CartPole-v1 keeps exactly the defaults (its time-to-475 is a guarded benchmark)
    members=frozenset({"CartPole", "Acrobot", "MountainCar"}),
    envs={
        "Acrobot": EnvSettings(
            values={
                **SB3_PPO_DEFAULTS,
                "normalize_observations": True,
                "normalize_rewards": True,
                "num_envs_per_env_runner": 16,
                "train_batch_size_per_learner": 16 * 256,
                "num_epochs": 4,
                "gamma": 0.99,
                "gae_lambda": 0.94,
                "entropy_coeff": 0.0,
                "stop": {"env_steps": 1_000_000},
            },
            source=f"{ZOO}: Acrobot-v1",
        ),
        "MountainCar": EnvSettings(
            values={
                **SB3_PPO_DEFAULTS,
                "normalize_observations": True,
                "normalize_rewards": True,
                "num_envs_per_env_runner": 16,
                "train_batch_size_per_learner": 16 * 16,
                "num_epochs": 4,
                "gamma": 0.99,
                "gae_lambda": 0.98,
                "entropy_coeff": 0.0,
                "stop": {"env_steps": 1_000_000},
            },
            source=f"{ZOO}: MountainCar-v0",
        ),
    },
)

# CleanRL's continuous-control PPO: one env, 2048 steps, 32 minibatches, 10 epochs, annealed lr,
# value clipping, observation AND reward normalisation (gymnasium NormalizeObservation /
# NormalizeReward wrappers, both clipped to +-10 as our connectors do).
_CLEANRL_CONTINUOUS: dict[str, Any] = {
    "num_envs_per_env_runner": 1,
    "train_batch_size_per_learner": 2048,
    "minibatch_size": 64,
    "num_epochs": 10,
    "lr": 3e-4,
    "lr_schedule": "linear",
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "clip_param": 0.2,
    "vf_clip_param": 0.2,
    "vf_loss_coeff": CLEANRL_VF_COEF / 2,
    "entropy_coeff": 0.0,
    "grad_clip": 0.5,
    "normalize_advantages": True,
    "normalize_observations": True,
    "normalize_rewards": True,
    "model": {"hidden_sizes": [64, 64], "activation": "tanh", "vf_share_layers": False},
    "stop": {"env_steps": 1_000_000},
}

CLASSIC_CONTROL_CONTINUOUS = Preset(
    name="classic_control_continuous",
    title="Classic control, continuous actions (Pendulum, MountainCarContinuous)",
    source=CLEANRL_CONTINUOUS,
    values=_CLEANRL_CONTINUOUS,
    members=frozenset({"Pendulum", "MountainCarContinuous"}),
    envs={
        "Pendulum": EnvSettings(
            values={
                **SB3_PPO_DEFAULTS,
                "num_envs_per_env_runner": 4,
                "train_batch_size_per_learner": 4 * 1024,
                "num_epochs": 10,
                "gamma": 0.9,
                "gae_lambda": 0.95,
                "lr": 1e-3,
                "clip_param": 0.2,
                "entropy_coeff": 0.0,
                "stop": {"env_steps": 100_000},
            },
            source=f"{ZOO}: Pendulum-v1",
            note=(
                "rl-zoo explores with gSDE (use_sde, sde_sample_freq 4), which PPOConfig lacks; "
                "the plain Gaussian policy comes close to rl-zoo's score in its budget "
                "(docs/trainer.md)"
            ),
        ),
    },
    note=(
        f"{ZOO} MountainCarContinuous-v0 needs gSDE and log_std_init -3.29, which PPOConfig "
        "lacks; that env gets the family settings"
    ),
)

_ZOO_LUNAR_LANDER: dict[str, Any] = {
    **SB3_PPO_DEFAULTS,
    "num_envs_per_env_runner": 16,
    "train_batch_size_per_learner": 16 * 1024,
    "minibatch_size": 64,
    "num_epochs": 4,
    "gamma": 0.999,
    "gae_lambda": 0.98,
    "entropy_coeff": 0.01,
    "stop": {"env_steps": 1_000_000},
}

BOX2D = Preset(
    name="box2d",
    title="Box2D (LunarLander, BipedalWalker, CarRacing)",
    source=f"{ZOO}: LunarLander-v2",
    values=_ZOO_LUNAR_LANDER,
    members=frozenset(
        {
            "LunarLander",
            "LunarLanderContinuous",
            "BipedalWalker",
            "BipedalWalkerHardcore",
            "CarRacing",
        }
    ),
    envs={
        "LunarLanderContinuous": EnvSettings(
            values=_ZOO_LUNAR_LANDER, source=f"{ZOO}: LunarLanderContinuous-v3"
        ),
        "BipedalWalker": EnvSettings(
            values={
                **SB3_PPO_DEFAULTS,
                "normalize_observations": True,
                "normalize_rewards": True,
                "num_envs_per_env_runner": 32,
                "train_batch_size_per_learner": 32 * 2048,
                "minibatch_size": 64,
                "num_epochs": 10,
                "gamma": 0.999,
                "gae_lambda": 0.95,
                "entropy_coeff": 0.0,
                "lr": 3e-4,
                "clip_param": 0.18,
                "stop": {"env_steps": 5_000_000},
            },
            source=f"{ZOO}: BipedalWalker-v3",
        ),
    },
    note=f"{ZOO} CarRacing-v2 needs gSDE and its own wrappers; CarRacing gets the family settings",
)

MUJOCO = Preset(
    name="mujoco",
    title="MuJoCo and other continuous control (HalfCheetah, Hopper, Walker2d, Ant, ...)",
    source=CLEANRL_CONTINUOUS,
    values=_CLEANRL_CONTINUOUS,
    members=frozenset(
        {
            "Ant",
            "HalfCheetah",
            "Hopper",
            "Humanoid",
            "HumanoidStandup",
            "InvertedDoublePendulum",
            "InvertedPendulum",
            "Pusher",
            "Reacher",
            "Swimmer",
            "Walker2d",
        }
    ),
    envs={
        "Swimmer": EnvSettings(
            values={
                **SB3_PPO_DEFAULTS,
                "normalize_observations": True,
                "normalize_rewards": True,
                "num_envs_per_env_runner": 4,
                "train_batch_size_per_learner": 4 * 1024,
                "minibatch_size": 256,
                "gamma": 0.9999,
                "gae_lambda": 0.98,
                "lr": 6e-4,
                "stop": {"env_steps": 1_000_000},
            },
            source=f"{ZOO}: Swimmer-v4",
        ),
    },
    note=(
        f"{ZOO}'s other tuned MuJoCo entries rely on log_std_init and ortho_init=False, which "
        "PPOConfig lacks; those envs get CleanRL's settings"
    ),
)

ATARI = Preset(
    name="atari",
    title="Atari 2600 through ale-py (ALE/<Game>-v5)",
    source=(
        "CleanRL ppo_atari_envpool.py with its 'Solve Pong in about 5 mins' settings "
        "(sail-sg/envpool examples/cleanrl_examples/ppo_atari_envpool.py, CleanRL PR #100): "
        "batch 2048, 8 minibatches, 3 epochs, clip 0.2; CleanRL's other defaults (lr 2.5e-4 "
        "annealed over 10M steps, entropy 0.01, value clipping, one shared Nature-CNN trunk, "
        "rewards clipped to [-1, 1], no sticky actions as envpool)"
    ),
    values={
        "num_envs_per_env_runner": 64,
        "train_batch_size_per_learner": 2048,
        "minibatch_size": 256,
        "num_epochs": 3,
        "lr": 2.5e-4,
        "lr_schedule": "linear",
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "clip_param": 0.2,
        "vf_clip_param": 0.2,
        "vf_loss_coeff": CLEANRL_VF_COEF / 2,
        "entropy_coeff": 0.01,
        "grad_clip": 0.5,
        "normalize_advantages": True,
        "normalize_observations": False,
        "normalize_rewards": False,
        "clip_rewards": 1.0,
        "frame_stack": 1,  # AtariVectorEnv stacks 4 frames itself
        "env_config": {"repeat_action_probability": 0.0},
        "model": {"vf_share_layers": True, "cnn_channels": [32, 64, 64]},
        "stop": {"env_steps": 10_000_000},
        # Iterations are short (2048 steps, well under a second on a GPU machine) and a
        # checkpoint with Adam state is ~20 MB: every 100 iterations is every ~200k steps.
        "checkpoint_every": 100,
    },
    namespaces=frozenset({"ALE"}),
    note=(
        "64 envs x 32 steps instead of CleanRL's 16 x 128, the same 2048-step batch: it gives "
        "ALE's thread pool and batched inference 4x more sub-envs per step and halves the "
        "sampling calls' Python overhead per env step. The price: GAE is cut and bootstrapped "
        "from V(s_32) every 32 steps, a small truncation with gamma=0.99 and lambda=0.95 "
        "(horizon about 20 steps). Advantages are standardised per batch, where CleanRL "
        "standardises per minibatch (256 rows of one batch, nearly the same). vf_loss_coeff "
        "0.25 is CleanRL's vf_coef 0.5 on 0.5 * MSE."
    ),
)

PRESETS: dict[str, Preset] = {
    p.name: p for p in (CLASSIC_CONTROL, CLASSIC_CONTROL_CONTINUOUS, BOX2D, MUJOCO, ATARI)
}
