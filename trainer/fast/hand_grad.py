"""The PPO loss's gradients for an MLP PPOModule, written out by hand.

Why: with rl-zoo's entries a run is thousands of 64-row minibatch steps of 64-unit networks
(Pendulum: 640 per 4096 env steps), and on a CPU such a step is all per-operation overhead:
autograd records a graph node per operation and walks it back, the losses' reductions,
`torch.minimum` and `clamp` add backward kernels of their own, and torch's Adam and
clip_grad_norm_ loop over the parameter tensors in Python. On Acrobot's preset that step took
1.41 ms on one thread. Here the forward pass keeps each layer's output, the loss's derivatives
with respect to the log-prob and the value are written in closed form, and each Linear layer's
backward is two matmuls and a sum written straight into `param.grad`, which FlatParameters
keeps in one flat buffer, so clipping is one norm and Adam one fused kernel (flat_adam.py):
0.40 ms for the same step with torch operations. The step is written in numpy over views of
the same memory (a torch CPU tensor and `tensor.numpy()` share it): numpy's per-operation cost
is a fraction of torch's eager dispatch, and its OpenBLAS matmuls keep up with torch's on these
shapes, so the step took 0.19 ms (Acrobot's shape). Adam stays torch's fused kernel on the flat
buffers (one call), the gradient norm is one BLAS dot.

What it covers (`supports()`, `LOSS_FIELDS`): MLP encoders (tanh or ReLU), shared or separate,
Categorical, diagonal-Gaussian and gSDE heads, clipped or plain value loss, any entropy
coefficient, on a CPU Learner without DDP, in float32, with the KL penalty off (kl_coeff 0,
every preset's default). Anything else (images, GPUs, DDP, bf16, the KL penalty) takes the
autograd step (trainer/autograd_step.py). Both compute the same function:
tests/trainer/test_hand_grad.py checks the gradients against autograd to float32 rounding for
every combination covered, and that the reference loss reads no config field outside
`LOSS_FIELDS`.

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

import numpy as np
import torch

from trainer import distributions
from trainer.config import PPOConfig
from trainer.fast import distributions as nd
from trainer.fast.batch import NumpyBatch
from trainer.module import MLPEncoder, PPOModule

# The PPOConfig fields of the PPO loss (trainer/losses.py) this step implements, for every value
# they take. A field it implements for some values only belongs here too, with supports()
# refusing the others; a loss term on any other field would be missing from these gradients.
LOSS_FIELDS = frozenset({"clip_param", "vf_clip_param", "vf_loss_coeff", "entropy_coeff"})
# Multiply-adds from which a product goes through torch (MKL and its thread pool, on views of
# the same memory) rather than numpy's single-threaded OpenBLAS: 64 x 256 x 256 takes ~90 us
# on one thread either way and ~55 us on torch's two; small products are cheaper in numpy.
TORCH_MATMUL_MIN = 1 << 20


def supports(module: PPOModule, config: PPOConfig, device: torch.device, world_size: int) -> bool:
    """Whether these gradients are the autograd step's (see the module docstring)."""
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


