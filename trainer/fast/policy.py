"""An MLP policy's forward pass and action sampling in numpy, for EnvRunners on a CPU.

Why: an EnvRunner runs the policy once per vector step on a handful of rows (one row for
rl-zoo's MuJoCo entries, four for Pendulum's, sixteen for CartPole's), where every torch
operation costs microseconds of dispatch for nanoseconds of arithmetic. The same forward pass
and the same draws in numpy took 22 us instead of 72 (HalfCheetah's 256x256 policy, one row),
19 instead of 100 (Pendulum's gSDE policy, four rows) and 22 instead of 54 (CartPole, sixteen
rows) on one thread.

It computes what `PPOModule.sample` computes (trainer/module.py, trainer/distributions.py): the
same dist_inputs, the same log-probs, actions drawn from the same distributions (Gumbel-max for
Categorical, mean + std * N(0, 1) for the Gaussian, latent @ noise matrix for gSDE), from the
runner's own numpy Generator instead of torch's RNG. tests/trainer/test_numpy_policy.py checks it
against the module. Images and GPUs keep the module's torch path (trainer/policy.py chooses).

The module stays the owner of the weights (checkpoints, state dicts, set_weights); `sync()`
copies them into the layout the forward pass wants ([in, out], contiguous) after each load.
Axes: N rows, H hidden units, A action dims, n logits.
"""

from __future__ import annotations

import numpy as np
import torch

from trainer import distributions
from trainer.fast import distributions as nd
from trainer.module import MLPEncoder, PPOModule

_HALF_LOG_2PI = np.float32(nd.HALF_LOG_2PI)


class NumpyPolicy:
    """`sample(obs, explore, sde_noise)` -> (actions, logp, dist_inputs), numpy in and out
    (trainer/policy.py `ActingPolicy`)."""

    @staticmethod
    def supports(module: PPOModule, device: torch.device) -> bool:
        return device.type == "cpu" and isinstance(module.pi_encoder, MLPEncoder)

    def __init__(self, module: PPOModule, rng: np.random.Generator) -> None:
        self.module = module
        self.rng = rng
        self.categorical = module.dist is distributions.Categorical
        self.use_sde = module.use_sde
        self.relu = module.pi_encoder.activation == "relu"
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self._head: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))
        self._log_std = np.empty(0, np.float32)  # [A], or [H, A] with gSDE
        self._std = np.empty(0, np.float32)
        self._sde_var = np.empty(0, np.float32)  # [H, A] std^2 of the gSDE matrices' entries
        self._rows: dict[int, np.ndarray] = {}  # arange(N) per row count (gathers)
        self.sync()

    def sync(self) -> None:
        """Take the module's current weights (call after every load)."""
        encoder: MLPEncoder = self.module.pi_encoder  # type: ignore[assignment]
        self._layers = [_transposed(m.weight, m.bias) for m in encoder.linears]
        self._head = _transposed(self.module.pi_head.weight, self.module.pi_head.bias)
        if self.module.log_std is not None:
            self._log_std = self.module.log_std.detach().numpy().copy()
            self._std = np.exp(self._log_std)
            self._sde_var = np.square(self._std)

    def seed(self, seed: int) -> None:
        """A fresh generator for the draws (an evaluation's seed)."""
        self.rng = np.random.default_rng(seed)

    # --- the forward pass ----------------------------------------------------------------------
    def _embed(self, obs: np.ndarray) -> np.ndarray:
        x = obs if obs.dtype == np.float32 else obs.astype(np.float32)
        for w, b in self._layers:
            x = np.matmul(x, w)
            x += b
            if self.relu:
                np.maximum(x, 0.0, out=x)
            else:
                np.tanh(x, out=x)
        return x

    def _out(self, emb: np.ndarray) -> np.ndarray:
        w, b = self._head
        out = np.matmul(emb, w)
        out += b
        return out  # [N, n] logits or [N, A] means

    # --- sampling ------------------------------------------------------------------------------
    def sde_noise(self, n: int) -> np.ndarray:
        """[n, H, A]: one gSDE exploration matrix per row, entries N(0, std^2)."""
        noise = self.rng.standard_normal((n, *self._std.shape), dtype=np.float32)
        noise *= self._std
        return noise

    def sample(
        self, obs: np.ndarray, explore: bool = True, sde_noise: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """[N, obs] -> (actions [N] int64 or [N, A] float32, logp [N], dist_inputs [N, D])."""
        emb = self._embed(obs)
        out = self._out(emb)
        if self.categorical:
            return self._categorical(out, explore)
        if self.use_sde:
            return self._gsde(emb, out, explore, sde_noise)
        return self._gaussian(out, explore)

    def _categorical(
        self, logits: np.ndarray, explore: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        logp_all = nd.log_softmax(logits)  # [N, n]
        if explore:  # Gumbel-max, exponential form: argmax p_i / E_i, E_i ~ Exp(1)
            noise = self.rng.standard_exponential(logits.shape, dtype=np.float32)
            actions = (np.exp(logp_all) / noise).argmax(axis=-1)
        else:
            actions = logits.argmax(axis=-1)
        rows = self._rows.get(len(actions))
        if rows is None:
            rows = self._rows[len(actions)] = np.arange(len(actions))
        return actions.astype(np.int64, copy=False), logp_all[rows, actions], logits

    def _gaussian(
        self, mean: np.ndarray, explore: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        log_std = self._log_std
        a = mean.shape[-1]
        dist_inputs = np.empty((len(mean), 2 * a), np.float32)  # [mean, log_std] per row
        dist_inputs[:, :a] = mean
        dist_inputs[:, a:] = log_std
        if not explore:
            logp = np.full(len(mean), -(log_std.sum() + _HALF_LOG_2PI * mean.shape[-1]))
            return mean, logp.astype(np.float32), dist_inputs
        noise = self.rng.standard_normal(mean.shape, dtype=np.float32)
        actions = noise * self._std
        actions += mean
        logp = (np.square(noise) * np.float32(-0.5)).sum(axis=-1)
        logp -= log_std.sum() + _HALF_LOG_2PI * mean.shape[-1]
        return actions, logp, dist_inputs

    def _gsde(
        self, emb: np.ndarray, mean: np.ndarray, explore: bool, sde_noise: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """gSDE (module._pi_from_embedding): per-row log-std 0.5 log(emb^2 @ std^2 + eps);
        exploring adds emb @ M for the row's noise matrix M."""
        log_std = nd.gsde_log_std(nd.gsde_variance(emb, self._sde_var))  # [N, A]
        dist_inputs = np.concatenate([mean, log_std], axis=-1)
        if explore:
            noise = self.sde_noise(len(emb)) if sde_noise is None else sde_noise
            actions = np.matmul(emb[:, None, :], noise)[:, 0] + mean  # [N, A]
            z = (actions - mean) * np.exp(-log_std)
            logp = nd.gaussian_logp_terms(z, log_std)
        else:
            actions = mean
            logp = -log_std.sum(axis=-1)
        logp -= _HALF_LOG_2PI * mean.shape[-1]
        return actions, logp, dist_inputs


def _transposed(weight: torch.Tensor, bias: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """A Linear layer as ([in, out] weight, [out] bias), contiguous float32 copies: x @ W is the
    fastest form of the product for OpenBLAS on these shapes."""
    w = np.ascontiguousarray(weight.detach().numpy().T, dtype=np.float32)
    return w, bias.detach().numpy().astype(np.float32, copy=True)
