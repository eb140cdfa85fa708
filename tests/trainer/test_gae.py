"""GAE three ways: hand-computed targets, a plain reference loop, and Hypothesis properties.

Hand cases use gamma = 0.9 and the chunk layout of trainer/gae.py: values hold T+1 rows per chunk
(the last one is V(s_T)), rewards T rows.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.gae import chunk_rows, compute_gae, discounted_reverse_scan

GAMMA = 0.9

# Chunk A: T=3, rewards 1, V(s_0..s_3) = 1, 2, 3, 4.
A_REWARDS = [1.0, 1.0, 1.0]
A_VALUES = [1.0, 2.0, 3.0, 4.0]
# Targets by hand (see the arithmetic in each comment), per (ending, lambda).
A_TARGETS = {
    # terminated: V(s_3) is never used.
    ("terminated", 0.0): [1 + 0.9 * 2, 1 + 0.9 * 3, 1.0],  # [2.8, 3.7, 1.0]
    ("terminated", 1.0): [1 + 0.9 * 1.9, 1 + 0.9 * 1.0, 1.0],  # [2.71, 1.9, 1.0]
    # deltas [1.8, 1.7, -2.0]; A_2 = -2, A_1 = 1.7 - .45*2 = 0.8, A_0 = 1.8 + .45*.8 = 2.16
    ("terminated", 0.5): [1.0 + 2.16, 2.0 + 0.8, 3.0 - 2.0],  # [3.16, 2.8, 1.0]
    # truncated / cut: bootstrap V(s_3) = 4 (RLlib once gave 1.0 here instead of 4.6).
    ("bootstrap", 0.0): [2.8, 3.7, 1 + 0.9 * 4],  # [2.8, 3.7, 4.6]
    ("bootstrap", 1.0): [1 + 0.9 * 5.14, 1 + 0.9 * 4.6, 4.6],  # [5.626, 5.14, 4.6]
    # deltas [1.8, 1.7, 1.6]; A_2 = 1.6, A_1 = 1.7 + .45*1.6 = 2.42, A_0 = 1.8 + .45*2.42 = 2.889
    ("bootstrap", 0.5): [1.0 + 2.889, 2.0 + 2.42, 3.0 + 1.6],  # [3.889, 4.42, 4.6]
}
# Chunk B (cut, another env): T=2, rewards [0, 2], V = 5, 6, 10.
B_REWARDS = [0.0, 2.0]
B_VALUES = [5.0, 6.0, 10.0]
B_TARGETS = {
    0.0: [0.9 * 6, 2 + 0.9 * 10],  # [5.4, 11.0]
    1.0: [0.9 * 11.0, 11.0],  # [9.9, 11.0]
    # deltas [0.4, 5.0]; A_0 = 0.4 + .45*5 = 2.65
    0.5: [5.0 + 2.65, 11.0],  # [7.65, 11.0]
}
# Chunk C (truncated by the time limit): T=1, reward 0.5, V = 1, 2 -> 0.5 + 0.9*2 for every lambda.
C_REWARDS = [0.5]
C_VALUES = [1.0, 2.0]
C_TARGET = [2.3]


def _gae(values, rewards, lengths, terminated, lam, gamma=GAMMA):
    return compute_gae(
        np.asarray(values, np.float32),
        np.asarray(rewards, np.float32),
        np.asarray(lengths),
        np.asarray(terminated),
        gamma,
        lam,
    )


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("ending", ["terminated", "truncated", "cut"])
def test_single_chunk_by_hand(ending: str, lam: float) -> None:
    # truncated and cut differ only in what happens next (same id continues or not); GAE treats
    # both as "bootstrap with V(s_T)".
    key = ("terminated" if ending == "terminated" else "bootstrap", lam)
    adv, targets = _gae(A_VALUES, A_REWARDS, [3], [ending == "terminated"], lam)
    np.testing.assert_allclose(targets, A_TARGETS[key], rtol=1e-6)
    np.testing.assert_allclose(adv, np.asarray(A_TARGETS[key]) - A_VALUES[:3], rtol=1e-5)


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("a_terminated", [True, False])
def test_several_chunks_concatenated_by_hand(a_terminated: bool, lam: float) -> None:
    """Chunks of several envs side by side: nothing flows from one chunk into the next."""
    values = A_VALUES + B_VALUES + C_VALUES + A_VALUES
    rewards = A_REWARDS + B_REWARDS + C_REWARDS + A_REWARDS
    lengths = [3, 2, 1, 3]
    terminated = [a_terminated, False, False, True]
    adv, targets = _gae(values, rewards, lengths, terminated, lam)
    a_key = ("terminated" if a_terminated else "bootstrap", lam)
    expected = A_TARGETS[a_key] + B_TARGETS[lam] + C_TARGET + A_TARGETS[("terminated", lam)]
    np.testing.assert_allclose(targets, expected, rtol=1e-6)
    real, bootstrap = chunk_rows(np.asarray(lengths))
    np.testing.assert_allclose(adv, np.asarray(expected) - np.asarray(values)[real], atol=1e-5)
    np.testing.assert_array_equal(bootstrap, [3, 6, 8, 12])


def test_rllib_regression_truncated_and_cut_chunks_bootstrap() -> None:
    # gamma .9, lambda 0, last reward 1, V(s_L) = 4: 1 + 0.9 * 4 = 4.6, never 1.0.
    # (truncated and cut chunks both arrive with terminated=False.)
    _, targets = _gae([0.0, 0.0, 4.0], [0.0, 1.0], [2], [False], 0.0)
    assert targets[-1] == pytest.approx(4.6)


def test_rllib_regression_state_before_terminal_keeps_its_bootstrap() -> None:
    # Terminal at the last step; the step before it bootstraps from V(s_{L-1}) = 3: 0.9 * 3 = 2.7.
    _, targets = _gae([0.0, 3.0, 99.0], [0.0, 1.0], [2], [True], 0.0)
    np.testing.assert_allclose(targets, [2.7, 1.0], rtol=1e-6)


@pytest.mark.parametrize("lam", [0.3, 0.5, 0.95])
def test_rllib_regression_no_leak_into_next_episode(lam: float) -> None:
    """A terminated episode followed by the next episode of the same env (huge values and rewards
    there): the first episode's targets equal those computed for it alone."""
    alone, _ = _gae(A_VALUES, A_REWARDS, [3], [True], lam)
    next_values, next_rewards = [1e3, 2e3, 3e3], [1e3, 1e3]
    both, _ = _gae(
        [*A_VALUES, *next_values], [*A_REWARDS, *next_rewards], [3, 2], [True, False], lam
    )
    np.testing.assert_allclose(both[:3], alone, rtol=1e-6)


