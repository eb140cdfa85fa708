"""Generalized Advantage Estimation (Schulman et al. 2016) over concatenated episode chunks.

Pure numpy, no config objects, no modules: shapes in, arrays out, shape contract checked on entry.

Layout ("one artificial timestep" per chunk, as the Learner's single value pass produces it):
K chunks with lengths T_0..T_{K-1}, B = sum(T_k) real timesteps.
    values     [B + K]  V(s_0..s_T) of chunk 0, then of chunk 1, ...; the last row of each chunk
                        is its bootstrap state s_T
    rewards    [B]      real timesteps only, chunk after chunk
    lengths    [K]      T_k >= 1
    terminated [K]      True: the episode ended in an MDP terminal state (bootstrap 0);
                        False: truncated by a time limit or cut by the rollout (bootstrap V(s_T))

Recursion per chunk (never across a chunk boundary):
    delta_t = r_t + gamma * V(s_{t+1}) - V(s_t)      with V(s_T) := 0 when terminated
    A_t     = delta_t + gamma * lambda * A_{t+1}     with A_T := 0
    target_t = A_t + V(s_t)
Truncated and cut chunks keep their bootstrap (SB3 issue #633); every state before a terminal step
keeps its own bootstrap; nothing flows into the next episode for 0 < lambda < 1 (three bugs RLlib
has had; tests/trainer/test_gae.py checks each).
"""

from __future__ import annotations

import numpy as np


def chunk_rows(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices into the [B + K] value layout: (real rows [B], bootstrap rows [K])."""
    lengths = np.asarray(lengths, dtype=np.int64)
    chunk_of_step = np.repeat(np.arange(len(lengths)), lengths)  # [B]
    real = np.arange(int(lengths.sum())) + chunk_of_step  # step j of chunk k sits at j + k
    bootstrap = np.cumsum(lengths + 1) - 1  # [K]
    return real, bootstrap


def discounted_reverse_scan(deltas: np.ndarray, coeffs: np.ndarray) -> np.ndarray:
    """x_t = deltas_t + coeffs_t * x_{t+1} (x_B = 0) for flat [B] arrays, in O(log B) numpy ops.

    Hillis-Steele doubling over the affine maps x -> d + c*x: after step k, (c_t, d_t) compose the
    2^k maps starting at t. A zero coefficient is a segment boundary (it absorbs everything later),
    so one call scans all chunks at once without a Python loop over steps.
    """
    d = np.array(deltas, dtype=np.float64)
    c = np.array(coeffs, dtype=np.float64)
    n = len(d)
    shift = 1
    while shift < n and c[: n - shift].any():
        head = slice(0, n - shift)
        tail = slice(shift, n)
        d[head] = d[head] + c[head] * d[tail]
        c[head] = c[head] * c[tail]
        shift *= 2
    return d


def _check(values, rewards, lengths, terminated) -> tuple[np.ndarray, ...]:
    values = np.asarray(values)
    rewards = np.asarray(rewards)
    lengths = np.asarray(lengths)
    terminated = np.asarray(terminated)
    if values.ndim != 1 or rewards.ndim != 1 or lengths.ndim != 1 or terminated.ndim != 1:
        raise ValueError(
            "gae: values [B+K], rewards [B], lengths [K] and terminated [K] must be 1-D, got "
            f"{values.shape}, {rewards.shape}, {lengths.shape}, {terminated.shape}"
        )
    if not np.issubdtype(lengths.dtype, np.integer) or (lengths < 1).any():
        raise ValueError(f"gae: lengths must be integers >= 1, got {lengths}")
    k, b = len(lengths), int(lengths.sum()) if len(lengths) else 0
    if len(terminated) != k:
        raise ValueError(f"gae: terminated has {len(terminated)} entries for {k} chunks")
    if len(rewards) != b:
        raise ValueError(f"gae: rewards has {len(rewards)} rows, chunks hold B={b} steps")
    if len(values) != b + k:
        raise ValueError(
            f"gae: values must hold B+K={b + k} rows (T+1 per chunk), got {len(values)}"
        )
    return values, rewards, lengths.astype(np.int64), terminated.astype(bool)


def compute_gae(
    values: np.ndarray,
    rewards: np.ndarray,
    lengths: np.ndarray,
    terminated: np.ndarray,
    gamma: float,
    lam: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Advantages [B] and value targets [B] (float32) for the real timesteps of K chunks.

    values [B+K], rewards [B], lengths [K], terminated [K]: see the module docstring.
    """
    values, rewards, lengths, terminated = _check(values, rewards, lengths, terminated)
    real, _ = chunk_rows(lengths)
    v = values[real].astype(np.float64)  # V(s_t)      [B]
    next_v = values[real + 1].astype(np.float64)  # V(s_{t+1})  [B]; the bootstrap row at t=T-1
    last = np.cumsum(lengths) - 1  # [K] flat index of each chunk's last real step
    next_v[last[terminated]] = 0.0
    deltas = rewards.astype(np.float64) + gamma * next_v - v
    coeffs = np.full(len(deltas), gamma * lam)
    coeffs[last] = 0.0  # GAE never flows across a chunk boundary
    advantages = discounted_reverse_scan(deltas, coeffs)
    return advantages.astype(np.float32), (advantages + v).astype(np.float32)
