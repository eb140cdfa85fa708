"""Connectors: frame stacking, the observation filter and its cross-runner merge, actions."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from trainer.config import PPOConfig
from trainer.connectors import (
    ClipActions,
    DiscreteActions,
    FrameStack,
    MeanStdFilter,
    NormalizeRewards,
    build_env_to_learner,
    build_env_to_module,
    merge_filter_states,
)
from trainer.connectors.running_stats import RunningStats
from trainer.obs_layout import ImageBox, image_layout


def test_frame_stack_vectors_zero_fill_and_no_leak_across_episodes() -> None:
    stack = FrameStack(num_frames=3, num_envs=2, space=gym.spaces.Box(-1, 1, (2,)))
    reset = np.array([True, True])
    none = np.array([False, False])
    out = stack(np.array([[1, 1], [10, 10]], np.float32), reset)
    np.testing.assert_array_equal(out, [[0, 0, 0, 0, 1, 1], [0, 0, 0, 0, 10, 10]])
    out = stack(np.array([[2, 2], [20, 20]], np.float32), none)
    np.testing.assert_array_equal(out, [[0, 0, 1, 1, 2, 2], [0, 0, 10, 10, 20, 20]])
    out = stack(np.array([[3, 3], [30, 30]], np.float32), none)
    np.testing.assert_array_equal(out, [[1, 1, 2, 2, 3, 3], [10, 10, 20, 20, 30, 30]])
    # Slot 1 starts a new episode: its old frames must not show up.
    out = stack(np.array([[4, 4], [99, 99]], np.float32), np.array([False, True]))
    np.testing.assert_array_equal(out, [[2, 2, 3, 3, 4, 4], [0, 0, 0, 0, 99, 99]])


def test_frame_stack_images_stack_channels_last() -> None:
    space = gym.spaces.Box(0, 255, (5, 6, 1), np.uint8)  # undeclared: gymnasium's [H, W, C]
    stack = FrameStack(num_frames=4, num_envs=1, space=space)
    assert stack.output_space(space).shape == (5, 6, 4)
    assert image_layout(stack.output_space(space)) == "channels_last"
    frames = [np.full((1, 5, 6, 1), i, np.uint8) for i in range(1, 6)]
    out = None
    for i, frame in enumerate(frames):
        out = stack(frame, np.array([i == 0]))
    assert out is not None and out.shape == (1, 5, 6, 4) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, 0, 0], [2, 3, 4, 5])


def test_frame_stack_channels_first_stacks_on_axis_0_and_keeps_the_layout() -> None:
    space = ImageBox(0, 255, (2, 5, 6), np.uint8, layout="channels_first")
    stack = FrameStack(num_frames=3, num_envs=1, space=space)
    out_space = stack.output_space(space)
    assert out_space.shape == (6, 5, 6) and image_layout(out_space) == "channels_first"
    out = None
    for i in range(1, 5):  # frame i has channel c filled with 10 * i + c
        frame = np.stack([np.full((5, 6), 10 * i + c, np.uint8) for c in range(2)])[None]
        out = stack(frame, np.array([i == 1]))
    assert out is not None and out.shape == (1, 6, 5, 6)
    np.testing.assert_array_equal(out[0, :, 0, 0], [20, 21, 30, 31, 40, 41])  # oldest first
    pipeline = build_env_to_module(PPOConfig(frame_stack=3), space, num_envs=1)
    assert image_layout(pipeline.output_space) == "channels_first"


def test_clip_rewards_then_normalise_is_the_pipeline_order() -> None:
    config = PPOConfig(clip_rewards=1.0, normalize_rewards=True, gamma=0.5)
    pipeline = build_env_to_learner(config, num_envs=2)
    assert [p.name for p in pipeline.pieces] == ["clip_rewards", "reward_filter"]
    assert set(pipeline.get_state()) == {"reward_filter"}
    out = pipeline(np.array([5.0, -3.0]), np.zeros(2, bool), np.ones(2, bool))
    assert out.dtype == np.float32
    # Clipped to +-1 first: the returns seen are [1, -1] (std 1), so the rewards stay +-1.
    np.testing.assert_allclose(out, [1.0, -1.0], rtol=1e-6)
    plain = build_env_to_learner(PPOConfig(), num_envs=2)
    assert plain.pieces == [] and plain(np.array([7, -2]), *[np.ones(2, bool)] * 2).dtype == (
        np.float32
    )


def test_reward_normaliser_matches_a_plain_loop() -> None:
    """SB3 VecNormalize's reward path written as a loop over steps, slot by slot."""
    rng = np.random.default_rng(0)
    n, steps, gamma = 3, 40, 0.9
    rewards = rng.normal(2.0, 3.0, (steps, n))
    done = rng.random((steps, n)) < 0.1
    valid = rng.random((steps, n)) > 0.05  # some autoreset rows
    norm = NormalizeRewards(n, gamma)
    returns, seen, expected = np.zeros(n), [], []
    for t in range(steps):
        for i in range(n):
            if valid[t, i]:
                returns[i] = returns[i] * gamma + rewards[t, i]
                seen.append(returns[i])
        std = np.sqrt(np.var(seen) + 1e-8) if seen else np.sqrt(1e-8)
        expected.append(np.clip(rewards[t] / std, -10, 10))
        returns[done[t] & valid[t]] = 0.0
        got = norm(rewards[t], done[t], valid[t])
        np.testing.assert_allclose(got, expected[-1], rtol=1e-5)
    delta = RunningStats.from_dict(norm.pop_delta())
    assert delta.count == len(seen)
    np.testing.assert_allclose(delta.var, np.var(seen), rtol=1e-9)


