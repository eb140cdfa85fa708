"""The experiment config: one frozen, validated schema shared by the web form, the API, the
database and the trainer.

Pure pydantic on purpose: the API imports this module and must never pull in torch, gymnasium
or Ray. Unknown keys are rejected (RLlib's silent `update_from_dict` is the cautionary tale).
Derived values are properties, never fields filled in later.

Resource bounds. The API cannot see the env's observation size (it never imports gymnasium), so
every size field has its own upper bound, chosen well above every preset and benchmark but below
what one machine can hold: a config past them is a clear 422 naming the field instead of a job
that dies allocating tens of GB after it was accepted. Floats must be finite (no NaN/Infinity:
they would poison every update, and are not valid JSON for the database or the browser).
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# --- resource bounds (see the module docstring) ----------------------------------------------
# 2^18 env steps per Learner and iteration: 4x the largest preset batch (MuJoCo, 32 envs x 2048
# steps) and 32x the Atari benchmark's 64 envs x 128 steps. Its observations alone are ~7 GB for
# Atari frames (84x84x4 uint8), ~400 MB for MuJoCo Humanoid (376 floats).
MAX_TRAIN_BATCH = 2**18
# One hidden layer at most 8192 wide, and at most 2^25 (33.5M) weights between hidden layers
# (e.g. 4096 x 4096 x 2): with a separate value encoder, gradients and Adam's two moments that is
# ~1 GB of fp32 per Learner. The input layer is not counted (its width is the env's).
MAX_HIDDEN_WIDTH = 8192
MAX_HIDDEN_WEIGHTS = 2**25
MAX_CNN_CHANNELS = 1024
# lr_schedule kl_adaptive keeps the lr within these bounds (rl_games' AdaptiveScheduler).
MIN_ADAPTIVE_LR = 1e-6
MAX_ADAPTIVE_LR = 1e-2
# Stop after at most 2^53 env steps: the largest integer a double (progress, the browser's JSON
# numbers) holds exactly; no run comes near it.
MAX_ENV_STEPS = 2**53
MAX_WALL_SECONDS = 10 * 365 * 24 * 3600.0  # ten years
MAX_SEED = 2**31 - 1  # torch, numpy and gymnasium all take it; the evaluation seed's range
MAX_CPUS_PER_ACTOR = 1024.0  # more than any one machine has
MIN_CPUS_PER_ENV_RUNNER = 0.1
MAX_GPUS_PER_LEARNER = 16.0  # more than any one node has (8 is usual)
# env_config is free-form JSON handed to gymnasium.make: bounded in depth so that nothing
# recursive (the database's JSON, pydantic, the trainer) ever meets a pathological value.
MAX_ENV_CONFIG_DEPTH = 16
# exp(-10) ~ 4.5e-5 and exp(2) ~ 7.4: beyond them the initial Gaussian is either deterministic
# or wider than any action bound.
MIN_LOG_STD_INIT = -10.0
MAX_LOG_STD_INIT = 2.0


class _Frozen(BaseModel):
    # allow_inf_nan=False: NaN / Infinity in any float field is a 422 naming it.
    model_config = ConfigDict(
        frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False
    )


class ModelConfig(_Frozen):
    """Sizes of the actor-critic network (PPOModule)."""

    hidden_sizes: tuple[int, ...] = Field(
        default=(64, 64),
        min_length=1,
        max_length=8,
        description=(
            f"Widths of the MLP hidden layers of the encoder (each 1-{MAX_HIDDEN_WIDTH}, at most "
            f"{MAX_HIDDEN_WEIGHTS} weights between hidden layers)."
        ),
    )
    activation: Literal["tanh", "relu"] = Field(
        default="tanh",
        description="Hidden-layer activation. tanh is the PPO default (Andrychowicz et al. 2021).",
    )
    vf_share_layers: bool = Field(
        default=False,
        description="Share the encoder between policy and value heads (separate is more robust).",
    )
    ortho_init: bool = Field(
        default=True,
        description=(
            "Orthogonal initialisation (gain sqrt(2) for hidden layers, 0.01 for the policy head, "
            "1 for the value head) as SB3 and CleanRL do; false keeps PyTorch's default init, "
            "as rl-zoo's tuned MuJoCo entries ask with ortho_init=False."
        ),
    )
    use_sde: bool = Field(
        default=False,
        description=(
            "Generalized state-dependent exploration (gSDE, Raffin et al. 2021; continuous "
            "actions only): the action noise is the policy's last hidden layer times a noise "
            "matrix drawn every sde_sample_freq steps, so exploration is smooth in time and "
            "state; log_std becomes a [hidden, action] matrix. rl-zoo's Pendulum and "
            "MountainCarContinuous entries use it."
        ),
    )
    log_std_init: float = Field(
        default=0.0,
        ge=MIN_LOG_STD_INIT,
        le=MAX_LOG_STD_INIT,
        description=(
            "Initial log standard deviation of the Gaussian policy (continuous actions only; "
            "the std is a learned parameter, independent of the observation). 0 is std 1; "
            "rl-zoo's MuJoCo entries start at -2 (std 0.14)."
        ),
    )
    cnn_channels: tuple[int, ...] = Field(
        default=(32, 64, 64),
        min_length=1,
        max_length=6,
        description=(
            "Conv channels of the encoder used for image observations (Nature CNN; each "
            f"1-{MAX_CNN_CHANNELS})."
        ),
    )
    cnn_dense: int = Field(
        default=512,
        ge=1,
        le=MAX_HIDDEN_WIDTH,
        description="Units of the dense layer after the convs of the image encoder (Nature: 512).",
    )

    @field_validator("hidden_sizes")
    @classmethod
    def _hidden_bounded(cls, sizes: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= h <= MAX_HIDDEN_WIDTH for h in sizes):
            raise ValueError(f"hidden_sizes must all be between 1 and {MAX_HIDDEN_WIDTH}")
        weights = sum(a * b for a, b in itertools.pairwise(sizes))
        if weights > MAX_HIDDEN_WEIGHTS:
            raise ValueError(
                f"hidden_sizes make {weights:,} weights between hidden layers; at most "
                f"{MAX_HIDDEN_WEIGHTS:,} (~1 GB per Learner with Adam)"
            )
        return sizes

    @field_validator("cnn_channels")
    @classmethod
    def _channels_bounded(cls, channels: tuple[int, ...]) -> tuple[int, ...]:
        if any(not 1 <= c <= MAX_CNN_CHANNELS for c in channels):
            raise ValueError(f"cnn_channels must all be between 1 and {MAX_CNN_CHANNELS}")
        return channels


class StopConfig(_Frozen):
    """Stop criteria: the run ends as soon as ANY configured criterion is reached."""

    episode_return_mean: float | None = Field(
        default=None,
        description="Stop once the mean return of the last 100 finished episodes reaches this.",
    )
    env_steps: int | None = Field(
        default=1_000_000,
        gt=0,
        le=MAX_ENV_STEPS,
        description="Stop after this many environment steps in total.",
    )
    wall_seconds: float | None = Field(
        default=None,
        gt=0,
        le=MAX_WALL_SECONDS,
        description="Stop after this many seconds of training.",
    )

    @model_validator(mode="after")
    def _at_least_one(self) -> StopConfig:
        if (self.episode_return_mean, self.env_steps, self.wall_seconds) == (None, None, None):
            raise ValueError(
                "at least one stop criterion (episode_return_mean, env_steps, wall_seconds) "
                "is required"
            )
        return self


# Names of the presets in trainer/presets.py (a test keeps the two in step), plus "auto" (pick
# the preset from env_id) and "none" (PPOConfig's own defaults). Kept here so the API can
# validate the field without importing the preset tables.
PresetName = Literal[
    "auto",
    "none",
    "classic_control",
    "classic_control_continuous",
    "box2d",
    "mujoco",
    "atari",
]


# Fields PPOConfig had once; `from_saved` drops them from configs saved before.
# evaluation_every: a service setting of the experiment since migration 0011.
RETIRED_FIELDS = frozenset({"evaluation_every"})


class PPOConfig(_Frozen):
    """Everything one PPO experiment needs. Field names follow RLlib where they came from it."""

    # --- environment -------------------------------------------------------------------------
    env_id: str = Field(
        default="CartPole-v1",
        min_length=1,
        max_length=200,
        description=(
            "gymnasium environment id: 'ALE/<Game>-v5' for Atari (ale-py), 'module:EnvId' to "
            "import a module that registers the env first."
        ),
    )
    env_config: dict[str, Any] = Field(
        default_factory=dict, description="Keyword arguments passed to gymnasium.make."
    )
    vector_env: Literal["native", "serial"] = Field(
        default="native",
        description=(
            "How an EnvRunner steps its sub-envs. 'native': one array operation for all of them "
            "where the env has such an implementation (gymnasium's own for CartPole, Rollout's "
            "for Acrobot; the same dynamics), else one gymnasium env after the other; 'serial': "
            "always one gymnasium env after the other (as SB3's DummyVecEnv)."
        ),
    )
    preset: PresetName = Field(
        default="auto",
        description=(
            "Settings per env family (rl-zoo / CleanRL tables, see docs/trainer.md): 'auto' picks "
            "one from env_id, 'none' keeps these defaults. Fields you set win over the preset; "
            "the stored config names the preset that was applied."
        ),
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=MAX_SEED,
        description="Seed for env resets, network init, action draws and shuffles.",
    )

    # --- resources ---------------------------------------------------------------------------
    num_env_runners: int = Field(
        default=0,
        ge=0,
        le=256,
        description="EnvRunner Ray actors. 0 samples in the trainer's own process.",
    )
    num_envs_per_env_runner: int = Field(
        default=16,  # one batched forward pass serves 16 envs: inference cost amortised
        ge=1,
        le=4096,
        description="Sub-environments in each EnvRunner's vector env.",
    )
    num_learners: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Learner Ray actors (torch DDP). 0 learns in the trainer's own process.",
    )
    num_cpus_per_env_runner: float = Field(
        default=1.0,
        # At most 10 EnvRunners per core: each is a Python process with torch (~300 MB), so a
        # smaller share only packs more of them into a CPU budget (0.01: 256 on 2 cores).
        ge=MIN_CPUS_PER_ENV_RUNNER,
        le=MAX_CPUS_PER_ACTOR,
        description="CPUs Ray reserves for each EnvRunner actor (at least 0.1).",
    )
    num_cpus_per_learner: float = Field(
        default=1.0,
        gt=0,
        le=MAX_CPUS_PER_ACTOR,
        description="CPUs Ray reserves for each Learner actor.",
    )
    num_gpus_per_learner: float = Field(
        default=0.0,
        ge=0,
        le=MAX_GPUS_PER_LEARNER,
        description="GPUs for each Learner (nccl DDP when > 0).",
    )
    inference_device: Literal["auto", "cpu", "cuda"] = Field(
        default="auto",
        description=(
            "Where the EnvRunner of the driver process (serial mode, num_env_runners 0) runs "
            "the policy. 'auto': on the Learner's GPU when that Learner is local (num_learners "
            "0, num_gpus_per_learner > 0) and CUDA is present, else on the CPU. Observations go "
            "to the GPU as uint8 through a pinned buffer. EnvRunner actors act on their CPUs."
        ),
    )
    learner_precision: Literal["fp32", "tf32", "bf16"] = Field(
        default="tf32",
        description=(
            "Arithmetic of a GPU Learner. 'tf32': matmuls and convolutions may use TF32 tensor "
            "cores (fp32 range, 10-bit mantissa inputs, fp32 accumulation); 'bf16': forward "
            "passes also run under bfloat16 autocast (log-probs, losses and Adam stay fp32); "
            "'fp32': neither. On a CPU Learner only 'bf16' changes anything (CPU autocast)."
        ),
    )
    overlap_sampling: bool = Field(
        default=False,
        description=(
            "Sample the next batch while the Learner trains on this one, with the weights "
            "before the update (policy_lag 1; the ratio uses the sampling policy's logp). Pays "
            "when sampling and learning both take a good share of an iteration and have their "
            "own cores (image envs, GPU learner); off gives exactly the alternating loop."
        ),
    )
    sde_sample_freq: int = Field(
        default=-1,
        ge=-1,
        le=1_000_000,
        description=(
            "With model.use_sde: draw a new exploration matrix every this many vector-env "
            "steps; -1 draws one per rollout (each EnvRunner sample)."
        ),
    )
    torch_num_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description=(
            "CPU threads for the network math of each process (torch's pool; numpy's BLAS stays "
            "at one). 1 is fastest for small networks; presets with a CNN or 256-wide layers "
            "get every core of a serial run (or the Learner actor's CPUs) unless set."
        ),
    )

    # --- batch sizes ---------------------------------------------------------------------------
    # Defaults tuned for wall-clock speed on small tasks (CartPole to 475 in a few seconds):
    # 16 envs x 32 steps per iteration, one 512-row minibatch per epoch (large minibatches are
    # ~3x cheaper per sample than 64-256 on CPU), 8 epochs.
    train_batch_size_per_learner: int = Field(
        default=512,
        ge=1,
        le=MAX_TRAIN_BATCH,
        description="Env steps each Learner trains on per iteration.",
    )
    minibatch_size: int = Field(
        default=512, ge=1, le=MAX_TRAIN_BATCH, description="SGD minibatch size (per Learner)."
    )
    num_epochs: int = Field(default=8, ge=1, le=1000, description="SGD passes over each batch.")

    # --- PPO hyperparameters -------------------------------------------------------------------
    # gamma / lambda as in the RL Zoo's tuned PPO for CartPole and other short-horizon tasks;
    # long-horizon tasks want gamma 0.99-0.999 and lambda 0.95 (--set).
    gamma: float = Field(default=0.98, ge=0.0, le=1.0, description="Discount factor.")
    gae_lambda: float = Field(
        default=0.8, ge=0.0, le=1.0, description="GAE lambda (Schulman et al. 2016)."
    )
    # 3e-3 rather than 2e-3: 9 of 10 CartPole seeds reached 475 in fewer env steps (median
    # ~12 % fewer) at the same cost per step.
    lr: float = Field(default=3e-3, gt=0.0, le=1.0, description="Adam learning rate.")
    lr_schedule: Literal["constant", "linear", "kl_adaptive"] = Field(
        default="constant",
        description=(
            "linear decays lr towards 0 at stop.env_steps (needs stop.env_steps); each update "
            "uses the lr at the env steps where its batch's sampling began. kl_adaptive is "
            "rl_games' adaptive schedule: after every minibatch step lr is divided by 1.5 when "
            "that step's KL exceeds 2 x kl_target and multiplied by 1.5 when it is under "
            f"kl_target / 2, within [{MIN_ADAPTIVE_LR:g}, {MAX_ADAPTIVE_LR:g}]; it starts at lr "
            "and carries on across updates and resumes."
        ),
    )
    clip_param: float = Field(
        default=0.2, gt=0.0, le=10.0, description="Surrogate clip (Schulman et al. 2017, eq. 7)."
    )
    # The name is RLlib's, the meaning PPO2's (kept: stored experiments, checkpoints and
    # presets use it, and a renamed field that still accepted the old key would carry the same
    # trap). docs/trainer.md, "Porting an RLlib config".
    vf_clip_param: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "PPO2 / CleanRL value clipping (SB3's clip_range_vf): each new value prediction may "
            "move at most this far from the one before the update, loss = max(unclipped, "
            "clipped squared error); null: off. NOT RLlib's vf_clip_param, which caps the "
            "squared error itself (default 10): drop that key when porting an RLlib config."
        ),
    )
    vf_loss_coeff: float = Field(default=0.5, ge=0.0, description="Weight of the value loss.")
    entropy_coeff: float = Field(default=0.0, ge=0.0, description="Weight of the entropy bonus.")
    kl_coeff: float = Field(
        default=0.0,
        ge=0.0,
        description="Initial KL penalty coefficient (adapted towards kl_target); 0 disables it.",
    )
    kl_target: float = Field(
        default=0.01,
        gt=0.0,
        description=(
            "Target KL of the adaptive penalty coefficient and of lr_schedule kl_adaptive."
        ),
    )
    grad_clip: float | None = Field(
        default=0.5, gt=0.0, description="Max global gradient norm; null disables clipping."
    )
    normalize_advantages: bool = Field(
        default=True,
        description="Standardise advantages (over what: normalize_advantages_over).",
    )
    normalize_advantages_over: Literal["batch", "minibatch"] = Field(
        default="batch",
        description=(
            "Standardise over each Learner's whole batch once (RLlib), or over every minibatch "
            "as it is drawn (SB3, CleanRL: each minibatch's advantages get mean 0 and std 1)."
        ),
    )
    normalize_observations: bool = Field(
        default=False,
        description="Running mean/std observation filter (env-to-module connector).",
    )
    frame_stack: int = Field(
        default=1, ge=1, le=16, description="Stack this many observations (connector)."
    )
    # --- learning rewards (env-to-learner connectors; episode returns always stay raw) --------
    clip_rewards: float | None = Field(
        default=None,
        gt=0.0,
        description=(
            "Clip each learning reward to [-c, c] (Atari: 1, Mnih et al. 2015); null: off. "
            "Episode returns stay the game's score."
        ),
    )
    normalize_rewards: bool = Field(
        default=False,
        description=(
            "Scale learning rewards by the running std of the discounted return, per sub-env "
            "(SB3 VecNormalize norm_reward); episode returns stay raw."
        ),
    )
    model: ModelConfig = Field(default_factory=ModelConfig)

    # --- run control ---------------------------------------------------------------------------
    stop: StopConfig = Field(default_factory=StopConfig)
    checkpoint_every: int = Field(
        default=10,
        ge=0,
        le=1_000_000,
        description="Save a checkpoint every N iterations (0: only at the end of the run).",
    )
    keep_checkpoints: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Most recent checkpoints kept (the best is always kept).",
    )

    @field_validator("env_id")
    @classmethod
    def _no_nul(cls, value: str) -> str:
        # gymnasium / importlib fail on it only inside the job, and PostgreSQL text cannot
        # hold it: refuse it with the other invalid fields (422).
        if "\x00" in value:
            raise ValueError("env_id must not contain NUL (\\u0000) characters")
        return value

    @field_validator("sde_sample_freq")
    @classmethod
    def _sde_freq(cls, value: int) -> int:
        if value == 0:
            raise ValueError("sde_sample_freq must be -1 (once per rollout) or at least 1")
        return value

    @field_validator("env_config")
    @classmethod
    def _plain_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_json(value, "env_config", 0)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> PPOConfig:
        if self.minibatch_size > self.train_batch_size_per_learner:
            raise ValueError(
                "minibatch_size must not exceed train_batch_size_per_learner "
                f"({self.minibatch_size} > {self.train_batch_size_per_learner})"
            )
        if self.lr_schedule == "linear" and self.stop.env_steps is None:
            raise ValueError("lr_schedule 'linear' needs stop.env_steps")
        return self

    # --- derived values ------------------------------------------------------------------------
    @property
    def total_train_batch_size(self) -> int:
        """Env steps sampled per iteration, over all Learners."""
        return self.train_batch_size_per_learner * max(1, self.num_learners)

    @property
    def ray_cpus(self) -> float:
        """CPUs the Ray actors of this experiment reserve (the driver not included)."""
        return (
            self.num_env_runners * self.num_cpus_per_env_runner
            + self.num_learners * self.num_cpus_per_learner
        )

    def to_json_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_saved(cls, raw: dict[str, Any]) -> PPOConfig:
        """A config saved by an older version (a checkpoint's meta, which no migration
        rewrites): fields that left PPOConfig since are dropped, the rest validated."""
        return cls.model_validate({k: v for k, v in raw.items() if k not in RETIRED_FIELDS})


def _check_json(value: Any, where: str, depth: int) -> None:
    """Finite numbers, no NUL characters, at most MAX_ENV_CONFIG_DEPTH levels deep."""
    if depth > MAX_ENV_CONFIG_DEPTH:
        raise ValueError(f"nested deeper than {MAX_ENV_CONFIG_DEPTH} levels")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{where}: numbers must be finite (no NaN / Infinity)")
    if isinstance(value, str) and "\x00" in value:
        raise ValueError(f"{where}: text must not contain NUL characters")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json(key, where, depth + 1)
            _check_json(item, f"{where}.{key}", depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _check_json(item, f"{where}.{i}", depth + 1)
