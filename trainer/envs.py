"""Vector environment creation for EnvRunners.

Every runner steps a gymnasium vector env in NEXT_STEP autoreset mode, chosen deliberately:
it is gymnasium 1.x's default, the only mode the fast numpy-vectorised envs (CartPole's
`vector_entry_point`) implement, and the step that ends an episode returns the TRUE final
observation s_T in `obs` (no digging in `infos["final_obs"]`). The price is one extra step per
finished episode in which that slot returns its reset observation and ignores the action; the
EnvRunner records that step as a reset, not as a transition (gymnasium's autoreset docs).
"""

from __future__ import annotations

import importlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

SUPPORTED_ACTIONS = (gym.spaces.Discrete, gym.spaces.Box)


def make_vector_env(env_id: str, num_envs: int, env_config: dict[str, Any]) -> gym.vector.VectorEnv:
    """Build `num_envs` copies of `env_id`, natively vectorised when gymnasium offers it.

    A native vector env (one numpy array op per step for all sub-envs) is ~2x faster than
    SyncVectorEnv for CartPole; anything else gets a SyncVectorEnv (same process, no pickling).
    """
    spec = find_spec(env_id)
    if spec.vector_entry_point is not None:
        env = gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_config
        )
    else:
        env = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
            **env_config,
        )
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if mode != AutoresetMode.NEXT_STEP:
        env.close()
        raise ValueError(f"{env_id}: vector env uses autoreset mode {mode}, need NEXT_STEP")
    check_spaces(env_id, env.single_observation_space, env.single_action_space)
    return env


def find_spec(env_id: str) -> EnvSpec:
    """The registered spec of `env_id`, accepting gymnasium's `"module:EnvId"` form.

    `gym.make` / `gym.make_vec` import `module` first (it registers `EnvId` on import: how users
    bring their own envs), but `gym.spec` does not, so do the same here, with errors that say
    which part is missing: the module, or the env in it.
    """
    module, sep, name = env_id.partition(":")
    if not sep:
        return gym.spec(env_id)
    if not module or not name:
        raise ValueError(f"env id {env_id!r}: expected 'module:EnvId'")
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"cannot import module {module!r} to register {name!r}: {exc} "
            "(it must be importable by the trainer: installed, or in its working directory)"
        ) from None
    try:
        return gym.spec(name)
    except gym.error.Error as exc:
        raise ValueError(f"module {module!r} does not register env {name!r}: {exc}") from None


def check_spaces(env_id: str, observation_space: gym.Space, action_space: gym.Space) -> None:
    """Reject spaces the PPO module cannot handle, with a message that names them."""
    if not isinstance(observation_space, gym.spaces.Box):
        raise ValueError(
            f"{env_id}: observation space {observation_space} is not supported "
            "(only Box observations; flatten Dict/Tuple spaces with a gymnasium wrapper)"
        )
    if not isinstance(action_space, SUPPORTED_ACTIONS):
        raise ValueError(
            f"{env_id}: action space {action_space} is not supported (Discrete or Box only)"
        )
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) != 1:
        raise ValueError(f"{env_id}: Box actions must be 1-D, got shape {action_space.shape}")


def env_spaces(env_id: str, env_config: dict[str, Any]) -> tuple[gym.spaces.Box, gym.spaces.Space]:
    """Single-env observation and action spaces, from one throwaway sub-env."""
    env = make_vector_env(env_id, 1, env_config)
    try:
        return env.single_observation_space, env.single_action_space
    finally:
        env.close()


def runner_seed(seed: int, worker_index: int, generation: int = 0) -> int:
    """A distinct, reproducible reset seed per (experiment seed, runner, restart generation).

    gymnasium seeds sub-env k of a vector env with `seed + k`; hashing through SeedSequence keeps
    the runners of one experiment (and of neighbouring seeds) from sharing sub-env streams.
    """
    state = np.random.SeedSequence([seed, worker_index, generation]).generate_state(1)
    return int(state[0] % (2**31 - 4096))
