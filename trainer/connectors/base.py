"""Connector pipelines: small composable steps between the env and the module.

Axis vocabulary: N sub-envs of one vector env; observations arrive as [N, *obs_shape].
env-to-module pieces map [N, *in_shape] -> [N, *out_shape] and may keep state (a running
observation filter, a frame stack); module-to-env pieces map actions [N, *action_shape] as
sampled to what the env receives; env-to-learner pieces map the env's rewards [N] to the
rewards the Learner trains on (clipping, normalisation). The learner-side connector (chunks ->
train batch) lives in trainer/batch.py. Chunks store the module's input (the env-to-module
output) and the learning rewards, so Learners never re-run these pieces.

Stateful pieces (running statistics) expose get_state / set_state / pop_delta under a unique
`name`; the EnvRunner hands the state of all its pipelines around as one dict.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np


class EnvToModulePiece(Protocol):
    def output_space(self, space: gym.spaces.Box) -> gym.spaces.Box:
        """The observation space after this piece (the module is built for the last one)."""
        ...

    def __call__(self, obs: np.ndarray, reset_mask: np.ndarray) -> np.ndarray:
        """obs [N, *in_shape], reset_mask [N] bool (slot starts a new episode) -> [N, *out]."""
        ...


class _StatefulPipeline:
    """State of the stateful pieces, by name (merged across runners and checkpointed)."""

    pieces: list[Any]

    def stateful(self) -> dict[str, Any]:
        """Pieces whose state is merged across runners and checkpointed, by name."""
        return {p.name: p for p in self.pieces if hasattr(p, "get_state")}  # type: ignore[attr-defined]

    def get_state(self) -> dict[str, Any]:
        return {name: p.get_state() for name, p in self.stateful().items()}

    def set_state(self, state: dict[str, Any]) -> None:
        for name, p in self.stateful().items():
            if name in state:
                p.set_state(state[name])

    def pop_deltas(self) -> dict[str, Any]:
        """What each stateful piece learned since the last sync (merged by the driver)."""
        return {name: p.pop_delta() for name, p in self.stateful().items()}


class EnvToModulePipeline(_StatefulPipeline):
    """Runs env-to-module pieces in order; the last output space is what the module is built
    for (an image space keeps its declared layout, trainer/obs_layout.py)."""

    def __init__(self, input_space: gym.spaces.Box, pieces: list[EnvToModulePiece]) -> None:
        self.pieces = pieces
        self.input_space = input_space
        space = input_space
        for piece in pieces:
            space = piece.output_space(space)
        self.output_space = space

    def __call__(self, obs: np.ndarray, reset_mask: np.ndarray) -> np.ndarray:
        for piece in self.pieces:
            obs = piece(obs, reset_mask)
        return obs


class EnvToLearnerPiece(Protocol):
    def __call__(self, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """rewards [N] of one vector step, done [N] (terminated | truncated), valid [N] (False on
        autoreset rows, which are no transitions) -> learning rewards [N] float32."""
        ...


class EnvToLearnerPipeline(_StatefulPipeline):
    """Runs env-to-learner pieces in order; with none, rewards pass as float32."""

    def __init__(self, pieces: list[EnvToLearnerPiece]) -> None:
        self.pieces = pieces

    def __call__(self, rewards: np.ndarray, done: np.ndarray, valid: np.ndarray) -> np.ndarray:
        out = np.asarray(rewards, np.float32)
        for piece in self.pieces:
            out = piece(out, done, valid)
        return out


class ModuleToEnvPiece(Protocol):
    def __call__(self, actions: np.ndarray) -> np.ndarray:
        """actions [N, *action_shape] as sampled -> actions the env receives."""
        ...


class ModuleToEnvPipeline:
    def __init__(self, pieces: list[ModuleToEnvPiece]) -> None:
        self.pieces = pieces

    def __call__(self, actions: np.ndarray) -> np.ndarray:
        for piece in self.pieces:
            actions = piece(actions)
        return actions