def _matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """a @ b (2-D, float32, any strides), into `out` when given."""
    if a.shape[0] * a.shape[1] * b.shape[1] < TORCH_MATMUL_MIN:
        return np.matmul(a, b, out=out)
    if out is None:
        return torch.mm(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    torch.mm(torch.from_numpy(a), torch.from_numpy(b), out=torch.from_numpy(out))
    return out


_Layer = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # weight [out, in], bias, grads


def _layer(linear: torch.nn.Linear) -> _Layer:
    w, b = linear.weight, linear.bias
    assert w.grad is not None and b.grad is not None
    return w.detach().numpy(), b.detach().numpy(), w.grad.numpy(), b.grad.numpy()


def _linears(encoder: MLPEncoder) -> list[_Layer]:
    return [_layer(m) for m in encoder.linears]


class HandGradients:
    """`compute(mb)` writes every parameter's gradient of the PPO loss into `param.grad` and
    returns the minibatch's (policy_loss, vf_loss, entropy, kl, clip_fraction) as a [5] array.

    It reads and writes the parameters' and gradients' memory in place (numpy views), so the
    module's parameters and their `.grad` must stay where they are (FlatParameters)."""

    def __init__(self, module: PPOModule, config: PPOConfig) -> None:
        if module.vf_head is None:
            raise ValueError("the hand-written step needs a full PPOModule (with its critic)")
        self.config = config
        self.relu = config.model.activation == "relu"
        self.categorical = module.dist is distributions.Categorical
        self.use_sde = module.use_sde
        for p in module.parameters():  # written in place every step, never reallocated
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.pi_layers = _linears(module.pi_encoder)  # type: ignore[arg-type]
        self.vf_layers = (
            None if module.vf_encoder is None else _linears(module.vf_encoder)  # type: ignore[arg-type]
        )
        self.pi_head = _layer(module.pi_head)
        self.vf_head = _layer(module.vf_head)
        self.log_std = None if module.log_std is None else module.log_std.detach().numpy()
        self.log_std_grad = None if module.log_std is None else module.log_std.grad.numpy()  # type: ignore[union-attr]
        self._signs = np.array([-1.0, 1.0, -1.0, 1.0, 1.0])  # -objective, vf, -(-entropy), kl, clip
        self._rows: dict[int, np.ndarray] = {}  # arange(M) per minibatch size (gathers)

    # --- forward and backward of the encoders ------------------------------------------------
    def _encode(self, layers: list[_Layer], x: np.ndarray) -> list[np.ndarray]:
        """[M, in] -> the input and every layer's activation (the last is the embedding)."""
        hs = [x]
        for w, b, _, _ in layers:
            h = _matmul(hs[-1], w.T)
            h += b
            if self.relu:
                np.maximum(h, 0.0, out=h)
            else:
                np.tanh(h, out=h)
            hs.append(h)
        return hs

    def _backward(self, layers: list[_Layer], hs: list[np.ndarray], dh: np.ndarray) -> None:
        """Gradients of every layer from dL/d(embedding) [M, H]; `hs` as _encode returned."""
        for i in range(len(layers) - 1, -1, -1):
            w, _, w_grad, b_grad = layers[i]
            h = hs[i + 1]
            if self.relu:
                dz = np.multiply(dh, h > 0.0, out=dh)
            else:  # tanh' = 1 - tanh^2
                slope = np.square(h)
                np.subtract(1.0, slope, out=slope)
                dz = np.multiply(dh, slope, out=slope)
            _matmul(dz.T, hs[i], out=w_grad)
            dz.sum(axis=0, out=b_grad)
            if i:
                dh = _matmul(dz, w)

    # --- the step ------------------------------------------------------------------------------
    def compute(self, mb: NumpyBatch) -> np.ndarray:
        cfg = self.config
        m = len(mb)
        inv_m = 1.0 / m
        obs = mb.obs if mb.obs.dtype == np.float32 else mb.obs.astype(np.float32)
        pi_hs = self._encode(self.pi_layers, obs)
        vf_hs = pi_hs if self.vf_layers is None else self._encode(self.vf_layers, obs)
        emb, vf_emb = pi_hs[-1], vf_hs[-1]  # [M, H]
        w_pi, b_pi, w_pi_grad, b_pi_grad = self.pi_head
        w_vf, b_vf, w_vf_grad, b_vf_grad = self.vf_head
        out = np.matmul(emb, w_pi.T)  # [M, n] logits or [M, K] means
        out += b_pi
        values = np.matmul(vf_emb, w_vf[0])  # [M]
        values += b_vf[0]

        # Policy: log-probs, then the clipped surrogate and its derivative per row.
        if self.categorical:
            logp_all = nd.log_softmax(out)  # [M, n]
            probs = np.exp(logp_all)
            rows = self._rows.get(m)
            if rows is None:
                rows = self._rows[m] = np.arange(m)
            actions = mb.actions.astype(np.int64, copy=False)
            logp = logp_all[rows, actions]  # [M]
        else:
            log_std, var = self._gaussian_log_std(emb)  # [K] or [M, K]; gSDE's variance
            inv_std = np.exp(-log_std)
            z = (mb.actions - out) * inv_std  # [M, K]
            logp = nd.gaussian_logp_terms(z, log_std) - nd.HALF_LOG_2PI * out.shape[-1]
        ratio = np.exp(logp - mb.logp)  # [M]
        adv = mb.advantages
        clip = cfg.clip_param
        ratio_clipped = np.maximum(ratio, 1.0 - clip)  # np.clip's wrapper costs more than both
        np.minimum(ratio_clipped, 1.0 + clip, out=ratio_clipped)
        surrogate = adv * ratio
        clipped = adv * ratio_clipped
        unclipped = surrogate <= clipped  # where min() takes (the gradient of) the surrogate
        objective_sum = float(np.where(unclipped, surrogate, clipped).sum())
        neg_g = surrogate * unclipped  # -dL/dlogp * M
        neg_g *= inv_m
        clipped_sum = float(np.count_nonzero(ratio_clipped != ratio))

        ent_coef = cfg.entropy_coeff
        if self.categorical:
            plogp = probs * logp_all  # [M, n]
            neg_entropy_sum = float(plogp.sum())
            dout = probs * neg_g[:, None]  # dL/dlogits = g (onehot - p)
            dout[rows, actions] -= neg_g
            if ent_coef > 0.0:  # -c dH/dlogits / M = c p (log p + H) / M
                plogp -= probs * plogp.sum(axis=-1, keepdims=True)
                plogp *= ent_coef * inv_m
                dout += plogp
            old_logp_all = nd.log_softmax(mb.dist_inputs)
            kl_sum = float((np.exp(old_logp_all) * (old_logp_all - logp_all)).sum())
        else:
            neg_gk = neg_g[:, None]
            dout = z * inv_std
            dout *= neg_gk
            np.negative(dout, out=dout)  # dL/dmean [M, K]
            dlog_std = 1.0 - np.square(z)
            dlog_std *= neg_gk  # dL/dlog_std per row [M, K]
            if ent_coef > 0.0:
                dlog_std -= ent_coef * inv_m
            self._log_std_grad(emb, dlog_std, var)
            log_std_rows = np.broadcast_to(log_std, out.shape)
            k = out.shape[-1]
            neg_entropy_sum = -(float(log_std_rows.sum()) + (nd.HALF_LOG_2PI + 0.5) * m * k)
            kl_sum = float(nd.gaussian_kl(mb.dist_inputs, out, log_std_rows).sum())

        # Value loss and its derivative per row.
        err = values - mb.value_targets
        scale = 2.0 * cfg.vf_loss_coeff * inv_m  # dL/dV = scale * (V - target)
        if cfg.vf_clip_param is None:
            vf_sum = float(np.dot(err, err))
            dv = err
        else:
            c = cfg.vf_clip_param
            delta = values - mb.values
            err_c = mb.values + np.clip(delta, -c, c) - mb.value_targets
            vf_err, vf_err_c = np.square(err), np.square(err_c)
            dv_c = err_c * (np.abs(delta) <= c)
            # torch.maximum: the larger side's gradient, half of each on a tie.
            dv = np.where(
                vf_err > vf_err_c, err, np.where(vf_err < vf_err_c, dv_c, 0.5 * (err + dv_c))
            )
            vf_sum = float(np.maximum(vf_err, vf_err_c).sum())
        dv *= scale

        # Heads, then the encoders (one pass through a shared encoder with both gradients).
        np.matmul(dout.T, emb, out=w_pi_grad)
        dout.sum(axis=0, out=b_pi_grad)
        d_emb = np.matmul(dout, w_pi)  # [M, H]
        np.matmul(dv, vf_emb, out=w_vf_grad[0])
        b_vf_grad[0] = dv.sum()
        d_vf_emb = np.multiply.outer(dv, w_vf[0])  # [M, H]
        if self.vf_layers is None:
            d_emb += d_vf_emb
            self._backward(self.pi_layers, pi_hs, d_emb)
        else:
            self._backward(self.pi_layers, pi_hs, d_emb)
            self._backward(self.vf_layers, vf_hs, d_vf_emb)
        sums = np.array([objective_sum, vf_sum, neg_entropy_sum, kl_sum, clipped_sum])
        return sums * self._signs * inv_m

    # --- the Gaussian's log-std ----------------------------------------------------------------
    def _gaussian_log_std(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The log-std the module's dist_inputs carry: the parameter itself [K], or with gSDE
        0.5 log(emb^2 @ std^2 + eps) per row [M, K] (and that variance, for the backward)."""
        assert self.log_std is not None
        if not self.use_sde:
            return self.log_std, None
        var = nd.gsde_variance(emb, np.exp(self.log_std * 2.0))
        return nd.gsde_log_std(var), var

    def _log_std_grad(self, emb: np.ndarray, dlog_std: np.ndarray, var: np.ndarray | None) -> None:
        grad = self.log_std_grad
        assert self.log_std is not None and grad is not None
        if var is None:
            dlog_std.sum(axis=0, out=grad)
            return
        dlog_std /= var
        np.matmul(np.square(emb).T, dlog_std, out=grad)  # [H, K]
        grad *= np.exp(self.log_std * 2.0)
