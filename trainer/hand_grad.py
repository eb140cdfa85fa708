"""The PPO minibatch step of an MLP PPOModule with its gradients written out by hand.

Why: with rl-zoo's entries a run is thousands of 64-row minibatch steps of 64-unit networks
(Pendulum: 640 per 4096 env steps), and on a CPU such a step is all per-operation overhead.
Autograd records a graph node per operation, then walks it back, then the losses' reductions,
`torch.minimum` and `clamp` each add their own backward kernels; measured on one thread, the
autograd step (forward, loss, backward) is ~1.2 ms of a 1.5 ms minibatch step. Here the same
gradients come from about forty tensor operations with no graph: the forward pass keeps each
layer's output, the loss's derivative with respect to the log-prob and the value is written in
closed form, and each Linear layer's backward is two matmuls and a sum written straight into
`param.grad`. Gradient clipping and Adam stay the Learner's (the same code as on the autograd
path).

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

import torch
from torch import nn

from trainer import distributions
from trainer.batch import TrainBatch
from trainer.config import PPOConfig
from trainer.module import _FAST_TANH_MIN_NUMEL, _SDE_EPS, MLPEncoder, PPOModule

_LOG_2PI = math.log(2.0 * math.pi)
_Layer = tuple[torch.Tensor, torch.Tensor]  # (weight [out, in], bias [out])


def _linears(encoder: MLPEncoder) -> list[_Layer]:
    return [(m.weight, m.bias) for m in encoder.net if isinstance(m, nn.Linear)]


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
        for p in module.parameters():  # written in place every step, never reallocated
            if p.grad is None:
                p.grad = torch.zeros_like(p)

    # --- forward and backward of the encoders ------------------------------------------------
    def _activate(self, z: torch.Tensor) -> torch.Tensor:
        if self.relu:
            return z.relu_()
        if z.numel() >= _FAST_TANH_MIN_NUMEL:  # the module's Tanh: 2 sigmoid(2x) - 1 when large
            return torch.sigmoid(z.mul_(2.0)).mul_(2.0).sub_(1.0)
        return z.tanh_()

    def _encode(self, layers: list[_Layer], x: torch.Tensor) -> list[torch.Tensor]:
        """[M, in] -> the input and every layer's activation (the last is the embedding)."""
        hs = [x]
        for w, b in layers:
            hs.append(self._activate(torch.addmm(b, hs[-1], w.t())))
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
        obs = mb.obs.to(torch.float32)
        pi_hs = self._encode(self.pi_layers, obs)
        vf_hs = pi_hs if self.vf_layers is None else self._encode(self.vf_layers, obs)
        emb, vf_emb = pi_hs[-1], vf_hs[-1]  # [M, H]
        out = torch.addmm(self.pi_head[1], emb, self.pi_head[0].t())  # [M, n] or [M, K]
        values = torch.addmm(self.vf_head[1], vf_emb, self.vf_head[0].t()).squeeze(-1)  # [M]

        # Policy: log-probs, then the clipped surrogate and its derivative per row.
        if self.categorical:
            logp_all = torch.log_softmax(out, dim=-1)  # [M, n]
            probs = logp_all.exp()
            logp = logp_all.gather(-1, mb.actions.long().unsqueeze(-1)).squeeze(-1)  # [M]
        else:
            log_std, var = self._gaussian_log_std(emb, out)  # [M, K] (or [K]), [M, K] or None
            inv_std = torch.exp(-log_std)
            z = (mb.actions - out) * inv_std  # [M, K]
            logp = (-0.5 * z.square() - log_std).sum(-1) - 0.5 * _LOG_2PI * out.shape[-1]
        ratio = torch.exp(logp - mb.logp)  # [M]
        adv = mb.advantages
        clip = cfg.clip_param
        surrogate = adv * ratio
        clipped = adv * ratio.clamp(1.0 - clip, 1.0 + clip)
        policy_loss = -torch.minimum(surrogate, clipped).mean()
        g = surrogate.mul_(surrogate <= clipped).mul_(-1.0 / m)  # dL/dlogp [M]
        clip_fraction = ((ratio - 1.0).abs() > clip).float().mean()

        ent_coef = cfg.entropy_coeff
        if self.categorical:
            entropy_rows = -(probs * logp_all).sum(-1)  # [M]
            dout = probs * (-g).unsqueeze(-1)  # g * (onehot - p)
            dout.scatter_add_(-1, mb.actions.long().unsqueeze(-1), g.unsqueeze(-1))
            if ent_coef > 0.0:
                dout += (logp_all + entropy_rows.unsqueeze(-1)).mul_(probs).mul_(ent_coef / m)
            old_logp_all = torch.log_softmax(mb.dist_inputs, dim=-1)
            kl = (old_logp_all.exp() * (old_logp_all - logp_all)).sum(-1).mean()
            entropy = entropy_rows.mean()
        else:
            gk = g.unsqueeze(-1)
            dout = z * inv_std * gk  # dL/dmean [M, K]
            dlog_std = (z.square() - 1.0).mul_(gk)  # dL/dlog_std per row [M, K]
            if ent_coef > 0.0:
                dlog_std -= ent_coef / m
            self._log_std_grad(emb, dlog_std, var)
            new_inputs = torch.cat([out, log_std.expand_as(out)], dim=-1)
            kl = distributions.DiagGaussian.kl(mb.dist_inputs, new_inputs).mean()
            entropy = (
                log_std.expand_as(out).sum(-1) + 0.5 * (_LOG_2PI + 1.0) * out.shape[-1]
            ).mean()

        # Value loss and its derivative per row.
        err = values - mb.value_targets
        vf_err = err.square()
        dv = err * 2.0
        if cfg.vf_clip_param is not None:
            c = cfg.vf_clip_param
            delta = values - mb.values
            inside = delta.abs() <= c
            err_c = mb.values + delta.clamp(-c, c) - mb.value_targets
            vf_err_c = err_c.square()
            dv_c = err_c.mul_(inside).mul_(2.0)
            # torch.maximum: the larger side's gradient, half of each on a tie.
            dv = torch.where(
                vf_err > vf_err_c, dv, torch.where(vf_err < vf_err_c, dv_c, 0.5 * (dv + dv_c))
            )
            vf_err = torch.maximum(vf_err, vf_err_c)
        vf_loss = vf_err.mean()
        dv = dv.mul_(cfg.vf_loss_coeff / m).unsqueeze(-1)  # [M, 1]

        # Heads, then the encoders (one pass through a shared encoder with both gradients).
        w_pi, b_pi = self.pi_head
        torch.mm(dout.t(), emb, out=w_pi.grad)
        torch.sum(dout, 0, out=b_pi.grad)
        d_emb = torch.mm(dout, w_pi)  # [M, H]
        w_vf, b_vf = self.vf_head
        torch.mm(dv.t(), vf_emb, out=w_vf.grad)
        torch.sum(dv, 0, out=b_vf.grad)
        d_vf_emb = torch.mm(dv, w_vf)  # [M, H]
        if self.vf_layers is None:
            self._backward(self.pi_layers, pi_hs, d_emb.add_(d_vf_emb))
        else:
            self._backward(self.pi_layers, pi_hs, d_emb)
            self._backward(self.vf_layers, vf_hs, d_vf_emb)
        return torch.stack([policy_loss, vf_loss, entropy, kl, clip_fraction])

    # --- the Gaussian's log-std ----------------------------------------------------------------
    def _gaussian_log_std(
        self, emb: torch.Tensor, out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
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
