"""The autograd SGD step: the reference for every Learner, the one for all but small CPU MLPs.

A minibatch step is the PPO loss (trainer/losses.py) through the module (under DDP its
wrapper, which all-reduces the gradients in backward(); under bf16 autocast when asked),
autograd's backward, torch's clip_grad_norm_ and torch's fused Adam. Anything the hand-written
step (trainer/fast/step.py) does not cover (images, GPUs, DDP, bf16, the KL penalty) runs here,
and ROLLOUT_REFERENCE_PATHS=1 runs everything here.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from torch import nn

from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.devices import forward_autocast
from trainer.losses import ppo_losses, total_loss
from trainer.module import PPOModule
from trainer.optim import ADAM_EPS, EagerAdam


class AutogradStep:
    """The SGD step (trainer/sgd_step.py `SGDStep`) on torch's autograd and optimizer."""

    name = "autograd"

    def __init__(
        self,
        module: PPOModule,
        config: PPOConfig,
        device: torch.device,
        train_module: nn.Module | None = None,
    ) -> None:
        """`train_module` is what the forward pass calls (a DDP wrapper of `module`)."""
        self.module = module
        self.config = config
        self.device = device
        self._train_module = module if train_module is None else train_module
        self._params = list(module.parameters())
        self._max_norm = config.grad_clip if config.grad_clip is not None else float("inf")
        self.optimizer = EagerAdam(module.parameters(), lr=config.lr, eps=ADAM_EPS, fused=True)

    def _autocast(self) -> AbstractContextManager[None]:
        return forward_autocast(self.device, self.config.learner_precision)

    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """The GAE value pass: [B, *obs] -> [B] float32."""
        with self._autocast():
            return self.module.values(obs).float()

    def prepare(self, batch: TrainBatch) -> TrainBatch:
        return batch

    def new_sums(self) -> torch.Tensor:
        return torch.zeros(6, device=self.device)  # stays on the device: no sync per step

    def epoch(self, steps: int) -> AbstractContextManager[None]:
        return nullcontext()

    def gradients(self, mb: TrainBatch, kl_coeff: float) -> torch.Tensor:
        """Leave the PPO loss's gradients in param.grad; (policy_loss, vf_loss, entropy, kl,
        clip_fraction) of the minibatch as a [5] tensor."""
        cfg = self.config
        with self._autocast():
            dist_inputs, values = self._train_module(mb.obs)
        out = dist_inputs.float(), values.float()  # log-probs and losses in fp32
        policy_loss, vf_loss, entropy, kl, clip_fraction = ppo_losses(
            out, mb, cfg, self.module.dist, kl_coeff
        )
        loss = total_loss(policy_loss, vf_loss, entropy, kl, cfg, kl_coeff)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return torch.stack([policy_loss, vf_loss, entropy, kl, clip_fraction]).detach()

    def __call__(self, mb: TrainBatch, kl_coeff: float) -> tuple[torch.Tensor, torch.Tensor]:
        losses = self.gradients(mb, kl_coeff)
        grad_norm = nn.utils.clip_grad_norm_(self._params, self._max_norm, foreach=True)
        self.optimizer.step()
        return losses, grad_norm
