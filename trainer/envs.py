"""Vector environment creation for EnvRunners, one function per env family.

- gymnasium envs (classic control, Box2D, MuJoCo, users' own `module:EnvId`): the env's native
  vector env when it has one, else a SyncVectorEnv.
- Atari (`ALE/<Game>-v5`): ale-py's threaded C++ AtariVectorEnv, which does the standard
  preprocessing itself (84x84 grey, max-pool over the last two frames, frame skip 4, a stack of
  4 frames as [4, 84, 84], up to 30 no-op starts, FIRE on reset). ale-py registers its ids on
  import; an `ALE/` id imports it when needed, so no `ale_py:` prefix is required.

Image observations get a declared layout (trainer/obs_layout.py): the family knows it, the module
must not guess it from the shape.

Every runner steps a gymnasium vector env in NEXT_STEP autoreset mode, chosen deliberately:
it is gymnasium 1.x's default, the only mode the fast numpy-vectorised envs (CartPole's
`vector_entry_point`) implement, and the step that ends an episode returns the TRUE final
observation s_T in `obs` (no digging in `infos["final_obs"]`). The price is one extra step per
finished episode in which that slot returns its reset observation and ignores the action; the
EnvRunner records that step as a reset, not as a transition (gymnasium's autoreset docs).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from trainer.acrobot import ENV_ID as ACROBOT_ID
from trainer.acrobot import AcrobotVectorEnv
from trainer.obs_layout import METADATA_KEY, declare
from trainer.resolve import env_name, family_of, usable_cores
from trainer.serial_vector_env import SerialVectorEnv

SUPPORTED_ACTIONS = (gym.spaces.Discrete, gym.spaces.Box)
ALE_NAMESPACE = "ALE"


def make_vector_env(
    env_id: str,
    num_envs: int,
    env_config: dict[str, Any],
    *,
    num_threads: int = 1,
    vector_env: str = "native",
) -> gym.vector.VectorEnv:
    """Build `num_envs` copies of `env_id` in NEXT_STEP autoreset mode, checked.

    `num_threads` is how many cores the env may use (families that step sub-envs in threads:
    Atari); `env_config["num_threads"]` overrides it. `vector_env` is PPOConfig's field:
    "serial" steps gymnasium envs one after the other even where a native vector env exists.
    """
    if family_of(env_id) == "atari":
        env = make_atari(env_id, num_envs, env_config, num_threads)
    else:
        env = make_gymnasium(env_id, num_envs, env_config, native=vector_env == "native")
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if mode != AutoresetMode.NEXT_STEP:
        env.close()
        raise ValueError(f"{env_id}: vector env uses autoreset mode {mode}, need NEXT_STEP")
    check_spaces(env_id, env.single_observation_space, env.single_action_space)
    return env


def make_gymnasium(
    env_id: str, num_envs: int, env_config: dict[str, Any], *, native: bool = True
) -> gym.vector.VectorEnv:
    """gymnasium envs, natively vectorised where that exists (and `native`).

    A native vector env (one numpy array op per step for all sub-envs) is ~2x faster than
    stepping CartPole env by env, ~5x for Acrobot: gymnasium's own (`vector_entry_point`), or
    Rollout's for Acrobot-v1 (trainer/acrobot.py). Anything else gets a SerialVectorEnv (same
    process, no pickling; gymnasium's SyncVectorEnv without its per-step info merging and
    copies).
    """
    spec = find_spec(env_id)
    if native and spec.vector_entry_point is not None:
        return gym.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_config
        )
    if native and env_id == ACROBOT_ID and set(env_config) <= {"max_episode_steps"}:
        return AcrobotVectorEnv(num_envs, env_config.get("max_episode_steps"))
    return SerialVectorEnv([functools.partial(gym.make, env_id, **env_config)] * num_envs)


def make_atari(
    env_id: str, num_envs: int, env_config: dict[str, Any], num_threads: int
) -> gym.vector.VectorEnv:
    """ale-py's AtariVectorEnv: `num_envs` games stepped by a pool of C++ threads.

    Rewards come out unclipped (`reward_clipping=False`: episode returns are the game's score;
    clipping for learning is the `clip_rewards` connector). Observations are uint8 [4, 84, 84]
    frame stacks, declared channels first.
    """
    find_spec(env_id)  # registers the ALE ids, with a clear error when ale-py is missing
    kwargs: dict[str, Any] = {"num_threads": num_threads, **env_config}
    if kwargs.get("reward_clipping"):
        raise ValueError(
            f"{env_id}: env_config reward_clipping would make episode returns clipped; "
            "set clip_rewards (learning rewards only) instead"
        )
    if kwargs.get("batch_size", 0) not in (0, num_envs):
        raise ValueError(f"{env_id}: env_config batch_size (ale-py's async mode) is not supported")
    kwargs["reward_clipping"] = False
    env = gym.make_vec(
        env_name(env_id), num_envs=num_envs, vectorization_mode="vector_entry_point", **kwargs
    )
    # ale-py writes into the class-level VectorEnv.metadata; give this env its own dict.
    env.metadata = {**env.metadata, METADATA_KEY: "channels_first"}
    return env


def env_threads(num_cpus_per_env_runner: float, in_actor: bool, *, overlap: bool = False) -> int:
    """Threads an EnvRunner's vector env may use: a Ray actor owns the CPUs Ray reserved for it;
    in serial mode every core of the process, less one for the Learner's thread with
    overlapped sampling, which keeps running meanwhile. The sampling thread needs no core of
    its own: the vector env steps synchronously, so the env's threads run while it waits in
    step() and its inference runs while they wait for the next actions (Pong, 64 envs, 2
    cores: 1,135 env steps/s end to end with 2 env threads against 922 with 1). torch's
    threads are not subtracted for the same reason."""
    if in_actor:
        return max(1, int(num_cpus_per_env_runner))
    return max(1, usable_cores() - int(overlap))


def observation_space(env: gym.vector.VectorEnv) -> gym.spaces.Box:
    """The single-env observation space, with its image layout declared by the env (metadata
    key "observation_layout"), else gymnasium's [H, W, C] convention."""
    return declare(env.single_observation_space, env.metadata.get(METADATA_KEY))


