"""A user-registered env that crashes mid-run: `tests.service.failing_env:FailingEnv-v0`.

Importing this module registers `FailingEnv-v0` (gymnasium's "module:EnvId" form imports it),
the way a user's package brings its own env. It is CartPole until its `crash_after_steps`-th
step, then raises, as a buggy simulator would.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ENV_ID = "FailingEnv-v0"
CRASH_MESSAGE = "simulated env crash"


class FailingEnv(CartPoleEnv):
    """CartPole whose `step` raises RuntimeError after `crash_after_steps` steps in total
    (counted across episodes, per env instance)."""

    def __init__(self, crash_after_steps: int = 300, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.crash_after_steps = crash_after_steps
        self.steps_taken = 0

    def step(self, action: Any) -> Any:
        self.steps_taken += 1
        if self.steps_taken > self.crash_after_steps:
            raise RuntimeError(CRASH_MESSAGE)
        return super().step(action)


gym.register(id=ENV_ID, entry_point=f"{__name__}:FailingEnv", max_episode_steps=500)
