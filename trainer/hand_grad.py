"""The PPO minibatch step of an MLP PPOModule with its gradients written out by hand.

Why: with rl-zoo's entries a run is thousands of 64-row minibatch steps of 64-unit networks
(Pendulum: 640 per 4096 env steps), and on a CPU such a step is all per-operation overhead:
autograd records a graph node per operation and walks it back, the losses' reductions,
`torch.minimum` and `clamp` add backward kernels of their own, and torch's Adam and
clip_grad_norm_ loop over the parameter tensors in Python. On Acrobot's preset that step took
1.41 ms on one thread. Here the forward pass keeps each layer's output, the loss's derivatives
with respect to the log-prob and the value are written in closed form, and each Linear layer's
backward is two matmuls and a sum written straight into `param.grad`, which FlatParameters
keeps in one flat buffer, so clipping is one norm and Adam one fused kernel (trainer/optim.py):
0.40 ms for the same step.

What it covers (`supports()`): MLP encoders (tanh or ReLU), shared or separate, Categorical,
diagonal-Gaussian and gSDE heads, clipped or plain value loss, any entropy coefficient, on a CPU
Learner without DDP, in float32, with the KL penalty off (kl_coeff 0, every preset's default).
Anything else (images, GPUs, DDP, bf16, the KL penalty) takes the autograd path. Both paths
compute the same function: tests/trainer/test_hand_grad.py checks the gradients against autograd
to float32 rounding for every combination covered.

Derivatives (M rows, A = advantages, r = exp(logp - logp_old), c = clip_param):
    policy = -mean(min(A r, A clip(r, 1-c, 1+c)))
        d/dlogp_i = -A_i r_i [A_i r_i <= A_i clip(r_i)] / M   (torch.minimum gives each side half
        the gradient on a tie; inside the clip range both sides are the same function of r, so
        the whole gradient flows, and outside it only the unclipped side has one)
    Categorical logits: dlogp/dlogits = onehot(a) - p;  dH/dlogits = -p (log p + H)
    Gaussian (mean m, log-std s, z = (x - m) e^-s): dlogp/dm = z e^-s;  dlogp/ds = z^2 - 1;
        dH/ds = 1; gSDE's s = 0.5 log(emb^2 @ e^{2 S} + 1e-6) with emb detached, so
        dS = (emb^2)^T @ (ds / (var + 1e-6)) * e^{2 S}
    value = mean((V - T)^2), or with clipping the max of that and the clipped error (torch's
        half-and-half on ties, as above)
Axes: M minibatch rows, H hidden units, n logits, K action dims.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from trainer import distributions
from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.module import _SDE_EPS, MLPEncoder, PPOModule

_LOG_2PI = math.log(2.0 * math.pi)
_Layer = tuple[torch.Tensor, torch.Tensor]  # (weight [out, in], bias [out])


def _linears(encoder: MLPEncoder) -> list[_Layer]:
    return [(m.weight, m.bias) for m in encoder.net if isinstance(m, nn.Linear)]


@dataclass(frozen=True)
class _Scales:
    """The per-row factors of a minibatch of M rows, as 0-d tensors (and one [5])."""

    inv_m: torch.Tensor  # 1 / M
    value: torch.Tensor  # 2 vf_loss_coeff / M: dL/dV = value * (V - target)
    entropy: torch.Tensor  # entropy_coeff / M
    means: torch.Tensor  # [5]: the step's sums -> (policy_loss, vf_loss, entropy, kl, clip_frac)


class HandGradStep:
    """`step(mb)` writes every parameter's gradient of the PPO loss into `param.grad` and
    returns the minibatch's (policy_loss, vf_loss, entropy, kl, clip_fraction) as a [5] tensor."""

    @staticmethod
    def supports(
        module: PPOModule, config: PPOConfig, device: torch.device, world_size: int
    ) -> bool:
        """Whether this step computes what the autograd path would (see the module docstring)."""
        return (
            device.type == "cpu"
            and world_size == 1
            and config.learner_precision != "bf16"
            and config.kl_coeff == 0.0
            and isinstance(module.pi_encoder, MLPEncoder)
            and (module.vf_encoder is None or isinstance(module.vf_encoder, MLPEncoder))
            and module.vf_head is not None
            and config.model.activation in ("tanh", "relu")
        )

    def __init__(self, module: PPOModule, config: PPOConfig) -> None:
        if module.vf_head is None:
            raise ValueError("the hand-written step needs a full PPOModule (with its critic)")
        self.config = config
        self.relu = config.model.activation == "relu"
        self.categorical = module.dist is distributions.Categorical
        self.use_sde = module.use_sde
        self.pi_layers = _linears(module.pi_encoder)  # type: ignore[arg-type]
        self.vf_layers = (
            None if module.vf_encoder is None else _linears(module.vf_encoder)  # type: ignore[arg-type]
        )
        self.pi_head: _Layer = (module.pi_head.weight, module.pi_head.bias)
        self.vf_head: _Layer = (module.vf_head.weight, module.vf_head.bias)
        self.log_std = module.log_std
        # In-place arithmetic with a Python number wraps it in a tensor and converts it on every
        # call (~2 us each, a tenth of the step): constants are 0-d tensors, made once.
        self._zero, self._one, self._two = torch.tensor(0.0), torch.tensor(1.0), torch.tensor(2.0)
        self._scales: dict[int, _Scales] = {}
        for p in module.parameters():  # written in place every step, never reallocated
            if p.grad is None:
                p.grad = torch.zeros_like(p)

    # --- forward and backward of the encoders ------------------------------------------------
    def _encode(self, layers: list[_Layer], x: torch.Tensor) -> list[torch.Tensor]:
        """[M, in] -> the input and every layer's activation (the last is the embedding)."""
        hs = [x]
        for w, b in layers:
            if self.relu:
                hs.append(torch.addmm(b, hs[-1], w.t()).relu_())
            else:
                # tanh(z) = 2 sigmoid(2z) - 1 (the module's Tanh on large batches): torch's CPU
                # tanh is ~4x its sigmoid, and addmm's alpha and beta give 2z for free.
                z2 = torch.addmm(b, hs[-1], w.t(), beta=2.0, alpha=2.0)
                hs.append(z2.sigmoid_().mul_(self._two).sub_(self._one))
        return hs

    def _backward(self, layers: list[_Layer], hs: list[torch.Tensor], dh: torch.Tensor) -> None:
        """Gradients of every layer from dL/d(embedding) [M, H]; `hs` as _encode returned."""
        for i in range(len(layers) - 1, -1, -1):
            w, b = layers[i]
            if self.relu:
                dz = torch.ops.aten.threshold_backward(dh, hs[i + 1], 0.0)
            else:
                dz = torch.ops.aten.tanh_backward(dh, hs[i + 1])
            torch.mm(dz.t(), hs[i], out=w.grad)
            torch.sum(dz, 0, out=b.grad)
            if i:
                dh = torch.mm(dz, w)

    # --- the step ------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self, mb: TrainBatch) -> torch.Tensor:
        cfg = self.config
        m = len(mb)
        inv_m = 1.0 / m
        scales = self._scales.get(m) or self._scales_for(m)
        obs = mb.obs if mb.obs.dtype == torch.float32 else mb.obs.float()
        pi_hs = self._encode(self.pi_layers, obs)
        vf_hs = pi_hs if self.vf_layers is None else self._encode(self.vf_layers, obs)
        emb, vf_emb = pi_hs[-1], vf_hs[-1]  # [M, H]
        w_pi, b_pi = self.pi_head
        w_vf, b_vf = self.vf_head
        out = torch.addmm(b_pi, emb, w_pi.t())  # [M, n] logits or [M, K] means
        values = torch.addmm(b_vf, vf_emb, w_vf.t()).squeeze(-1)  # [M]

        # Policy: log-probs, then the clipped surrogate and its derivative per row.
        if self.categorical:
            logp_all = torch.log_softmax(out, dim=-1)  # [M, n]
            probs = logp_all.exp()
            actions = mb.actions.long().unsqueeze(-1)  # [M, 1]
            logp = logp_all.gather(-1, actions).squeeze(-1)  # [M]
        else:
            log_std, var = self._gaussian_log_std(emb)  # [K] or [M, K]; gSDE's variance
            inv_std = torch.exp(-log_std)
            z = (mb.actions - out) * inv_std  # [M, K]
            logp = (-0.5 * z.square() - log_std).sum(-1) - 0.5 * _LOG_2PI * out.shape[-1]
        ratio = torch.exp(logp - mb.logp)  # [M]
        adv = mb.advantages
        clip = cfg.clip_param
        ratio_clipped = ratio.clamp(1.0 - clip, 1.0 + clip)
        surrogate = adv * ratio
        clipped = adv * ratio_clipped
        unclipped = surrogate <= clipped  # where min() takes (the gradient of) the surrogate
        objective_sum = torch.where(unclipped, surrogate, clipped).sum()
        neg_g = torch.where(unclipped, surrogate, self._zero).mul_(scales.inv_m)  # -dL/dlogp
        clipped_sum = (ratio_clipped != ratio).sum(dtype=torch.float32)

        ent_coef = cfg.entropy_coeff
        if self.categorical:
            plogp = probs * logp_all  # [M, n]
            neg_entropy_sum = plogp.sum()
            dout = probs * neg_g.unsqueeze(-1)  # dL/dlogits = g (onehot - p)
            dout.scatter_add_(-1, actions, neg_g.neg().unsqueeze(-1))
            if ent_coef > 0.0:  # -c dH/dlogits / M = c p (log p + H) / M
                neg_entropy = plogp.sum(-1, keepdim=True)  # [M, 1]
                dout.add_(plogp.sub_(probs * neg_entropy), alpha=ent_coef * inv_m)
            old_logp_all = torch.log_softmax(mb.dist_inputs, dim=-1)
            kl_sum = (old_logp_all.exp() * (old_logp_all - logp_all)).sum()
        else:
            neg_gk = neg_g.unsqueeze(-1)
            dout = (z * inv_std).mul_(neg_gk).neg_()  # dL/dmean [M, K]
            dlog_std = (1.0 - z.square()).mul_(neg_gk)  # dL/dlog_std per row [M, K]
            if ent_coef > 0.0:
                dlog_std.sub_(scales.entropy)
            self._log_std_grad(emb, dlog_std, var)
            log_std_rows = log_std.expand_as(out)
            neg_entropy_sum = -(log_std_rows.sum() + 0.5 * (_LOG_2PI + 1.0) * out.numel())
            new_inputs = torch.cat([out, log_std_rows], dim=-1)
            kl_sum = distributions.DiagGaussian.kl(mb.dist_inputs, new_inputs).sum()

        # Value loss and its derivative per row.
        err = values - mb.value_targets
        if cfg.vf_clip_param is None:
            vf_sum = torch.dot(err, err)
            dv = err.mul_(scales.value)
        else:
            c = cfg.vf_clip_param
            delta = values - mb.values
            err_c = mb.values + delta.clamp(-c, c) - mb.value_targets
            vf_err, vf_err_c = err.square(), err_c.square()
            dv_c = err_c.mul_(delta.abs() <= c)
            # torch.maximum: the larger side's gradient, half of each on a tie.
            dv = torch.where(
                vf_err > vf_err_c, err, torch.where(vf_err < vf_err_c, dv_c, 0.5 * (err + dv_c))
            ).mul_(scales.value)
            vf_sum = torch.maximum(vf_err, vf_err_c).sum()

        # Heads, then the encoders (one pass through a shared encoder with both gradients).
        torch.mm(dout.t(), emb, out=w_pi.grad)
        torch.sum(dout, 0, out=b_pi.grad)
        d_emb = torch.mm(dout, w_pi)  # [M, H]
        dv_col = dv.unsqueeze(-1)  # [M, 1]
        torch.mm(dv.unsqueeze(0), vf_emb, out=w_vf.grad)
        torch.sum(dv_col, 0, out=b_vf.grad)
        d_vf_emb = dv_col * w_vf  # [M, H]
        if self.vf_layers is None:
            self._backward(self.pi_layers, pi_hs, d_emb.add_(d_vf_emb))
        else:
            self._backward(self.pi_layers, pi_hs, d_emb)
            self._backward(self.vf_layers, vf_hs, d_vf_emb)
        sums = torch.stack([objective_sum, vf_sum, neg_entropy_sum, kl_sum, clipped_sum])
        return sums.mul_(scales.means)

    def _scales_for(self, m: int) -> _Scales:
        cfg = self.config
        signs = torch.tensor([-1.0, 1.0, -1.0, 1.0, 1.0])  # -objective, vf, -(-entropy), kl, clip
        scales = _Scales(
            inv_m=torch.tensor(1.0 / m),
            value=torch.tensor(2.0 * cfg.vf_loss_coeff / m),
            entropy=torch.tensor(cfg.entropy_coeff / m),
            means=signs / m,
        )
        if len(self._scales) >= 8:  # an epoch has two sizes; the last one varies by update
            self._scales.clear()
        self._scales[m] = scales
        return scales

    # --- the Gaussian's log-std ----------------------------------------------------------------
    def _gaussian_log_std(self, emb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The log-std the module's dist_inputs carry: the parameter itself [K], or with gSDE
        0.5 log(emb^2 @ std^2 + eps) per row [M, K] (and that variance, for the backward)."""
        assert self.log_std is not None
        if not self.use_sde:
            return self.log_std, None
        var = torch.mm(emb.square(), torch.exp(self.log_std * 2.0)) + _SDE_EPS  # [M, K]
        return 0.5 * torch.log(var), var

    def _log_std_grad(
        self, emb: torch.Tensor, dlog_std: torch.Tensor, var: torch.Tensor | None
    ) -> None:
        assert self.log_std is not None and self.log_std.grad is not None
        if var is None:
            torch.sum(dlog_std, 0, out=self.log_std.grad)
            return
        torch.mm(emb.square().t(), dlog_std.div_(var), out=self.log_std.grad)  # [H, K]
        self.log_std.grad.mul_(torch.exp(self.log_std * 2.0))