def reference_gae(values, rewards, lengths, terminated, gamma, lam):
    """The plain per-step loop, chunk by chunk."""
    adv_out, tgt_out = [], []
    v_off = r_off = 0
    for t_len, term in zip(lengths, terminated, strict=True):
        v = values[v_off : v_off + t_len + 1]
        r = rewards[r_off : r_off + t_len]
        adv = [0.0] * t_len
        carry = 0.0
        for t in reversed(range(t_len)):
            next_v = 0.0 if (term and t == t_len - 1) else float(v[t + 1])
            delta = float(r[t]) + gamma * next_v - float(v[t])
            carry = delta + gamma * lam * carry
            adv[t] = carry
        adv_out += adv
        tgt_out += [a + float(x) for a, x in zip(adv, v[:t_len], strict=True)]
        v_off += t_len + 1
        r_off += t_len
    return np.asarray(adv_out), np.asarray(tgt_out)


def _random_case(rng: np.random.Generator, k: int, max_len: int):
    lengths = rng.integers(1, max_len + 1, size=k)
    terminated = rng.random(k) < 0.5
    values = rng.normal(size=int(lengths.sum()) + k).astype(np.float32)
    rewards = rng.normal(size=int(lengths.sum())).astype(np.float32)
    return values, rewards, lengths, terminated


