"""AcrobotVectorEnv against gymnasium's Acrobot-v1, sub-env by sub-env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from trainer.acrobot import AcrobotVectorEnv
from trainer.envs import make_vector_env


def _gymnasium(n: int, **kwargs: object) -> gym.vector.VectorEnv:
    return gym.make_vec(
        "Acrobot-v1",
        num_envs=n,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
        **kwargs,
    )


def test_one_step_from_any_state_is_gymnasiums() -> None:
    """From the same states and torques, rk4 + wrap + bound give gymnasium's next states (to
    the ulps numpy's vectorised sin / cos may differ by) and the same terminations."""
    rng = np.random.default_rng(0)
    n = 64
    env = AcrobotVectorEnv(n)
    env.reset(seed=0)
    states = rng.uniform([-np.pi, -np.pi, -12.0, -28.0], [np.pi, np.pi, 12.0, 28.0], (n, 4))
    actions = rng.integers(0, 3, n)
    env._state[:] = states.T
    obs, rewards, terminated, truncated, _ = env.step(actions)
    reference = gym.make("Acrobot-v1").unwrapped
    reference.reset(seed=0)
    for i in range(n):
        reference.state = states[i].copy()
        ref_obs, ref_reward, ref_terminated, _, _ = reference.step(int(actions[i]))
        np.testing.assert_allclose(env._state[:, i], reference.state, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(obs[i], ref_obs, rtol=1e-6, atol=1e-7)
        assert rewards[i] == ref_reward and terminated[i] == ref_terminated
    assert not truncated.any()


def test_seeded_rollouts_follow_gymnasiums_sync_vector_env() -> None:
    """The same seed gives the same initial states (one generator per sub-env, seed + k), and
    the same actions the same observations while the chaos of the swing has not amplified an
    ulp of sin / cos."""
    n = 4
    ours, theirs = AcrobotVectorEnv(n), _gymnasium(n)
    obs_a, _ = ours.reset(seed=11)
    obs_b, _ = theirs.reset(seed=11)
    np.testing.assert_array_equal(obs_a, obs_b)
    assert obs_a.dtype == np.float32 and obs_a.shape == (n, 6)
    rng = np.random.default_rng(1)
    for _ in range(40):
        actions = rng.integers(0, 3, n)
        a, b = ours.step(actions), theirs.step(actions)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-5, atol=1e-5)
        for x, y in zip(a[1:4], b[1:4], strict=True):
            np.testing.assert_array_equal(x, y)


def test_episodes_end_truncate_and_autoreset_as_gymnasiums() -> None:
    """A short time limit: truncation at the limit, then one NEXT_STEP autoreset step (reward
    0, neither flag, the action ignored) whose observation is the next seeded reset's."""
    ours, theirs = AcrobotVectorEnv(2, max_episode_steps=3), _gymnasium(2, max_episode_steps=3)
    ours.reset(seed=5)
    theirs.reset(seed=5)
    for t in range(8):
        actions = np.array([t % 3, 2])
        a, b = ours.step(actions), theirs.step(actions)
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6, atol=1e-6)
        for x, y in zip(a[1:4], b[1:4], strict=True):
            np.testing.assert_array_equal(x, y)
        if t in (2, 6):
            assert a[3].all() and not a[2].any()  # truncated at the limit
        if t in (3, 7):
            assert (a[1] == 0.0).all() and not (a[2] | a[3]).any()  # the autoreset step


def test_swinging_up_terminates_with_reward_zero() -> None:
    env = AcrobotVectorEnv(1)
    env.reset(seed=0)
    env._state[:, 0] = [np.pi, 0.0, 0.0, 0.0]  # both links straight up: the tip above the bar
    _, reward, terminated, _, _ = env.step(np.array([1]))
    assert terminated[0] and reward[0] == 0.0


@pytest.mark.parametrize(
    ("vector_env", "env_config", "native"),
    [
        ("native", {}, True),
        ("native", {"max_episode_steps": 100}, True),
        ("serial", {}, False),
        ("native", {"render_mode": "rgb_array"}, False),  # what only gymnasium's env takes
    ],
)
def test_the_native_env_is_chosen_unless_asked_otherwise(
    vector_env: str, env_config: dict, native: bool
) -> None:
    env = make_vector_env("Acrobot-v1", 3, env_config, vector_env=vector_env)
    try:
        assert isinstance(env, AcrobotVectorEnv) == native
        obs, _ = env.reset(seed=0)
        assert obs.shape == (3, 6)
        if native and env_config:
            assert env.max_episode_steps == 100
    finally:
        env.close()
