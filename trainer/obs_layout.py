"""Image observation layouts, declared by the env pipeline instead of guessed from the shape.

A [4, 84, 84] Atari stack and a [84, 84, 4] one cannot be told apart by their shapes, so the
env family says which it produces (trainer/envs.py), the env-to-module connectors keep the
declaration on the spaces they output, and PPOModule's CNN reads it from its observation space.
gymnasium's Box has no such field: `ImageBox` is a Box that carries it (and pickles with it, so
Learner actors get it too).

A plain 3-D Box without a declaration follows gymnasium's own convention for pixels, [H, W, C]
(`render()` arrays, CarRacing, the pixel-observation wrappers).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import gymnasium as gym
import numpy as np

Layout = Literal["channels_first", "channels_last"]
LAYOUTS: tuple[str, ...] = get_args(Layout)
GYMNASIUM_IMAGE_LAYOUT: Layout = "channels_last"
METADATA_KEY = "observation_layout"  # how an env declares it: env.metadata["observation_layout"]


class ImageBox(gym.spaces.Box):
    """A Box of images whose axis order is declared: [C, H, W] or [H, W, C]."""

    def __init__(
        self,
        low: Any,
        high: Any,
        shape: tuple[int, ...] | None = None,
        dtype: Any = np.uint8,
        seed: int | None = None,
        *,
        layout: Layout,
    ) -> None:
        super().__init__(low, high, shape, dtype, seed)
        if len(self.shape) != 3:
            raise ValueError(f"an image space is 3-D, got shape {self.shape}")
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
        self.layout: Layout = layout

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and getattr(other, "layout", None) == self.layout

    def __repr__(self) -> str:
        return f"ImageBox({self.shape}, {self.dtype}, {self.layout})"


def image_layout(space: gym.spaces.Box) -> Layout:
    """The declared layout of an image space (gymnasium's [H, W, C] when undeclared)."""
    if len(space.shape) != 3:
        raise ValueError(f"not an image space: shape {space.shape}")
    return getattr(space, "layout", GYMNASIUM_IMAGE_LAYOUT)


def declare(space: gym.spaces.Box, layout: str | None) -> gym.spaces.Box:
    """`space` with `layout` attached when it is an image space; other spaces unchanged."""
    if len(space.shape) != 3:
        return space
    if layout is None:
        layout = image_layout(space)
    if layout not in LAYOUTS:
        raise ValueError(f"observation layout must be one of {LAYOUTS}, got {layout!r}")
    return ImageBox(space.low, space.high, space.shape, space.dtype, layout=layout)  # type: ignore[arg-type]


def like(
    space: gym.spaces.Box, low: Any, high: Any, shape: tuple[int, ...], dtype: Any
) -> gym.spaces.Box:
    """A new Box with `space`'s declared layout (connectors that change bounds or shape)."""
    box = gym.spaces.Box(low, high, shape, dtype)
    return declare(box, image_layout(space)) if len(space.shape) == 3 else box


def channel_axis(space: gym.spaces.Box) -> int:
    """Axis of one observation along which channels (and stacked frames) go."""
    return 0 if len(space.shape) == 3 and image_layout(space) == "channels_first" else -1
