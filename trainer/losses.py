"""The PPO loss of one minibatch (Schulman et al. 2017), in torch: the definition of what both
SGD steps minimise.

    ratio    = exp(logp_new - logp_old)
    policy   = -mean(min(A * ratio, A * clip(ratio, 1 - clip_param, 1 + clip_param)))   # eq. 7
    vf       = mean((V - target)^2), or with vf_clip_param the PPO2 / CleanRL form
               mean(max((V - target)^2, (V_old + clip(V - V_old, -c, c) - target)^2))
    total    = policy + vf_loss_coeff * vf - entropy_coeff * entropy + kl_coeff * KL(old || new)

The autograd step (trainer/autograd_step.py) differentiates these functions; the hand-written
step (trainer/fast/hand_grad.py) has their derivatives in closed form and declares the config
fields it implements (`LOSS_FIELDS`): a test fails when these read any other.
Axes: M minibatch rows, D dist_inputs width.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer.batch import TrainBatch
from trainer.config import PPOConfig


def ppo_losses(
    module_out: tuple[torch.Tensor, torch.Tensor],
    mb: TrainBatch,
    config: PPOConfig,
    action_dist: Any,
    kl_coeff: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(policy_loss, vf_loss, entropy, kl, clip_fraction), all scalars, for one minibatch.

    entropy and kl carry gradients only when their coefficient is positive.
    """
    dist_inputs, values = module_out  # [M, D], [M]
    logp = action_dist.logp(dist_inputs, mb.actions)  # [M]
    ratio = torch.exp(logp - mb.logp)
    adv = mb.advantages
    clipped = ratio.clamp(1.0 - config.clip_param, 1.0 + config.clip_param)
    policy_loss = -torch.minimum(adv * ratio, adv * clipped).mean()
    vf_err = (values - mb.value_targets).square()
    if config.vf_clip_param is not None:
        c = config.vf_clip_param
        v_clipped = mb.values + (values - mb.values).clamp(-c, c)
        vf_err = torch.maximum(vf_err, (v_clipped - mb.value_targets).square())
    vf_loss = vf_err.mean()
    # Terms with a zero weight are only reported: computing them without autograd keeps them out
    # of the backward pass (a measurable share of a small network's step).
    with torch.set_grad_enabled(torch.is_grad_enabled() and config.entropy_coeff > 0.0):
        entropy = action_dist.entropy(dist_inputs).mean()
    with torch.set_grad_enabled(torch.is_grad_enabled() and kl_coeff > 0.0):
        kl = action_dist.kl(mb.dist_inputs, dist_inputs).mean()
    with torch.no_grad():
        clip_fraction = ((ratio - 1.0).abs() > config.clip_param).float().mean()
    return policy_loss, vf_loss, entropy, kl, clip_fraction


def total_loss(
    policy_loss: torch.Tensor,
    vf_loss: torch.Tensor,
    entropy: torch.Tensor,
    kl: torch.Tensor,
    config: PPOConfig,
    kl_coeff: float,
) -> torch.Tensor:
    """The scalar that is differentiated; the KL term is left out entirely when kl_coeff is 0."""
    loss = policy_loss + config.vf_loss_coeff * vf_loss - config.entropy_coeff * entropy
    if kl_coeff > 0.0:
        loss = loss + kl_coeff * kl
    return loss
