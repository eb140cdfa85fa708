"""The action distributions' maths in numpy, shared by the numpy policy and the hand-written step.

The torch side of the same maths is trainer/distributions.py (and gSDE's variance in
`PPOModule._pi_from_embedding`); tests/trainer/test_numpy_policy.py and test_hand_grad.py hold
the two sides together. Here each formula is written once for both numpy users, so that the
log-probs a policy stores and the ones the hand-written step recomputes come from one place.
Axes: N rows, H hidden units, n logits, K action dims.
"""

from __future__ import annotations

import math

import numpy as np

from trainer.module import SDE_EPS

HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """[N, n] logits -> [N, n] log-probabilities (shifted by the row max for stability)."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def gsde_variance(emb: np.ndarray, std_sq: np.ndarray) -> np.ndarray:
    """gSDE's action variance per row: latent @ M with M's entries N(0, std^2) is, for one
    state, normal with variance emb^2 @ std^2 per action (SB3's
    StateDependentNoiseDistribution, epsilon 1e-6). emb [N, H], std_sq [H, K] -> [N, K]."""
    return np.matmul(np.square(emb), std_sq) + np.float32(SDE_EPS)


def gsde_log_std(variance: np.ndarray) -> np.ndarray:
    """[N, K] variance -> the log-std that gSDE's dist_inputs carry."""
    return 0.5 * np.log(variance)


def gaussian_logp_terms(z: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """sum_k (-z_k^2 / 2 - log_std_k) per row, z = (action - mean) / std: the diagonal
    Gaussian's log-density without its constant K log(2 pi) / 2. z [N, K] -> [N]."""
    return (np.square(z) * np.float32(-0.5) - log_std).sum(axis=-1)


def gaussian_kl(old_inputs: np.ndarray, mean: np.ndarray, log_std: np.ndarray) -> np.ndarray:
    """KL(old || new) per row (distributions.DiagGaussian.kl) with new = (mean, log_std) and
    old_inputs = concat(mean, log_std) of the old policy. [N, 2K], [N, K], [N, K] -> [N]."""
    k = mean.shape[-1]
    mu0, log_std0 = old_inputs[:, :k], old_inputs[:, k:]
    var_ratio = np.exp(2.0 * (log_std0 - log_std))
    mean_term = np.square(mu0 - mean) * np.exp(-2.0 * log_std)
    return (log_std - log_std0 + 0.5 * (var_ratio + mean_term - 1.0)).sum(axis=-1)
