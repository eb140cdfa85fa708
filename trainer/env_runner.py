"""EnvRunner: steps a vector env with an inference-only policy and returns episode chunks.

It only acts: actions, their log-probs and distribution inputs. Values, bootstrapping and GAE
are the Learner's job (RLlib new API stack, PR #42272). It acts through the policy
trainer/policy.py chooses: for an MLP on a CPU the numpy one (the same forward pass and draws,
from the runner's own generator, `rng`), for a CNN or a GPU the torch module. A plain class:
`ray.remote` is applied once, in env_runner_group.py, and serial mode uses it as is.

Recording: every sample() call fills preallocated [K, N] numpy buffers (K vector steps, N
sub-envs) and slices them into EpisodeChunks at the end; no per-step Python dicts. The buffers
are kept across calls and the chunks are views into them (no copy per chunk): a set of buffers
is written again only once no chunk of it is alive any more (`_Buffers.in_use`), so a batch a
Learner still trains on (overlapped sampling) is never overwritten; the next call takes
another set. On a GPU the observation buffer is pinned, so each step's frames go to the device
straight from it, on the runner's own CUDA stream (the Learner's kernels queue on theirs), and
actions, log-probs and distribution inputs come back in one copy per step. The vector
env runs in NEXT_STEP autoreset mode (see envs.py): the step that ends an episode returns the
true final observation s_T, and the following step of that slot is an "autoreset step" that
returns the new episode's first observation and ignores the action. Autoreset steps are marked
in `reset_buf` and are neither transitions nor counted env steps.

Rewards: chunks carry the learning rewards (the env-to-learner connectors: clipping,
normalisation); episode returns are summed from the env's raw rewards, so they stay the game's
score. The connector state of both pipelines travels as one dict (names are unique).
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from trainer import distributions
from trainer.config import PPOConfig
from trainer.connectors import build_env_to_learner, build_env_to_module, build_module_to_env
from trainer.devices import StepOutputs, inference_device, set_cpu_threads
from trainer.envs import env_threads, make_vector_env, observation_space, runner_seed
from trainer.episode import EpisodeChunk
from trainer.module import PPOModule
from trainer.policy import SDENoise, make_policy


@dataclass(frozen=True)
class SampleResult:
    """What one sample() call hands to the driver."""

    chunks: list[EpisodeChunk]
    episode_returns: list[float]  # episodes finished in this call, summed over all their chunks
    episode_lengths: list[int]
    env_steps: int  # transitions recorded (autoreset steps excluded)
    weights_version: int
    time_env_s: float  # env.step
    time_inference_s: float  # module.sample incl. tensor <-> numpy
    time_total_s: float
    connector_delta: dict[str, Any] = field(default_factory=dict)  # filter stats since last sync
    worker_index: int = 0


@dataclass
class _Buffers:
    """Preallocated per-call recording: row k of obs is the module input before step k."""

    obs: np.ndarray  # [K+1, N, *obs]
    actions: np.ndarray  # [K, N, *action] as sampled
    logp: np.ndarray  # [K, N]
    dist_inputs: np.ndarray  # [K, N, D]
    rewards: np.ndarray  # [K, N] learning rewards (env-to-learner output)
    raw_rewards: np.ndarray  # [K, N] the env's rewards (episode returns)
    terminated: np.ndarray  # [K, N] bool
    truncated: np.ndarray  # [K, N] bool
    reset: np.ndarray  # [K, N] bool: step k was an autoreset step for that slot

    @staticmethod
    def allocate(
        k: int, n: int, obs: np.ndarray, action: np.ndarray, d: int, *, pin: bool = False
    ) -> _Buffers:
        """obs [N, *obs] and action [1, *action] give the row shapes and dtypes; `pin` puts the
        observations in page-locked memory (DMA to a GPU without a staging copy)."""
        obs_shape = (k + 1, n, *obs.shape[1:])
        return _Buffers(
            obs=_pinned(obs_shape, obs.dtype) if pin else np.empty(obs_shape, obs.dtype),
            actions=np.empty((k, n, *action.shape[1:]), action.dtype),
            logp=np.empty((k, n), np.float32),
            dist_inputs=np.empty((k, n, d), np.float32),
            rewards=np.empty((k, n), np.float32),
            raw_rewards=np.empty((k, n), np.float64),
            terminated=np.empty((k, n), bool),
            truncated=np.empty((k, n), bool),
            reset=np.empty((k, n), bool),
        )

    def grown(self, *, pin: bool = False) -> _Buffers:
        """Twice the capacity, same content (rare: only when many episodes end in one call)."""
        out = {
            name: np.concatenate([arr, np.empty_like(arr[: len(arr) - (name == "obs")])])
            for name, arr in vars(self).items()
        }
        if pin:
            out["obs"] = _pinned(out["obs"].shape, out["obs"].dtype, fill=out["obs"])
        return _Buffers(**out)

    def refcounts(self) -> list[int]:
        return [sys.getrefcount(arr) for arr in vars(self).values()]

    def in_use(self, baseline: list[int]) -> bool:
        """Whether a chunk (any view, or anything else) still holds one of these arrays: a
        numpy view keeps a reference to the array it was sliced from (CPython refcounts)."""
        return any(now > base for now, base in zip(self.refcounts(), baseline, strict=True))


def _pinned(shape: tuple[int, ...], dtype: np.dtype, fill: np.ndarray | None = None) -> np.ndarray:
    """A numpy array in pinned host memory (a view of a pinned torch tensor, kept alive by it)."""
    example = torch.from_numpy(np.empty(0, dtype))
    array = torch.empty(shape, dtype=example.dtype, pin_memory=True).numpy()
    if fill is not None:
        array[...] = fill
    return array


# The SeedSequence key of a runner's action stream, next to its env seed.
_ACTION_STREAM = 1
# Sets of sample buffers an EnvRunner keeps: the one being filled, the one a Learner trains on
# while it is (overlap), and one spare; sets beyond that are left to the chunks that hold them.
_BUFFER_POOL = 3


class EnvRunner:
    """A gymnasium vector env + env-to-module / module-to-env connectors + an inference-only
    PPOModule. Episodes continue across sample() calls under the same id."""

    def __init__(
        self,
        config: PPOConfig,
        worker_index: int = 0,
        generation: int = 0,
        *,
        seed_torch: bool = False,
    ) -> None:
        self.config = config
        self.worker_index = worker_index
        self._seed = runner_seed(config.seed, worker_index, generation)
        if seed_torch:  # own process: own torch RNG for action sampling
            torch.manual_seed(self._seed)
        self.num_envs = config.num_envs_per_env_runner
        in_actor = worker_index > 0
        cpu_threads = config.torch_num_threads
        if in_actor:  # an actor computes on the CPUs Ray reserved for it, not the node's cores
            cpu_threads = max(1, min(cpu_threads, int(config.num_cpus_per_env_runner)))
        threads = env_threads(
            config.num_cpus_per_env_runner, in_actor, overlap=config.overlap_sampling
        )
        self.env = make_vector_env(
            config.env_id,
            self.num_envs,
            config.env_config,
            num_threads=threads,
            vector_env=config.vector_env,
        )
        obs_space = observation_space(self.env)  # image layout declared by the env family
        self.action_space = self.env.single_action_space
        self.env_to_module = build_env_to_module(config, obs_space, self.num_envs)
        self.env_to_learner = build_env_to_learner(config, self.num_envs)
        self.module_to_env = build_module_to_env(self.action_space)
        self.device = inference_device(config, local=worker_index == 0)
        self.module = PPOModule(
            self.env_to_module.output_space, self.action_space, config.model, inference_only=True
        ).to(self.device)
        self.module.eval()
        # The actions' own random stream (the numpy policy's draws), apart from the env resets'.
        self.rng = np.random.default_rng([self._seed, _ACTION_STREAM])
        set_cpu_threads(cpu_threads)
        self._on_gpu = self.device.type == "cuda"
        # Sampling gets its own stream: with overlap, its small kernels and copies would
        # otherwise wait behind the Learner's queued SGD kernels on the default stream.
        self._stream = torch.cuda.Stream(self.device) if self._on_gpu else None
        self._pool: list[tuple[_Buffers, list[int]]] = []  # (buffers, their idle refcounts)
        self._dist_dim = distributions.dist_inputs_dim(self.action_space)
        self._action_example = (  # [1, *action]: dtype and shape of what the module samples
            np.zeros((1, *self.action_space.shape), np.float32)
            if isinstance(self.action_space, gym.spaces.Box)
            else np.zeros(1, np.int64)
        )
        self.policy = make_policy(
            self.module,
            self.device,
            self.rng,
            outputs=StepOutputs(self.num_envs, self._action_example, self._dist_dim),
            stream=self._stream,
            pinned=self._on_gpu,  # the observation buffers are pinned on a GPU
        )
        self.weights_version = -1
        # Per-slot episode state, carried across sample() calls.
        n = self.num_envs
        self._obs: np.ndarray | None = None  # [N, *obs] module input for the next step
        self._pending_reset = np.zeros(n, bool)  # next step of the slot is an autoreset step
        self._ep_ids = [uuid.uuid4().hex for _ in range(n)]
        self._ep_t = np.zeros(n, np.int64)  # steps already taken in the slot's episode
        self._ep_return = np.zeros(n, np.float64)
        # [N, hidden, A] gSDE exploration matrices, in the policy's form
        self._sde_noise: SDENoise | None = None

    # --- weights and connector state -----------------------------------------------------------
    def set_weights(
        self,
        version: int,
        weights: dict[str, np.ndarray],
        connector_state: dict[str, Any] | None = None,
    ) -> bool:
        """Load policy weights unless they are older than what this runner has. Connector state
        (merged observation / reward filter stats) is applied whenever given. Returns True if
        loaded."""
        if connector_state is not None:
            self.env_to_module.set_state(connector_state)
            self.env_to_learner.set_state(connector_state)
        if version <= self.weights_version:
            return False
        self.module.load_inference_state_dict(weights)
        self.policy.sync()
        self.weights_version = version
        return True

    def get_connector_state(self) -> dict[str, Any]:
        return {**self.env_to_module.get_state(), **self.env_to_learner.get_state()}

    def ping(self) -> int:
        return self.worker_index

    def get_rng_state(self) -> dict[str, Any]:
        """The action stream's state (numpy policy): what a checkpoint needs to resume the same
        draws."""
        return self.rng.bit_generator.state

    def set_rng_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state

    # --- sampling ------------------------------------------------------------------------------
    def sample(self, num_timesteps: int, explore: bool = True) -> SampleResult:
        """Step all sub-envs until at least `num_timesteps` transitions are recorded (may
        overshoot by up to N-1), then return the finished episodes and the cut ongoing ones.

        The chunks are views into this runner's buffers, which are reused once no chunk of a
        call is alive; copy a chunk's arrays to change them."""
        t_start = time.perf_counter()
        n = self.num_envs
        if self._obs is None:
            raw, _ = self.env.reset(seed=self._seed)
            self._obs = self.env_to_module(raw, np.ones(n, bool))
        buf = self._take_buffers(math.ceil(num_timesteps / n) + 8)
        buf.obs[0] = self._obs
        time_env = time_inf = 0.0
        steps = k = 0
        with self._sampling_stream():
            while steps < num_timesteps:
                if k == len(buf.rewards):
                    buf = self._grow(buf)
                t0 = time.perf_counter()
                if self.module.use_sde and explore and self._sde_due(k):
                    self._sde_noise = self.new_sde_noise(n)
                actions_np = self._act(buf, k, explore)  # waits for the device
                t1 = time.perf_counter()
                raw, rewards, terminated, truncated, _ = self.env.step(
                    self.module_to_env(actions_np)
                )
                t2 = time.perf_counter()
                is_reset = self._pending_reset
                done = terminated | truncated
                buf.reset[k] = is_reset
                buf.raw_rewards[k] = rewards
                buf.rewards[k] = self.env_to_learner(rewards, done, ~is_reset)
                buf.terminated[k] = terminated
                buf.truncated[k] = truncated
                buf.obs[k + 1] = self.env_to_module(raw, is_reset)
                self._pending_reset = done
                steps += n - int(is_reset.sum())
                k += 1
                time_inf += t1 - t0
                time_env += t2 - t1
        self._obs = buf.obs[k].copy()
        chunks, returns, lengths = self._slice(buf, k)
        return SampleResult(
            chunks=chunks,
            episode_returns=returns,
            episode_lengths=lengths,
            env_steps=steps,
            weights_version=self.weights_version,
            time_env_s=time_env,
            time_inference_s=time_inf,
            time_total_s=time.perf_counter() - t_start,
            connector_delta={
                **self.env_to_module.pop_deltas(),
                **self.env_to_learner.pop_deltas(),
            },
            worker_index=self.worker_index,
        )

    def _sde_due(self, k: int) -> bool:
        """gSDE draws new exploration matrices at the start of each sample() call and then every
        sde_sample_freq vector steps, as SB3's collect_rollouts."""
        freq = self.config.sde_sample_freq
        return k == 0 or (freq > 0 and k % freq == 0)

    def new_sde_noise(self, n: int) -> SDENoise:
        """Fresh gSDE exploration matrices for n sub-envs."""
        return self.policy.sde_noise(n)

    def _act(self, buf: _Buffers, k: int, explore: bool) -> np.ndarray:
        """The policy on row k of the observations: fills actions, logp and dist inputs of
        step k and returns the actions as sampled."""
        actions_np, buf.logp[k], buf.dist_inputs[k] = self.policy.sample(
            buf.obs[k], explore, self._sde_noise
        )
        buf.actions[k] = actions_np
        return actions_np

    def _sampling_stream(self) -> contextlib.AbstractContextManager[object]:
        """This runner's CUDA stream, after what the default stream queued (loaded weights)."""
        if self._stream is None:
            return contextlib.nullcontext()
        self._stream.wait_stream(torch.cuda.current_stream(self.device))
        return torch.cuda.stream(self._stream)

    def _take_buffers(self, capacity: int) -> _Buffers:
        """A kept set of buffers that no chunk holds any more, or a new one."""
        for buf, baseline in self._pool:
            if len(buf.rewards) >= capacity and not buf.in_use(baseline):
                return buf
        buf = _Buffers.allocate(
            capacity, self.num_envs, self._obs, self._action_example, self._dist_dim,
            pin=self._on_gpu,
        )  # fmt: skip
        self._keep(buf)
        return buf

    def _grow(self, buf: _Buffers) -> _Buffers:
        bigger = buf.grown(pin=self._on_gpu)
        self._pool = [(b, base) for b, base in self._pool if b is not buf]
        self._keep(bigger)
        return bigger

    def _keep(self, buf: _Buffers) -> None:
        # Sets a chunk still holds are dropped first (they are freed with their last chunk).
        free = [(b, base) for b, base in self._pool if not b.in_use(base)]
        held = [(b, base) for b, base in self._pool if b.in_use(base)]
        self._pool = (held + free)[-(_BUFFER_POOL - 1) :] if _BUFFER_POOL > 1 else []
        self._pool.append((buf, buf.refcounts()))

    def _slice(self, buf: _Buffers, k: int) -> tuple[list[EpisodeChunk], list[float], list[int]]:
        """Cut the [K, N] buffers into per-episode chunks; update the per-slot episode state."""
        chunks: list[EpisodeChunk] = []
        returns: list[float] = []
        lengths: list[int] = []
        done = buf.terminated[:k] | buf.truncated[:k]  # [K, N]
        for slot in range(self.num_envs):
            # An autoreset step at step 0 belongs to no episode: the new one starts at step 1.
            start = 1 if buf.reset[0, slot] else 0
            for end in np.flatnonzero(done[:, slot]):
                chunks.append(self._chunk(buf, slot, start, end + 1, done=True))
                returns.append(float(self._ep_return[slot]))
                lengths.append(int(self._ep_t[slot]))
                self._ep_ids[slot] = uuid.uuid4().hex
                self._ep_t[slot] = 0
                self._ep_return[slot] = 0.0
                start = end + 2  # end + 1 is the slot's autoreset step
            if start < k:
                chunks.append(self._chunk(buf, slot, start, k, done=False))
        return chunks, returns, lengths

    def _chunk(self, buf: _Buffers, slot: int, start: int, stop: int, done: bool) -> EpisodeChunk:
        """Steps [start, stop) of one slot; obs rows [start, stop] (obs[T] = s_T or the cut)."""
        chunk = EpisodeChunk(  # views: the buffers are not reused while the chunk lives
            id=self._ep_ids[slot],
            t_started=int(self._ep_t[slot]),
            obs=buf.obs[start : stop + 1, slot],
            actions=buf.actions[start:stop, slot],
            rewards=buf.rewards[start:stop, slot],
            logp=buf.logp[start:stop, slot],
            dist_inputs=buf.dist_inputs[start:stop, slot],
            terminated=done and bool(buf.terminated[stop - 1, slot]),
            truncated=done and bool(buf.truncated[stop - 1, slot]),
            weights_version=self.weights_version,
        )
        self._ep_t[slot] += stop - start
        self._ep_return[slot] += float(buf.raw_rewards[start:stop, slot].sum())
        return chunk

    def stop(self) -> None:
        self.env.close()
