"""AcrobotVectorEnv: gymnasium's Acrobot-v1, all sub-envs stepped at once in numpy.

Why: Acrobot's rk4 integrator is plain Python over numpy scalars, ~35 us per env step, which
made it half of a run on rl-zoo's entry (16 envs). gymnasium vectorises CartPole natively
(`vector_entry_point`) but not Acrobot; this is the same dynamics written over arrays of all
sub-envs, ~3 us per env step at 16 envs.

The same MDP, operation for operation: `_derivatives` and `_rk4` are gymnasium's `_dsdt` and
`rk4` (book dynamics, dt 0.2, no torque noise) with arrays in place of scalars, evaluated in
the same order, so every state is gymnasium's to the last bit except where numpy's vectorised
sin / cos round differently from its scalar ones (within an ulp). Resets draw from one
generator per sub-env, seeded as gymnasium seeds a SyncVectorEnv's (sub-env k: `seed + k`), so
the same seed gives the same initial states; reward -1 per step until the tip swings above the
bar (terminated, reward 0), truncation at the spec's 500 steps. NEXT_STEP autoreset, as the
EnvRunner's other vector envs. tests/trainer/test_acrobot.py checks it against gymnasium's env.
Axes: N sub-envs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from numpy import pi

ENV_ID = "Acrobot-v1"
# AcrobotEnv's constants (book dynamics), as _dsdt reads them.
_M1 = _M2 = 1.0
_L1 = 1.0
_LC1 = _LC2 = 0.5
_I1 = _I2 = 1.0
_G = 9.8
_DT = AcrobotEnv.dt
_TORQUES = np.array(AcrobotEnv.AVAIL_TORQUE, np.float64)
_MAX_VEL_1, _MAX_VEL_2 = AcrobotEnv.MAX_VEL_1, AcrobotEnv.MAX_VEL_2
_RESET_LOW, _RESET_HIGH = -0.1, 0.1


def _derivatives(
    theta1: np.ndarray, theta2: np.ndarray, dtheta1: np.ndarray, dtheta2: np.ndarray, a: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """AcrobotEnv._dsdt ("book") over arrays: the expressions as gymnasium writes them."""
    m1, m2, l1, lc1, lc2, I1, I2, g = _M1, _M2, _L1, _LC1, _LC2, _I1, _I2, _G
    cos_theta2, sin_theta2 = np.cos(theta2), np.sin(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos_theta2) + I1 + I2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos_theta2) + I2
    phi2 = m2 * lc2 * g * np.cos(theta1 + theta2 - pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin_theta2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_theta2
        + (m1 * lc1 + m2 * l1) * g * np.cos(theta1 - pi / 2)
        + phi2
    )
    ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin_theta2 - phi2) / (
        m2 * lc2**2 + I2 - d2**2 / d1
    )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def _rk4(state: np.ndarray, a: np.ndarray) -> np.ndarray:
    """acrobot.rk4 over [0, dt] for state [4, N] and torques [N]: the next state [4, N]."""
    dt = _DT - 0
    dt2 = dt / 2.0
    k1 = np.array(_derivatives(*state, a))
    k2 = np.array(_derivatives(*(state + dt2 * k1), a))
    k3 = np.array(_derivatives(*(state + dt2 * k2), a))
    k4 = np.array(_derivatives(*(state + dt * k3), a))
    return state + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def _wrap(x: np.ndarray, m: float, big_m: float) -> None:
    """acrobot.wrap in place: whole turns added or taken away one at a time, as gymnasium does."""
    diff = big_m - m
    while (over := x > big_m).any():
        x[over] -= diff
    while (under := x < m).any():
        x[under] += diff


def _observation(s: np.ndarray) -> np.ndarray:
    """[4, N] states -> [N, 6] observations, in the states' precision."""
    return np.stack([np.cos(s[0]), np.sin(s[0]), np.cos(s[1]), np.sin(s[1]), s[2], s[3]], 1)


class AcrobotVectorEnv(gym.vector.VectorEnv):
    """`num_envs` Acrobot-v1 envs as one vector env (NEXT_STEP autoreset)."""

    def __init__(self, num_envs: int, max_episode_steps: int | None = None) -> None:
        spec = gym.spec(ENV_ID)
        template = AcrobotEnv()
        self.num_envs = num_envs
        self.metadata = {**template.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = None
        self.single_observation_space = template.observation_space
        self.single_action_space = template.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        template.close()
        self.max_episode_steps = max_episode_steps or spec.max_episode_steps
        self._state = np.zeros((4, num_envs), np.float64)  # theta1, theta2, dtheta1, dtheta2
        self._steps = np.zeros(num_envs, np.int64)
        self._autoreset = np.zeros(num_envs, np.bool_)
        self._rngs: list[np.random.Generator] = [
            seeding.np_random(None)[0] for _ in range(num_envs)
        ]

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env: sub-env k seeded with `seed + k` (an int) or its own seed."""
        if options:
            raise ValueError(f"{ENV_ID} (vectorised): reset options are not supported")
        if seed is not None:
            seeds = (
                [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            )
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} sub-envs")
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        obs = self._observations(self._reset_slots(np.ones(self.num_envs, np.bool_)))
        self._autoreset[:] = False
        return obs, {}

    def _reset_slots(self, mask: np.ndarray) -> np.ndarray:
        """Fresh states for the masked slots; their float32 draws (AcrobotEnv.reset keeps the
        state in float32 until the first step) as [4, N], NaN elsewhere."""
        drawn = np.full((4, self.num_envs), np.nan, np.float32)
        for i in np.flatnonzero(mask):
            drawn[:, i] = self._rngs[i].uniform(_RESET_LOW, _RESET_HIGH, size=(4,))
        self._state[:, mask] = drawn[:, mask]
        self._steps[mask] = 0
        return drawn

    def _observations(self, reset_draws: np.ndarray | None = None) -> np.ndarray:
        """[N, 6] float32: cos, sin of both angles, both velocities (AcrobotEnv._get_ob); a
        slot just reset takes them from its float32 state, as gymnasium does."""
        obs = _observation(self._state).astype(np.float32)
        if reset_draws is not None:
            fresh = ~np.isnan(reset_draws[0])
            if fresh.any():
                obs[fresh] = _observation(reset_draws[:, fresh])
        return obs

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        resetting = self._autoreset.copy()
        state = _rk4(self._state, _TORQUES[np.asarray(actions, np.int64)])
        _wrap(state[0], -pi, pi)
        _wrap(state[1], -pi, pi)
        np.clip(state[2], -_MAX_VEL_1, _MAX_VEL_1, out=state[2])
        np.clip(state[3], -_MAX_VEL_2, _MAX_VEL_2, out=state[3])
        self._state = state
        self._steps += 1
        terminated = -np.cos(state[0]) - np.cos(state[1] + state[0]) > 1.0
        truncated = self._steps >= self.max_episode_steps
        rewards = np.where(terminated, 0.0, -1.0)
        draws = None
        if resetting.any():  # NEXT_STEP: these slots reset now and ignore their action
            draws = self._reset_slots(resetting)
            rewards[resetting] = 0.0
            terminated[resetting] = False
            truncated[resetting] = False
        np.logical_or(terminated, truncated, out=self._autoreset)
        return self._observations(draws), rewards, terminated, truncated, {}
