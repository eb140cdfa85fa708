"""PPOLearner: one update = train batch (value pass + GAE) -> num_epochs x shuffled minibatches.

The loss is trainer/losses.py's. Each minibatch step runs on the Learner's SGD step
(trainer/sgd_step.py: autograd, or the hand-written one for MLPs on a CPU), chosen once at
construction; the epoch loop around it is this module's, the same for both.

The KL coefficient adapts once per update on the update's mean KL (RLlib's rule, on the mean
rather than RLlib's last minibatch): > 2 * kl_target -> x1.5, < kl_target / 2 -> x0.5.
kl_coeff = 0 disables the penalty entirely. With lr_schedule "kl_adaptive" the learning rate
adapts after every minibatch step on that step's KL (rl_games' adaptive schedule, its default
per-minibatch form): > 2 * kl_target -> / 1.5, < kl_target / 2 -> x 1.5, within fixed bounds.

Runs alone (world_size 1) or as one rank of a torch DDP group that the caller has initialised
(trainer/learner_group.py); with DDP, gradients are all-reduced in backward() so weights stay
identical, and every rank takes the same number of minibatch steps (derived from the config, not
from the shard size).

Axes: B real timesteps of this Learner's shard.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from trainer.batch import TrainBatch, build_train_batch
from trainer.config import MAX_ADAPTIVE_LR, MIN_ADAPTIVE_LR, PPOConfig
from trainer.devices import HostStaging, set_cpu_threads, set_matmul_precision
from trainer.episode import EpisodeChunk
from trainer.module import PPOModule
from trainer.sgd_step import StepKind, make_sgd_step

# Image batches: bound the rows of one value forward pass (B+K frames of 84x84x4 as float32
# would need gigabytes at once). On a CPU, passes of 256 rows keep the conv activations in cache:
# 2-2.5x faster per row than 2048 (docs/benchmarks.md, Atari); a GPU wants the larger passes.
_IMAGE_VALUE_ROWS = {"cpu": 256, "cuda": 2048}


@dataclass(frozen=True)
class LearnerStats:
    """What one update reports; losses and KL are means over all minibatch steps."""

    policy_loss: float
    vf_loss: float
    entropy: float
    kl: float
    kl_coeff: float  # after this update's adaptation (used by the next update)
    clip_fraction: float
    explained_variance: float
    grad_norm: float  # before clipping
    lr: float
    num_steps_trained: int
    time_gae_s: float  # batch building + value pass + GAE
    time_sgd_s: float

    def as_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in dataclasses.asdict(self).items()}


def linear_lr(lr: float, env_steps: int, total_env_steps: int | None) -> float:
    """lr decayed linearly to 0 at total_env_steps."""
    if total_env_steps is None:
        return lr
    return lr * max(0.0, 1.0 - env_steps / total_env_steps)


def minibatch_sizes(n: int, minibatch_size: int, num_minibatches: int) -> list[int]:
    """Rows of each of an epoch's `num_minibatches` minibatches over a batch of `n` rows.

    As SB3's rollout buffer: minibatches of exactly `minibatch_size` rows over one shuffle, every
    row once per epoch; the last minibatch takes the rest, so it is smaller when minibatch_size
    does not divide the batch (1000 rows, 600: 600 + 400), or a little larger when sampling
    overshot the batch size by a few steps. The count comes from the config, so every DDP rank
    steps together: a shard with fewer rows than the full minibatches need (shards may differ by
    up to 10 %) is split into `num_minibatches` equal parts, its rows cycled when there are
    fewer rows than steps.
    """
    full = (num_minibatches - 1) * minibatch_size
    if n > full:
        return [minibatch_size] * (num_minibatches - 1) + [n - full]
    # Fewer rows than the full minibatches need: equal parts of the rows, cycled when n is
    # smaller than the step count, so no minibatch is empty.
    rows = max(n, num_minibatches)
    return [rows // num_minibatches + (i < rows % num_minibatches) for i in range(num_minibatches)]


def adapt_kl_coeff(kl_coeff: float, kl: float, kl_target: float) -> float:
    """RLlib's adaptive KL rule; 0 stays 0 (penalty disabled)."""
    if kl > 2.0 * kl_target:
        return kl_coeff * 1.5
    if kl < 0.5 * kl_target:
        return kl_coeff * 0.5
    return kl_coeff


def adapt_lr(lr: float, kl: float, kl_target: float) -> float:
    """rl_games' AdaptiveScheduler: one minibatch step's KL moves the lr by a factor of 1.5."""
    if kl > 2.0 * kl_target:
        return max(lr / 1.5, MIN_ADAPTIVE_LR)
    if kl < 0.5 * kl_target:
        return min(lr * 1.5, MAX_ADAPTIVE_LR)
    return lr


