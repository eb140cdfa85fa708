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
    build_env_to_module,
    merge_filter_states,
)
from trainer.connectors.running_stats import RunningStats


def test_frame_stack_vectors_zero_fill_and_no_leak_across_episodes() -> None:
    stack = FrameStack(num_frames=3, num_envs=2, shape=(2,))
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
    stack = FrameStack(num_frames=4, num_envs=1, shape=(5, 6, 1))
    space = gym.spaces.Box(0, 255, (5, 6, 1), np.uint8)
    assert stack.output_space(space).shape == (5, 6, 4)
    frames = [np.full((1, 5, 6, 1), i, np.uint8) for i in range(1, 6)]
    out = None
    for i, frame in enumerate(frames):
        out = stack(frame, np.array([i == 0]))
    assert out is not None and out.shape == (1, 5, 6, 4) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, 0, 0], [2, 3, 4, 5])


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