def find_spec(env_id: str) -> EnvSpec:
    """The registered spec of `env_id`, accepting gymnasium's `"module:EnvId"` form.

    `gym.make` / `gym.make_vec` import `module` first (it registers `EnvId` on import: how users
    bring their own envs), but `gym.spec` does not, so do the same here, with errors that say
    which part is missing: the module, or the env in it.
    """
    module, sep, name = env_id.partition(":")
    if not sep:
        if env_id.startswith(f"{ALE_NAMESPACE}/"):
            _register_ale(env_id)
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


def _register_ale(env_id: str) -> None:
    """ale-py registers every `ALE/<Game>-v5` id when imported (done lazily: it loads ROMs)."""
    try:
        importlib.import_module("ale_py")
    except ImportError as exc:
        raise ValueError(f"{env_id} needs ale-py (pip install ale-py): {exc}") from None


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
    """Single-env observation (layout declared) and action spaces, from one throwaway sub-env."""
    env = make_vector_env(env_id, 1, env_config)
    try:
        return observation_space(env), env.single_action_space
    finally:
        env.close()


def runner_seed(seed: int, worker_index: int, generation: int = 0) -> int:
    """A distinct, reproducible reset seed per (experiment seed, runner, restart generation).

    gymnasium seeds sub-env k of a vector env with `seed + k`; hashing through SeedSequence keeps
    the runners of one experiment (and of neighbouring seeds) from sharing sub-env streams.
    """
    state = np.random.SeedSequence([seed, worker_index, generation]).generate_state(1)
    return int(state[0] % (2**31 - 4096))


def make_eval_env(env_id: str, env_config: dict[str, Any], *, render: bool = False) -> Any:
    """One env with gymnasium's Env API for evaluation: `gym.make`, or for Atari one sub-env of
    the AtariVectorEnv the policy was trained on (the same preprocessing, frame size and stack;
    a single ALE env from `gym.make` would give raw 210x160 colour frames). With `render`, the
    env renders `rgb_array` frames (it may refuse: gymnasium's error, or render_mode not set)."""
    if family_of(env_id) == "atari":
        return AtariEvalEnv(env_id, env_config)
    extra = {"render_mode": "rgb_array"} if render else {}
    return gym.make(env_id, **{**env_config, **extra})


class AtariEvalEnv:
    """A one-game AtariVectorEnv as a single env. Its frames are what the agent sees (the
    newest grey frame of the stack, scaled up 4x), so a video shows the policy's own input."""

    render_mode = "rgb_array"
    spec = None
    SCALE = 4

    def __init__(self, env_id: str, env_config: dict[str, Any]) -> None:
        self._vec = make_atari(env_id, 1, env_config, num_threads=1)
        self.observation_space = observation_space(self._vec)
        self.action_space = self._vec.single_action_space
        frameskip = int(env_config.get("frameskip", 4))
        frames = int(env_config.get("max_num_frames_per_episode", 108_000))
        self.max_episode_steps = frames // max(1, frameskip)
        self.metadata = {"render_fps": 60 // max(1, frameskip)}
        self._obs: np.ndarray | None = None

    def reset(self, *, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        obs, _ = self._vec.reset(seed=seed)
        self._obs = obs[0]
        return obs[0], {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, _ = self._vec.step(np.asarray([action]))
        self._obs = obs[0]
        return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def render(self) -> np.ndarray:
        """[H*4, W*4, 3] uint8: the newest frame of the stack, grey as the agent sees it."""
        if self._obs is None:
            raise RuntimeError("render() before reset()")
        frame = self._obs[-1] if self._obs.ndim == 3 else self._obs
        big = np.repeat(np.repeat(frame, self.SCALE, axis=0), self.SCALE, axis=1)
        return np.repeat(big[:, :, None], 3, axis=2)

    def close(self) -> None:
        self._vec.close()