def explained_variance(values: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - Var(targets - values) / Var(targets); nan when the targets are constant."""
    var_t = targets.var(unbiased=False)
    if var_t.item() == 0.0:
        return float("nan")
    return float(1.0 - (targets - values).var(unbiased=False) / var_t)


class PPOLearner:
    """Holds the full PPOModule and its optimizer; `update()` is the whole learning step."""

    def __init__(
        self,
        config: PPOConfig,
        observation_space: gym.spaces.Box,
        action_space: gym.spaces.Discrete | gym.spaces.Box,
        *,
        device: str | torch.device = "cpu",
        rank: int = 0,
        world_size: int = 1,
        sgd_step: StepKind = "auto",
    ) -> None:
        """`sgd_step` names the SGD step implementation (trainer/sgd_step.py); "auto" takes
        the hand-written one where it applies."""
        torch.set_num_threads(config.torch_num_threads)  # the initial weights as always
        self.config = config
        self.device = torch.device(device)
        self.rank, self.world_size = rank, world_size
        # Same initial weights on every rank, without reseeding the caller's global torch RNG.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(config.seed)
            module = PPOModule(observation_space, action_space, config.model)
        self.module = module.to(self.device)
        set_matmul_precision(self.device, config.learner_precision)
        train_module: nn.Module = self.module
        if world_size > 1:
            # Broadcasts rank 0's weights at construction; all-reduces gradients in backward().
            train_module = nn.parallel.DistributedDataParallel(
                self.module, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        self._image_obs = len(observation_space.shape) == 3
        self._staging = HostStaging(self.device)  # the batch's observations, kept across updates
        self.sgd_step = make_sgd_step(
            sgd_step,
            self.module,
            config,
            self.device,
            world_size=world_size,
            train_module=train_module,
        )
        self.optimizer = self.sgd_step.optimizer
        set_cpu_threads(config.torch_num_threads)
        self.kl_coeff = config.kl_coeff
        self.adaptive_lr = config.lr  # lr_schedule kl_adaptive: where the schedule stands
        self.num_updates = 0
        self.num_steps_trained = 0
        # Shuffling uses its own generator so it does not depend on other torch RNG users.
        self._rng = torch.Generator().manual_seed(config.seed + 1000 * rank)

    # --- the update ----------------------------------------------------------------------------
    def update(self, chunks: Sequence[EpisodeChunk], env_steps: int) -> LearnerStats:
        """One PPO update on `chunks`; `env_steps` is the lifetime env-step count where their
        sampling began (the lr schedule's position)."""
        cfg = self.config
        t0 = time.perf_counter()
        batch = build_train_batch(
            chunks,
            self._values,
            gamma=cfg.gamma,
            lam=cfg.gae_lambda,
            normalize_advantages=cfg.normalize_advantages
            and cfg.normalize_advantages_over == "batch",
            device=self.device,
            value_rows_per_pass=(
                _IMAGE_VALUE_ROWS.get(self.device.type, 2048) if self._image_obs else None
            ),
            staging=self._staging,
        )
        t1 = time.perf_counter()
        lr = self._set_lr(env_steps)
        sums = self._sgd(batch)  # [6] sums over minibatch steps
        n_steps = cfg.num_epochs * self.num_minibatches
        means = sums / n_steps  # [6] on the device (all-reduced there under DDP)
        ev = explained_variance(batch.values, batch.value_targets)
        if self.world_size > 1:
            # Identical stats (and so identical kl_coeff) on every rank.
            dist.all_reduce(means)
            means /= self.world_size
        policy_loss, vf_loss, entropy, kl, clip_fraction, grad_norm = means.cpu().tolist()
        if self.kl_coeff > 0.0:
            self.kl_coeff = adapt_kl_coeff(self.kl_coeff, kl, cfg.kl_target)
        if cfg.lr_schedule == "kl_adaptive":
            lr = self.adaptive_lr  # where this update left it: the next update's first lr
        self.num_updates += 1
        self.num_steps_trained += len(batch)
        return LearnerStats(
            policy_loss=policy_loss,
            vf_loss=vf_loss,
            entropy=entropy,
            kl=kl,
            kl_coeff=self.kl_coeff,
            clip_fraction=clip_fraction,
            explained_variance=ev,
            grad_norm=grad_norm,
            lr=lr,
            num_steps_trained=len(batch),
            time_gae_s=t1 - t0,
            time_sgd_s=time.perf_counter() - t1,
        )

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        return self.sgd_step.values(obs)

    @property
    def num_minibatches(self) -> int:
        """Minibatches per epoch, ceil(train_batch_size_per_learner / minibatch_size): from the
        config, not the shard's size, so every DDP rank takes the same number of steps."""
        return -(-self.config.train_batch_size_per_learner // self.config.minibatch_size)

    def _set_lr(self, env_steps: int) -> float:
        cfg = self.config
        lr = cfg.lr
        if cfg.lr_schedule == "linear":
            lr = linear_lr(cfg.lr, env_steps, cfg.stop.env_steps)
        elif cfg.lr_schedule == "kl_adaptive":
            lr = self.adaptive_lr
        self._apply_lr(lr)
        return lr

    def _apply_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _adapt_lr(self, kl: torch.Tensor | float) -> None:
        """lr_schedule kl_adaptive, after one minibatch step with this KL. Under DDP the ranks'
        KLs are averaged first, so every rank keeps the same lr."""
        if self.config.lr_schedule != "kl_adaptive":
            return
        if self.world_size > 1:
            kl = torch.as_tensor(kl, dtype=torch.float32, device=self.device).clone()
            dist.all_reduce(kl)
            kl = kl / self.world_size
        self.adaptive_lr = adapt_lr(self.adaptive_lr, float(kl), self.config.kl_target)
        self._apply_lr(self.adaptive_lr)

    def _epoch_sizes(self, n: int) -> tuple[list[int], int]:
        """This epoch's minibatch sizes over n rows, and how often the shuffle is repeated (a
        batch too small for the steps is cycled)."""
        sizes = minibatch_sizes(n, self.config.minibatch_size, self.num_minibatches)
        return sizes, -(-sum(sizes) // n)

    def _sgd(self, batch: TrainBatch) -> torch.Tensor:
        """num_epochs passes of shuffled minibatches through the SGD step; returns the [6]
        per-stat sums over all steps (5 losses, the grad norm)."""
        cfg = self.config
        step = self.sgd_step
        data = step.prepare(batch)
        n = len(data)
        sizes, reps = self._epoch_sizes(n)
        # One minibatch of exactly the whole batch: its loss is a mean over all rows, so the
        # shuffle cannot change it; skip the gathers (seven copies of the batch per epoch).
        whole = sizes == [n]
        per_minibatch = cfg.normalize_advantages and cfg.normalize_advantages_over == "minibatch"
        if whole and per_minibatch:  # the one minibatch is the batch: standardise it once
            data = data.standardized()
        sums = step.new_sums()
        for _ in range(cfg.num_epochs):
            if whole:
                minibatches = [data]
            else:
                perm = torch.randperm(n, generator=self._rng)
                if reps > 1:
                    perm = perm.repeat(reps)
                minibatches = data.split(perm, sizes)
                if per_minibatch:
                    minibatches = [mb.standardized() for mb in minibatches]
            with step.epoch(len(minibatches)):
                for mb in minibatches:
                    losses, grad_norm = step(mb, self.kl_coeff)
                    sums[:5] += losses
                    sums[5] += grad_norm
                    self._adapt_lr(losses[3])
        return torch.as_tensor(sums).float()

    # --- weights and state ---------------------------------------------------------------------
    def get_inference_weights(self) -> dict[str, np.ndarray]:
        """Policy weights as numpy copies (cheap to ray.put, no torch needed to pickle)."""
        return {k: v.cpu().numpy().copy() for k, v in self.module.inference_state_dict().items()}

    def get_state(self) -> dict[str, Any]:
        """Everything needed to resume learning; CPU tensors, picklable and torch.save-able."""
        return {
            "module": {k: v.detach().cpu().clone() for k, v in self.module.state_dict().items()},
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "kl_coeff": self.kl_coeff,
            "adaptive_lr": self.adaptive_lr,
            "num_updates": self.num_updates,
            "num_steps_trained": self.num_steps_trained,
            "rng": self._rng.get_state(),
            # Serial mode samples actions on this GPU from the process's CUDA generator: a
            # resumed GPU run draws the same actions only with it restored.
            **({"cuda_rng": torch.cuda.get_rng_state(self.device)} if self._on_gpu else {}),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.module.load_state_dict(state["module"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.kl_coeff = float(state["kl_coeff"])
        # Checkpoints from before lr_schedule kl_adaptive existed start it at lr.
        self.adaptive_lr = float(state.get("adaptive_lr", self.config.lr))
        self.num_updates = int(state["num_updates"])
        self.num_steps_trained = int(state["num_steps_trained"])
        if "rng" in state:
            self._rng.set_state(state["rng"])
        if "cuda_rng" in state and self._on_gpu:
            torch.cuda.set_rng_state(state["cuda_rng"], self.device)

    @property
    def _on_gpu(self) -> bool:
        return self.device.type == "cuda"


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().clone()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_to_cpu(v) for v in obj]
    return obj
