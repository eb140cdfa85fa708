"""User envs whose rendering does not work, registered on import (gymnasium's "module:EnvId").

- `NoRender-v0`: CartPole whose constructor takes no `render_mode` (gym.make then raises);
- `BrokenRender-v0`: CartPole whose `render()` raises from its `fail_at`-th frame on.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

NO_RENDER = "NoRender-v0"
BROKEN_RENDER = "BrokenRender-v0"
RENDER_ERROR = "simulated renderer crash"


class NoRenderEnv(CartPoleEnv):
    metadata = {"render_modes": [], "render_fps": 50}

    def __init__(self) -> None:
        super().__init__()


class BrokenRenderEnv(CartPoleEnv):
    def __init__(self, fail_at: int = 5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fail_at = fail_at
        self.frames = 0

    def render(self) -> Any:
        self.frames += 1
        if self.frames > self.fail_at:
            raise RuntimeError(RENDER_ERROR)
        return super().render()


gym.register(id=NO_RENDER, entry_point=f"{__name__}:NoRenderEnv", max_episode_steps=500)
gym.register(id=BROKEN_RENDER, entry_point=f"{__name__}:BrokenRenderEnv", max_episode_steps=500)