@pytest.mark.parametrize("seed", range(8))
def test_fast_code_matches_reference_loop(seed: int) -> None:
    rng = np.random.default_rng(seed)
    values, rewards, lengths, terminated = _random_case(rng, k=int(rng.integers(1, 40)), max_len=80)
    gamma, lam = float(rng.uniform(0.5, 1.0)), float(rng.uniform(0.0, 1.0))
    adv, targets = compute_gae(values, rewards, lengths, terminated, gamma, lam)
    ref_adv, ref_targets = reference_gae(values, rewards, lengths, terminated, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(targets, ref_targets, rtol=1e-4, atol=1e-4)


chunk_cases = st.integers(0, 2**32 - 1).map(
    lambda s: _random_case(np.random.default_rng(s), k=1 + s % 7, max_len=30)
)


@settings(max_examples=60, deadline=None)
@given(case=chunk_cases, gamma=st.floats(0.0, 1.0))
def test_lambda_zero_is_the_td_residual(case, gamma: float) -> None:
    values, rewards, lengths, terminated = case
    adv, _ = compute_gae(values, rewards, lengths, terminated, gamma, 0.0)
    real, _ = chunk_rows(lengths)
    next_v = values[real + 1].astype(np.float64)
    next_v[(np.cumsum(lengths) - 1)[terminated]] = 0.0
    np.testing.assert_allclose(adv, rewards + gamma * next_v - values[real], rtol=1e-5, atol=1e-5)


@settings(max_examples=60, deadline=None)
@given(case=chunk_cases, gamma=st.floats(0.0, 1.0))
def test_lambda_one_is_the_discounted_return_minus_v(case, gamma: float) -> None:
    values, rewards, lengths, terminated = case
    adv, targets = compute_gae(values, rewards, lengths, terminated, gamma, 1.0)
    real, bootstrap = chunk_rows(lengths)
    expected = []
    r_off = 0
    for k, t_len in enumerate(lengths):
        ret = 0.0 if terminated[k] else float(values[bootstrap[k]])
        rets = []
        for t in reversed(range(t_len)):
            ret = float(rewards[r_off + t]) + gamma * ret
            rets.append(ret)
        expected += rets[::-1]
        r_off += t_len
    np.testing.assert_allclose(targets, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adv, np.asarray(expected) - values[real], rtol=1e-4, atol=1e-4)


@settings(max_examples=20, deadline=None)
@given(gamma=st.floats(0.8, 0.99), lam=st.floats(0.0, 1.0))
def test_constant_reward_infinite_horizon(gamma: float, lam: float) -> None:
    """Reward 1 forever with V = 0: the lambda=1 return of a long chunk is ~1/(1-gamma); with the
    exact V = 1/(1-gamma) everywhere every advantage is 0 and the target is V, for any lambda."""
    t_len = 3000
    rewards = np.ones(t_len, np.float32)
    _, targets = compute_gae(np.zeros(t_len + 1), rewards, [t_len], [True], gamma, 1.0)
    assert targets[0] == pytest.approx(1.0 / (1.0 - gamma), rel=1e-3)
    v_star = np.full(t_len + 1, 1.0 / (1.0 - gamma))
    adv, targets = compute_gae(v_star, rewards, [t_len], [False], gamma, lam)
    np.testing.assert_allclose(adv, 0.0, atol=1e-3)
    np.testing.assert_allclose(targets, v_star[:-1], rtol=1e-5)


def test_reward_only_at_the_last_step() -> None:
    # SB3's hand case: V = 0, reward 1 at the end of a terminated chunk of 5 steps, lambda 1.
    _, targets = _gae(np.zeros(6), [0, 0, 0, 0, 1], [5], [True], 1.0)
    np.testing.assert_allclose(targets, GAMMA ** np.arange(4, -1, -1), rtol=1e-6)


def test_scan_is_segmented_by_zero_coefficients() -> None:
    out = discounted_reverse_scan(np.ones(5), np.array([0.5, 0.5, 0.0, 2.0, 0.0]))
    np.testing.assert_allclose(out, [1.75, 1.5, 1.0, 3.0, 1.0])


@pytest.mark.parametrize(
    ("values", "rewards", "lengths", "terminated", "message"),
    [
        (np.zeros(4), np.zeros(3), [3], [True, False], "terminated has 2 entries"),
        (np.zeros(3), np.zeros(3), [3], [True], "values must hold B\\+K=4 rows"),
        (np.zeros(4), np.zeros(2), [3], [True], "rewards has 2 rows"),
        (np.zeros(1), np.zeros(0), [0], [True], "lengths must be integers >= 1"),
        (np.zeros((4, 1)), np.zeros(3), [3], [True], "must be 1-D"),
    ],
)
def test_shape_contract_errors_are_clear(values, rewards, lengths, terminated, message) -> None:
    with pytest.raises(ValueError, match=message):
        compute_gae(values, rewards, np.asarray(lengths), np.asarray(terminated), 0.9, 0.5)


@pytest.mark.timing
def test_16k_steps_take_a_few_milliseconds() -> None:
    """Budget well under 5 ms on an idle core; the bound here is loose for a shared CI machine."""
    rng = np.random.default_rng(0)
    lengths = np.full(64, 256)
    terminated = rng.random(64) < 0.5
    values = rng.normal(size=16384 + 64).astype(np.float32)
    rewards = rng.normal(size=16384).astype(np.float32)
    timings = []
    for _ in range(7):
        t0 = time.perf_counter()
        compute_gae(values, rewards, lengths, terminated, 0.99, 0.95)
        timings.append(time.perf_counter() - t0)
    assert sorted(timings)[3] < 0.025
