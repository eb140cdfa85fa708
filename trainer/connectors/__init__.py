"""Connector pipelines between env and module (see base.py for the contract)."""

from __future__ import annotations

import gymnasium as gym

from trainer.config import PPOConfig
from trainer.connectors.base import (
    EnvToModulePiece,
    EnvToModulePipeline,
    ModuleToEnvPiece,
    ModuleToEnvPipeline,
)
from trainer.connectors.env_to_module import (
    BatchObservations,
    FrameStack,
    MeanStdFilter,
    merge_filter_states,
)
from trainer.connectors.module_to_env import ClipActions, DiscreteActions

__all__ = [
    "BatchObservations",
    "ClipActions",
    "DiscreteActions",
    "EnvToModulePipeline",
    "FrameStack",
    "MeanStdFilter",
    "ModuleToEnvPipeline",
    "build_env_to_module",
    "build_module_to_env",
    "merge_filter_states",
]


def build_env_to_module(
    config: PPOConfig, observation_space: gym.spaces.Box, num_envs: int
) -> EnvToModulePipeline:
    """batch -> (normalise) -> (stack): normalise single frames, then stack them."""
    pieces: list[EnvToModulePiece] = [BatchObservations(observation_space)]
    if config.normalize_observations:
        pieces.append(MeanStdFilter(observation_space.shape))
    if config.frame_stack > 1:
        pieces.append(FrameStack(config.frame_stack, num_envs, observation_space.shape))
    return EnvToModulePipeline(observation_space, pieces)


def build_module_to_env(action_space: gym.spaces.Space) -> ModuleToEnvPipeline:
    pieces: list[ModuleToEnvPiece] = (
        [ClipActions(action_space)]
        if isinstance(action_space, gym.spaces.Box)
        else [DiscreteActions(action_space)]
    )
    return ModuleToEnvPipeline(pieces)
