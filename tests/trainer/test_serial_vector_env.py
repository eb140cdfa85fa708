"""SerialVectorEnv steps as gymnasium's SyncVectorEnv does in NEXT_STEP mode, minus the infos."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from trainer.envs import make_vector_env
from trainer.serial_vector_env import SerialVectorEnv


def _pair(env_id: str, n: int, **kwargs: object) -> tuple[SerialVectorEnv, gym.vector.VectorEnv]:
    ours = SerialVectorEnv([functools.partial(gym.make, env_id, **kwargs)] * n)
    theirs = gym.make_vec(
        env_id,
        num_envs=n,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
        **kwargs,
    )
    return ours, theirs


@pytest.mark.parametrize(
    ("env_id", "kwargs"),
    [
        ("Pendulum-v1", {"max_episode_steps": 7}),  # Box actions, truncations
        ("MountainCar-v0", {"max_episode_steps": 5}),  # Discrete actions
        ("Acrobot-v1", {"max_episode_steps": 4}),  # gymnasium's own class, stepped in turn
    ],
)
def test_steps_and_autoresets_as_gymnasiums_sync_vector_env(env_id: str, kwargs: dict) -> None:
    ours, theirs = _pair(env_id, 3, **kwargs)
    try:
        assert ours.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        assert ours.single_observation_space == theirs.single_observation_space
        assert ours.single_action_space == theirs.single_action_space
        obs_a, _ = ours.reset(seed=4)
        obs_b, _ = theirs.reset(seed=4)
        np.testing.assert_array_equal(obs_a, obs_b)
        theirs.action_space.seed(0)
        ended = 0
        for _ in range(20):
            actions = theirs.action_space.sample()
            a, b = ours.step(actions), theirs.step(actions)
            for x, y in zip(a[:4], b[:4], strict=True):
                np.testing.assert_array_equal(x, y)
            assert a[4] == {}
            ended += int((a[2] | a[3]).sum())
        assert ended >= 3  # episodes ended and the next step autoreset them, as gymnasium's
    finally:
        ours.close()
        theirs.close()


def test_reset_seeds_each_sub_env_and_refuses_a_wrong_count() -> None:
    ours, theirs = _pair("Pendulum-v1", 2)
    try:
        np.testing.assert_array_equal(ours.reset(seed=[5, 9])[0], theirs.reset(seed=[5, 9])[0])
        with pytest.raises(ValueError, match="3 seeds for 2 sub-envs"):
            ours.reset(seed=[1, 2, 3])
    finally:
        ours.close()
        theirs.close()


def test_envs_without_a_native_vector_env_are_stepped_serially() -> None:
    env = make_vector_env("Pendulum-v1", 2, {})
    try:
        assert isinstance(env, SerialVectorEnv)
    finally:
        env.close()
    native = make_vector_env("CartPole-v1", 2, {})  # gymnasium's own vector_entry_point
    serial = make_vector_env("CartPole-v1", 2, {}, vector_env="serial")
    try:
        assert not isinstance(native, SerialVectorEnv) and isinstance(serial, SerialVectorEnv)
    finally:
        native.close()
        serial.close()
