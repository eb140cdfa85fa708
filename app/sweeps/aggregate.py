"""Seed-group statistics on a common env-steps grid (pure numpy, no database).

Shapes: K groups of at most M members on a grid of G steps are one array `[K, M, G]` of floats,
NaN where a member has no value (it has not reached that step, had not started logging, or the
group has fewer than M members). Each grid step counts only the members with a value there
(`n`, `[K, G]`).

The 95 % interval is a percentile bootstrap of the mean (Efron & Tibshirani 1993, ch. 13):
B resamples with replacement of the n members that count at a step. Resampling n values with
replacement is drawing multinomial counts W `[B, n]`, so the B resampled means of every
(group, step) with the same n are ONE matrix product `W @ X / n`, and the two percentiles one
`np.partition` over it. W comes from a generator seeded with (BOOTSTRAP_SEED, n): the same
data always gives the same interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
CONFIDENCE = 0.95
CHUNK_ROWS = 256


@dataclass(frozen=True)
class GroupStats:
    """Per group and grid step (`[K, G]` each): members counted, mean, min, max and the
    interval of the mean (NaN where n = 0)."""

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
    """One member's series [S] (steps ascending) linearly interpolated onto `grid` [G]; NaN
    outside its own step range (no extrapolation: a member counts only where it has been)."""
    out = np.interp(grid, steps, values)
    out[(grid < steps[0]) | (grid > steps[-1])] = np.nan
    return out


def resample_weights(n: int, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """[B, n] multinomial counts (each row sums to n): B resamples of n members."""
    rng = np.random.default_rng([BOOTSTRAP_SEED, n])
    return rng.multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)


def _percentiles(boot: np.ndarray, qs: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """np.quantile(boot, qs, axis=-1) with its default (linear) method, for `boot` [C, B].

    Sorted in place a few hundred rows at a time (the rows stay in cache; for B ~ 1000 this is
    faster than np.partition with the four order statistics the two quantiles need)."""
    b = boot.shape[-1]
    positions = [q * (b - 1) for q in qs]
    for start in range(0, len(boot), CHUNK_ROWS):
        boot[start : start + CHUNK_ROWS].sort(axis=-1)
    out = []
    for p in positions:
        lo, hi = int(np.floor(p)), int(np.ceil(p))
        out.append(boot[:, lo] + (p - lo) * (boot[:, hi] - boot[:, lo]))
    return out[0], out[1]


def group_stats(
    values: np.ndarray, *, resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE
) -> GroupStats:
    """Statistics of K groups' `[K, M, G]` values (NaN = no value)."""
    if values.ndim != 3:
        raise ValueError(f"expected [groups, members, steps] values, got shape {values.shape}")
    valid = ~np.isnan(values)
    n = valid.sum(axis=1)  # [K, G]
    some = n > 0
    total = np.where(valid, values, 0.0).sum(axis=1)
    mean = np.divide(total, n, out=np.full(n.shape, np.nan), where=some)
    vmin = np.where(some, np.where(valid, values, np.inf).min(axis=1, initial=np.inf), np.nan)
    vmax = np.where(some, np.where(valid, values, -np.inf).max(axis=1, initial=-np.inf), np.nan)
    low, high = np.full(n.shape, np.nan), np.full(n.shape, np.nan)
    # Valid values first along the member axis (NaN sorts last): X[:n] are the ones that count.
    packed = np.sort(values, axis=1)
    qs = ((1 - confidence) / 2, 1 - (1 - confidence) / 2)
    for count in np.unique(n[some]).tolist():
        ks, gs = np.nonzero(n == count)
        x = packed[ks, :count, gs]  # [C, n]
        if count == 1:
            low[ks, gs] = high[ks, gs] = x[:, 0]
            continue
        weights = resample_weights(count, resamples).T.astype(np.float32)  # [n, B]
        boot = x.astype(np.float32) @ weights  # [C, B] resampled sums (float32: half the bytes)
        lo, hi = _percentiles(boot, qs)
        low[ks, gs], high[ks, gs] = lo / count, hi / count
    return GroupStats(n=n, mean=mean, min=vmin, max=vmax, ci_low=low, ci_high=high)
