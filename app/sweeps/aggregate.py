"""Seed-group statistics on a common env-steps grid (pure numpy, no database).

Shapes: a group of M members on a grid of G steps is a matrix `[M, G]` of floats, NaN where a
member has no value (it has not reached that step yet, or had not started logging). Each grid
step counts only the members with a value there (`n`).

The 95 % interval is a percentile bootstrap of the mean: B resamples with replacement of the
members that count at a step. Resampling n values with replacement is drawing multinomial counts
W `[B, n]`, so the B resampled means are one matrix product `W @ X / n` over every grid step
that has the same n (Efron & Tibshirani 1993, ch. 13). The generator is seeded from a fixed seed
and the group's index: the same data always gives the same interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95


@dataclass(frozen=True)
class GroupStats:
    """Per grid step ([G] each): members counted, mean, min, max and the interval (NaN: n=0)."""

    n: np.ndarray
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray


def common_grid(first: np.ndarray, last: np.ndarray, points: int) -> np.ndarray:
    """`points` evenly spaced integer env steps from the earliest first to the latest last step."""
    lo, hi = int(np.min(first)), int(np.max(last))
    if hi <= lo:
        return np.array([lo], dtype=np.int64)
    return np.unique(np.rint(np.linspace(lo, hi, points)).astype(np.int64))


def on_grid(steps: np.ndarray, values: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """One member's series [K] (steps ascending) linearly interpolated onto `grid` [G]; NaN
    outside its own step range (no extrapolation: a member counts only where it has been)."""
    out = np.interp(grid, steps, values)
    out[(grid < steps[0]) | (grid > steps[-1])] = np.nan
    return out


def group_stats(
    matrix: np.ndarray,
    group_index: int,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> GroupStats:
    """Statistics of one group's `[M, G]` matrix (NaN = no value)."""
    if matrix.ndim != 2:
        raise ValueError(f"expected a [members, steps] matrix, got shape {matrix.shape}")
    valid = ~np.isnan(matrix)
    n = valid.sum(axis=0)
    g = matrix.shape[1]
    mean = np.full(g, np.nan)
    low, high = np.full(g, np.nan), np.full(g, np.nan)
    lo_q, hi_q = (1 - confidence) / 2, 1 - (1 - confidence) / 2
    some = n > 0
    mean[some] = np.where(valid, matrix, 0.0)[:, some].sum(axis=0) / n[some]
    vmin = np.where(some, np.where(valid, matrix, np.inf).min(axis=0, initial=np.inf), np.nan)
    vmax = np.where(some, np.where(valid, matrix, -np.inf).max(axis=0, initial=-np.inf), np.nan)
    # Valid values first in every column (NaN sorts last), so X[:n] are the ones that count.
    packed = np.sort(matrix, axis=0)
    rng = np.random.default_rng([seed, group_index])
    for count in np.unique(n[some]):
        cols = np.flatnonzero(n == count)
        x = packed[:count, cols]  # [n, C]
        if count == 1:
            low[cols], high[cols] = x[0], x[0]
            continue
        weights = rng.multinomial(count, np.full(count, 1.0 / count), size=resamples)  # [B, n]
        boot = weights @ x / count  # [B, C]
        low[cols], high[cols] = np.quantile(boot, [lo_q, hi_q], axis=0)
    return GroupStats(n=n, mean=mean, min=vmin, max=vmax, ci_low=low, ci_high=high)