def test_reward_filter_merge_across_runners_and_set_state() -> None:
    a, b = NormalizeRewards(2, 0.99), NormalizeRewards(2, 0.99)
    rng = np.random.default_rng(1)
    for _ in range(5):
        a(rng.normal(size=2), np.zeros(2, bool), np.ones(2, bool))
        b(rng.normal(size=2) * 5, np.zeros(2, bool), np.ones(2, bool))
    merged = merge_filter_states(
        {}, [{"reward_filter": a.pop_delta()}, {"reward_filter": b.pop_delta()}]
    )
    stats = RunningStats.from_dict(merged["reward_filter"])
    assert stats.count == 20
    c = NormalizeRewards(2, 0.99)
    c.set_state(merged["reward_filter"])
    assert c.get_state() == merged["reward_filter"]
    np.testing.assert_allclose(
        c(np.array([1.0, 1.0]), np.zeros(2, bool), np.zeros(2, bool)),  # autoreset rows: no update
        1.0 / np.sqrt(stats.var + 1e-8),
        rtol=1e-5,
    )
    assert RunningStats.from_dict(c.pop_delta()).count == 0


def test_running_stats_merge_is_exact() -> None:
    rng = np.random.default_rng(0)
    parts = [rng.normal(3.0, 2.0, size=(n, 3)) for n in (5, 17, 1, 40)]
    merged = RunningStats.empty((3,))
    for p in parts:
        merged = merged.merge(RunningStats.of(p))
    everything = np.concatenate(parts)
    assert merged.count == len(everything)
    np.testing.assert_allclose(merged.mean, everything.mean(0))
    np.testing.assert_allclose(merged.var, everything.var(0))


def test_mean_std_filter_normalises_and_clips() -> None:
    f = MeanStdFilter((2,), clip=5.0)
    rng = np.random.default_rng(1)
    data = rng.normal([10.0, -4.0], [3.0, 0.5], size=(2000, 2)).astype(np.float32)
    for batch in np.split(data, 100):
        f(batch, np.zeros(len(batch), bool))
    out = f(data, np.zeros(len(data), bool))
    np.testing.assert_allclose(out.mean(0), 0.0, atol=0.05)
    np.testing.assert_allclose(out.std(0), 1.0, atol=0.05)
    assert f(np.array([[1e6, 0.0]], np.float32), np.zeros(1, bool))[0, 0] == 5.0


def test_filter_merge_across_runners_equals_stats_of_all_data() -> None:
    """Two runners see different data; after the driver merges their deltas and broadcasts,
    both normalise with the stats of everything either has seen (RLlib MeanStdFilter sync)."""
    rng = np.random.default_rng(2)
    a, b = MeanStdFilter((3,)), MeanStdFilter((3,))
    seen = []
    global_state: dict = {}
    for _ in range(3):  # three iterations
        for f, loc in ((a, 1.0), (b, 5.0)):
            batch = rng.normal(loc, 1.0, size=(64, 3))
            f(batch, np.zeros(64, bool))
            seen.append(batch)
        deltas = [{"obs_filter": a.pop_delta()}, {"obs_filter": b.pop_delta()}]
        global_state = merge_filter_states(global_state, deltas)
        a.set_state(global_state["obs_filter"])
        b.set_state(global_state["obs_filter"])
    everything = np.concatenate(seen)
    for f in (a, b):
        state = RunningStats.from_dict(f.get_state())
        assert state.count == len(everything)
        np.testing.assert_allclose(state.mean, everything.mean(0))
        np.testing.assert_allclose(state.var, everything.var(0))


def test_filter_frozen_when_not_updating() -> None:
    f = MeanStdFilter((1,))
    f(np.array([[1.0], [3.0]]), np.zeros(2, bool))
    f.update_stats = False
    before = f.get_state()
    f(np.array([[100.0]]), np.zeros(1, bool))
    assert f.get_state() == before


def test_clip_actions_and_discrete_offset() -> None:
    clip = ClipActions(gym.spaces.Box(-2.0, np.array([2.0, 0.5], np.float32), (2,), np.float32))
    np.testing.assert_allclose(
        clip(np.array([[-3.0, 0.2], [1.0, 9.0]], np.float32)), [[-2.0, 0.2], [1.0, 0.5]]
    )
    shifted = DiscreteActions(gym.spaces.Discrete(3, start=-1))
    np.testing.assert_array_equal(shifted(np.array([0, 1, 2])), [-1, 0, 1])


@pytest.mark.parametrize(
    ("normalize", "stack", "expected"),
    [(False, 1, (4,)), (True, 1, (4,)), (True, 4, (16,)), (False, 2, (8,))],
)
def test_pipeline_output_space(normalize: bool, stack: int, expected: tuple[int, ...]) -> None:
    config = PPOConfig(normalize_observations=normalize, frame_stack=stack)
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    pipeline = build_env_to_module(config, space, num_envs=2)
    assert pipeline.output_space.shape == expected
    out = pipeline(np.ones((2, 4), np.float64), np.array([True, True]))
    assert out.shape == (2, *expected) and out.dtype == np.float32
    assert set(pipeline.get_state()) == ({"obs_filter"} if normalize else set())
