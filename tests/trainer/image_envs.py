"""A tiny image-observation task for the CNN path, registered on import ("module:EnvId").

`PatchSide-v0`: each observation is a black 1x12x12 uint8 image (declared channels first) with
one bright 3x3 patch, in the left or the right half; action 0 / 1 names the half. Reward 1 for
the right answer, 0 otherwise; a new image every step, 8 steps an episode. The answer is in the
pixels only, so a policy that does not read the image scores 4 on average, one that reads it 8.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

PATCH_SIDE = "PatchSide-v0"
SIZE = 12
STEPS = 8


class PatchSideEnv(gym.Env[np.ndarray, np.int64]):
    metadata = {"render_modes": [], "observation_layout": "channels_first"}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0, 255, (1, SIZE, SIZE), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self._side = 0
        self._t = 0

    def _draw(self) -> np.ndarray:
        self._side = int(self.np_random.integers(2))
        row = int(self.np_random.integers(SIZE - 2))
        col = int(self.np_random.integers(SIZE // 2 - 2)) + self._side * SIZE // 2
        image = np.zeros((1, SIZE, SIZE), np.uint8)
        image[0, row : row + 3, col : col + 3] = 255
        return image

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action: np.int64) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = float(int(action) == self._side)
        self._t += 1
        return self._draw(), reward, self._t >= STEPS, False, {}


gym.register(id=PATCH_SIDE, entry_point=f"{__name__}:PatchSideEnv")
