"""SerialVectorEnv: gymnasium envs stepped one after the other in the EnvRunner's process.

What gymnasium's SyncVectorEnv does for an EnvRunner (NEXT_STEP autoreset, sub-env k reset with
`seed + k`), without what it does for nobody here: it merges every step's info dicts (the
EnvRunner reads none), deep-copies the observations and batches through generic space
functions. On HalfCheetah's one sub-env that was ~50 us of a ~120 us vector step.

Returned arrays are this env's own buffers, overwritten by the next step or reset: the caller
copies what it keeps (the EnvRunner writes them into its sample buffers at once).
Axes: N sub-envs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space


class SerialVectorEnv(gym.vector.VectorEnv):
    """N sub-envs of one Box observation space, NEXT_STEP autoreset: the step after a sub-env's
    episode ended resets it (its action is ignored, reward 0, not terminated or truncated)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs = [fn() for fn in env_fns]
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.metadata = {**first.metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = first.render_mode
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        for env in self.envs[1:]:
            if env.observation_space != first.observation_space:
                raise ValueError("sub-envs have different observation spaces")
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        space = self.single_observation_space
        if not isinstance(space, gym.spaces.Box):
            raise ValueError(f"observation space {space} is not supported (Box only)")
        n = self.num_envs
        self._obs = np.zeros((n, *space.shape), space.dtype)
        self._rewards = np.zeros(n, np.float64)
        self._terminated = np.zeros(n, np.bool_)
        self._truncated = np.zeros(n, np.bool_)
        self._autoreset = np.zeros(n, np.bool_)

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-env: sub-env k with `seed + k` (an int), or its own seed (a list)."""
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} sub-envs")
        for i, env in enumerate(self.envs):
            self._obs[i], _ = env.reset(seed=seeds[i], options=options)
        self._autoreset[:] = False
        self._terminated[:] = False
        self._truncated[:] = False
        return self._obs, {}

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, rewards = self._obs, self._rewards
        terminated, truncated, autoreset = self._terminated, self._truncated, self._autoreset
        for i, env in enumerate(self.envs):
            if autoreset[i]:
                obs[i], _ = env.reset()
                rewards[i] = 0.0
                terminated[i] = truncated[i] = False
            else:
                obs[i], rewards[i], terminated[i], truncated[i], _ = env.step(actions[i])
        np.logical_or(terminated, truncated, out=autoreset)
        return obs, rewards, terminated, truncated, {}

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
