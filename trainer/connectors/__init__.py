"""Connector pipelines between env and module (see base.py for the contract)."""

from __future__ import annotations

import gymnasium as gym

from trainer.config import PPOConfig
from trainer.connectors.base import (
    EnvToLearnerPiece,
    EnvToLearnerPipeline,
    EnvToModulePiece,
    EnvToModulePipeline,
    ModuleToEnvPiece,
    ModuleToEnvPipeline,
)
from trainer.connectors.env_to_learner import ClipRewards, NormalizeRewards
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
    "ClipRewards",
    "DiscreteActions",
    "EnvToLearnerPipeline",
    "EnvToModulePipeline",
    "FrameStack",
    "MeanStdFilter",
    "ModuleToEnvPipeline",
    "NormalizeRewards",
    "build_env_to_learner",
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
        pieces.append(FrameStack(config.frame_stack, num_envs, observation_space))
    return EnvToModulePipeline(observation_space, pieces)


def build_env_to_learner(config: PPOConfig, num_envs: int) -> EnvToLearnerPipeline:
    """clip -> normalise: clipping bounds the raw reward, the normaliser then rescales it."""
    pieces: list[EnvToLearnerPiece] = []
    if config.clip_rewards is not None:
        pieces.append(ClipRewards(config.clip_rewards))
    if config.normalize_rewards:
        pieces.append(NormalizeRewards(num_envs, config.gamma))
    return EnvToLearnerPipeline(pieces)


def build_module_to_env(action_space: gym.spaces.Space) -> ModuleToEnvPipeline:
    pieces: list[ModuleToEnvPiece] = (
        [ClipActions(action_space)]
        if isinstance(action_space, gym.spaces.Box)
        else [DiscreteActions(action_space)]
    )
    return ModuleToEnvPipeline(pieces)
