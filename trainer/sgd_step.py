"""The Learner's SGD step: one interface, two implementations, chosen once per Learner.

The Learner owns the epoch loop (shuffles, minibatch sizes, advantage standardisation, the lr
schedule, the reported sums); a step owns what one minibatch does (the loss's gradients,
clipping, the optimizer update), the form of the batch it reads, and the GAE value pass:

- "autograd" (trainer/autograd_step.py): torch's autograd and Adam; the reference, and the
  only step for images, GPUs, DDP, bf16 and the KL penalty.
- "hand-written" (trainer/fast/step.py): closed-form gradients in numpy and Adam over one flat
  buffer, for MLPs on a CPU Learner: the same function without eager torch's per-operation
  cost.

"auto" takes the hand-written step where it applies, unless ROLLOUT_REFERENCE_PATHS=1
(trainer/fast/switch.py) forces the reference; naming a step picks it (tests, benchmarks).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, Self

import torch
from torch import nn

from trainer.autograd_step import AutogradStep
from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.fast.step import HandWrittenStep
from trainer.fast.switch import reference_paths
from trainer.module import PPOModule
from trainer.optim import EagerAdam

StepKind = Literal["auto", "autograd", "hand-written"]


class Minibatches(Protocol):
    """A train batch in the form one step reads (TrainBatch, or fast.batch.NumpyBatch)."""

    def __len__(self) -> int: ...

    def split(self, perm: torch.Tensor, sizes: list[int]) -> list[Self]:
        """Minibatches of `sizes` rows in the order of `perm` (CPU int64, >= sum(sizes))."""
        ...

    def standardized(self) -> Self:
        """The advantages standardised over these rows (mean 0, unbiased std 1)."""
        ...


class SGDStep(Protocol):
    """What the Learner's epoch loop calls; sums and losses are tensors or numpy arrays, as
    the implementation keeps them (the loop only adds them up and indexes them)."""

    name: str
    optimizer: EagerAdam  # its param_groups carry the lr; its state dict goes in checkpoints

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The GAE value pass: [B, *obs] -> [B] float32, without gradients."""
        ...

    def prepare(self, batch: TrainBatch) -> Minibatches: ...

    def new_sums(self) -> Any:
        """[6] zeros to add each step's 5 losses and grad norm to."""
        ...

    def epoch(self, steps: int) -> AbstractContextManager[None]:
        """Wraps one epoch of `steps` minibatch steps."""
        ...

    def gradients(self, mb: Any, kl_coeff: float) -> Any:
        """The loss's gradients into param.grad; the [5] (policy_loss, vf_loss, entropy, kl,
        clip_fraction)."""
        ...

    def __call__(self, mb: Any, kl_coeff: float) -> tuple[Any, Any]:
        """One minibatch step: gradients, clipping, the update; ([5] losses, grad norm before
        clipping)."""
        ...


def make_sgd_step(
    kind: StepKind,
    module: PPOModule,
    config: PPOConfig,
    device: torch.device,
    *,
    world_size: int = 1,
    train_module: nn.Module | None = None,
) -> SGDStep:
    """The step a Learner runs; `train_module` is the module's DDP wrapper, if any."""
    fast_fits = HandWrittenStep.supports(module, config, device, world_size)
    if kind == "hand-written" and not fast_fits:
        raise ValueError("the hand-written SGD step does not cover this Learner's module/config")
    if kind == "hand-written" or (kind == "auto" and fast_fits and not reference_paths()):
        return HandWrittenStep(module, config)
    if kind not in ("auto", "autograd"):
        raise ValueError(f"unknown SGD step {kind!r}: auto, autograd or hand-written")
    return AutogradStep(module, config, device, train_module)
